#!/usr/bin/env python3
"""forward.py — an independent float64 forward pass of llama / qwen2 / qwen3 / gemma3 GGUF models,
the numpy oracle next to the ref route (tests/t4400-ref.sh).

Written from the architectures' definitions, not from 1b's C code:
  h = token embedding
  per layer:  x = RMSNorm(h) * attn_norm            RMSNorm(x) = x / sqrt(mean(x^2) + eps)
              q, k, v = x Wq^T (+bq), x Wk^T (+bk), x Wv^T (+bv)      (biases: qwen2)
              split into heads; qwen3: q, k = RMSNorm per head * q_norm, k_norm
              rotary position embedding on the first n_rot dims of every head, angle
                pos * base^(-2i / n_rot) for pair i: qwen2/qwen3 rotate (i, i + n_rot/2) (the
                HF "rotate_half" layout), llama GGUFs rotate (2i, 2i + 1) (the converter
                permutes Wq and Wk into that layout)
              causal softmax(q k^T / sqrt(head_dim)) v, query head j reading kv head
                j // (n_head / n_head_kv)                                (GQA)
              h = h + attn Wo^T
              x = RMSNorm(h) * ffn_norm;  h = h + (silu(x Wg^T) * (x Wu^T)) Wd^T   (SwiGLU)
  logits = (RMSNorm(h) * output_norm) Wout^T, Wout = token_embd when output.weight is absent.
Gemma 3 (Hugging Face's modeling_gemma3.py; the GGUF's norm weights already hold its 1 + w):
  h = token embedding * sqrt(n_embd)
  per layer:  x = RMSNorm(h) * attn_norm;  q, k, v;  q, k = RMSNorm per head * q_norm, k_norm
              rope (i, i + n_rot/2) with base rope.freq_base on global layers and
                rope.freq_base_swa (default 10000) on local ones; layer l is global when
                l % P == P - 1, P = attention.sliding_window_pattern (default 6)
              softmax(q k^T / sqrt(query_pre_attn_scalar)) v, the scalar = head_dim (n_embd /
                n_head for the 62-layer 27B); on local layers key j is visible to query i only
                when i - j < attention.sliding_window
              h = h + RMSNorm(attn Wo^T) * post_attention_norm
              x = RMSNorm(h) * ffn_norm
              h = h + RMSNorm((gelu(x Wg^T) * (x Wu^T)) Wd^T) * post_ffw_norm,
                gelu(g) = 0.5 g (1 + tanh(sqrt(2/pi) (g + 0.044715 g^3)))
Weights come from gguf.GGUFReader and gguf.quants.dequantize (float32), widened to float64;
every operation after that is float64 numpy.

  forward.py MODEL TOKENS -o OUT.f64
      TOKENS: comma-separated ids at positions 0, 1, ...; writes the logits of every position
      as raw little-endian float64 [n_tokens][n_vocab].
  forward.py MODEL TOKENS --compare OTHER.f64 [--bound B|auto]
      compares another float64 dump with this oracle; prints one JSON line:
        max_abs   max |a - b|
        max_rel   max over positions of max_v |a - b| / max_v |b| (error relative to the
                  position's largest logit: logits near zero make elementwise ratios
                  meaningless)
      and exits 1 when max_rel > B. "auto" is the first-order worst case of two float64
      evaluations of the same graph (see rounding_bound).
"""
import argparse
import json
import sys

import numpy as np
from gguf import GGUFReader
from gguf.quants import dequantize


class Model:
    def __init__(self, path):
        self.r = GGUFReader(path)
        self.t = {t.name: t for t in self.r.tensors}
        arch = self.field("general.architecture")
        if arch not in ("llama", "qwen2", "qwen3", "gemma3"):
            raise SystemExit(f"forward.py: architecture {arch} is not one of llama, qwen2, "
                             "qwen3, gemma3")
        self.arch = arch
        self.n_embd = int(self.field(f"{arch}.embedding_length"))
        self.n_layer = int(self.field(f"{arch}.block_count"))
        self.n_head = int(self.field(f"{arch}.attention.head_count"))
        self.n_head_kv = int(self.field(f"{arch}.attention.head_count_kv", self.n_head))
        self.head_dim = int(self.field(f"{arch}.attention.key_length", self.n_embd // self.n_head))
        self.n_rot = int(self.field(f"{arch}.rope.dimension_count", self.head_dim))
        self.eps = float(self.field(f"{arch}.attention.layer_norm_rms_epsilon"))
        self.base = float(self.field(f"{arch}.rope.freq_base", 10000.0))
        self.neox = arch in ("qwen2", "qwen3", "gemma3")
        self.gemma = arch == "gemma3"
        self.scale_dim = self.head_dim
        self.window, self.pattern, self.base_swa = 0, 6, 10000.0
        if self.gemma:
            if self.n_layer == 62:
                self.scale_dim = self.n_embd // self.n_head
            self.window = int(self.field(f"{arch}.attention.sliding_window", 0))
            self.pattern = int(self.field(f"{arch}.attention.sliding_window_pattern", 6))
            self.base_swa = float(self.field(f"{arch}.rope.freq_base_swa", 10000.0))
        self.n_ff_max = max(int(t.shape[1]) for n, t in self.t.items()
                            if n.endswith("ffn_gate.weight"))

    def local(self, l):
        """a sliding-window layer (with the local rope base)?"""
        if not self.window:
            return False
        return self.pattern == 0 or l % self.pattern < self.pattern - 1

    def field(self, key, default=None):
        f = self.r.fields.get(key)
        if f is None:
            if default is None:
                raise SystemExit(f"forward.py: metadata key {key} is missing")
            return default
        return f.contents()

    def w(self, name):
        """A tensor as float64, numpy shape (rows, row length) = reversed GGUF ne."""
        t = self.t.get(name)
        if t is None:
            return None
        a = dequantize(t.data, t.tensor_type).astype(np.float64)
        return a.reshape(tuple(int(d) for d in reversed(t.shape)))


def rounding_bound(m, n_pos):
    """Worst-case relative distance between two float64 evaluations of this graph that differ
    only in rounding (summation order, 1-ulp libm differences). A length-K dot product or sum
    computed in any order is within gamma_K = K u / (1 - K u) of the exact value, relative to
    sum |x_i y_i| (Higham, Accuracy and Stability of Numerical Algorithms, 3.1); every other op
    (scale, exp, sqrt, cos, sin) is within a few u. Along the longest chain of dependent ops,
    per layer: norm, q/k/v matmul, q/k norm, rope, scores, softmax, weighted sum, o matmul,
    norm, gate/up, silu, down: fewer than 10 reductions; plus the final norm, the output matmul
    and the embedding: 10 L + 3, each over at most K_max = the widest inner dimension or the
    number of positions attended over. To first order the errors add: one evaluation is within
    (10 L + 3) gamma_K of exact, two within twice that. This ignores amplification by the graph
    (its condition number), which the worst case pays for with its own slack: rounding errors
    are random and add like sqrt(K) u, not K u (measured: 10-30 u against a bound of ~10^4 u;
    float32-level perturbations of these models come out amplified well under 100x)."""
    u = 2.0 ** -53
    k = max(m.n_embd, m.n_head * m.head_dim, m.n_ff_max, n_pos)
    g = k * u / (1 - k * u)
    per_layer = 12 if m.gemma else 10          # gemma3: the two post norms
    return 2 * (per_layer * m.n_layer + 3) * g


def rmsnorm(x, w, eps):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w


def rope(x, pos, n_rot, base, neox):
    """x [T, H, hd] rotated in place on its first n_rot dims"""
    half = n_rot // 2
    theta = base ** (-(2.0 * np.arange(half)) / n_rot)
    ang = pos[:, None].astype(np.float64) * theta[None, :]
    c, s = np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]
    if neox:
        ia, ib = np.arange(half), np.arange(half) + half
    else:
        ia, ib = 2 * np.arange(half), 2 * np.arange(half) + 1
    a, b = x[..., ia].copy(), x[..., ib].copy()
    x[..., ia] = a * c - b * s
    x[..., ib] = a * s + b * c
    return x


def forward(m, tokens):
    T = len(tokens)
    pos = np.arange(T)
    emb = m.w("token_embd.weight")
    h = emb[np.asarray(tokens)]
    if m.gemma:
        h = h * np.sqrt(float(m.n_embd))
    hd, nh, nkv = m.head_dim, m.n_head, m.n_head_kv
    group = nh // nkv
    mask = np.triu(np.full((T, T), -np.inf), k=1)
    if m.window:
        i, j = np.meshgrid(np.arange(T), np.arange(T), indexing="ij")
        mask_swa = np.where(i - j >= m.window, -np.inf, mask)
    for l in range(m.n_layer):
        local = m.local(l)
        base = m.base_swa if local else m.base
        p = f"blk.{l}."
        x = rmsnorm(h, m.w(p + "attn_norm.weight"), m.eps)
        q = x @ m.w(p + "attn_q.weight").T
        k = x @ m.w(p + "attn_k.weight").T
        v = x @ m.w(p + "attn_v.weight").T
        for name, y in (("attn_q.bias", q), ("attn_k.bias", k), ("attn_v.bias", v)):
            b = m.w(p + name)
            if b is not None:
                y += b
        q = q.reshape(T, nh, hd)
        k = k.reshape(T, nkv, hd)
        v = v.reshape(T, nkv, hd)
        qn, kn = m.w(p + "attn_q_norm.weight"), m.w(p + "attn_k_norm.weight")
        if qn is not None:
            q = rmsnorm(q, qn, m.eps)
            k = rmsnorm(k, kn, m.eps)
        q = rope(q, pos, m.n_rot, base, m.neox)
        k = rope(k, pos, m.n_rot, base, m.neox)
        att = np.empty((T, nh, hd))
        mk = mask_swa if local else mask
        for j in range(nh):
            g = j // group
            s = (q[:, j, :] @ k[:, g, :].T) / np.sqrt(float(m.scale_dim)) + mk
            s = np.exp(s - s.max(axis=1, keepdims=True))
            att[:, j, :] = (s / s.sum(axis=1, keepdims=True)) @ v[:, g, :]
        o = att.reshape(T, nh * hd) @ m.w(p + "attn_output.weight").T
        if m.gemma:
            o = rmsnorm(o, m.w(p + "post_attention_norm.weight"), m.eps)
        h = h + o
        x = rmsnorm(h, m.w(p + "ffn_norm.weight"), m.eps)
        gate = x @ m.w(p + "ffn_gate.weight").T
        up = x @ m.w(p + "ffn_up.weight").T
        if m.gemma:
            c = np.sqrt(2.0 / np.pi)
            act = 0.5 * gate * (1.0 + np.tanh(c * (gate + 0.044715 * gate ** 3)))
        else:
            act = gate / (1.0 + np.exp(-gate))
        o = (act * up) @ m.w(p + "ffn_down.weight").T
        if m.gemma:
            o = rmsnorm(o, m.w(p + "post_ffw_norm.weight"), m.eps)
        h = h + o
    out = m.w("output.weight")
    if out is None:
        out = emb
    return rmsnorm(h, m.w("output_norm.weight"), m.eps) @ out.T


def main():
    ap = argparse.ArgumentParser(description="float64 numpy forward pass of a GGUF model")
    ap.add_argument("model")
    ap.add_argument("tokens")
    ap.add_argument("-o", "--output")
    ap.add_argument("--compare")
    ap.add_argument("--bound")
    a = ap.parse_args()
    tokens = [int(t) for t in a.tokens.split(",") if t]
    m = Model(a.model)
    bound = None
    if a.bound is not None:
        bound = rounding_bound(m, len(tokens)) if a.bound == "auto" else float(a.bound)
    z = forward(m, tokens)
    if a.output:
        z.astype("<f8").tofile(a.output)
    if a.compare:
        o = np.fromfile(a.compare, dtype="<f8")
        if o.size != z.size:
            raise SystemExit(f"forward.py: {a.compare} holds {o.size} values, expected {z.size}")
        o = o.reshape(z.shape)
        d = np.abs(o - z)
        rel = (d.max(axis=1) / np.abs(z).max(axis=1)).max()
        rec = {"positions": len(tokens), "vocab": z.shape[1], "max_abs": float(d.max()),
               "max_rel": float(rel), "max_logit": float(np.abs(z).max())}
        if bound is not None:
            rec["bound"] = bound
        print(json.dumps(rec))
        if not np.all(np.isfinite(o)) or (bound is not None and not rel <= bound):
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
