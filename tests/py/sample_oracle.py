#!/usr/bin/env python3
"""sample_oracle.py — the sampling pipeline of lib/sample.h written again in float64 with numpy,
compared with lib/sample.c on random rows of logits, for tests/t4300-sample.sh.

  sample_oracle.py check UNIT [--cases N] [--seed S] [--variant sorted-draw]

UNIT is bin/unit/sample: the cases are written to a file in the layout of its `run` command,
it samples them, and every result is compared with this oracle:

  token    the oracle's token, computed from the float32 logits in float64 with exact exp and
           sums; where it differs, the case must sit within float32 rounding of a boundary: a
           top_p running sum within TOL * S of top_p * S, a weight within TOL of min_p
           (relative), or the draw's target within TOL * W of a running sum next to it. TOL =
           2e-5: the library rounds s = (z - zmax) / T to float32 (relative error 6e-8, i.e.
           |s| * 6e-8 absolute, |s| < 100 for any weight that matters) and ob_expf adds a few
           ulp, so its weights are within ~1e-5 of exact; its own sums are float64.
  n_cand   the size of the final candidate set (the same exemption)
  m        equals the largest logit, bit for bit
  logl     within (ceil(n/32) + 8) * 2^-24 of the float64 log-sum-exp: ob_logsumexp adds the
           terms in float32, n/32 of them one after another in each of 32 partials, and a
           sequential float32 sum of k positive terms has relative error at most (k - 1) 2^-24
           (then the fold, ob_expf's and ob_logf's few ulp)
  top      ids and logprob bits equal float32((z - m) - logl) computed by numpy (IEEE float32
           arithmetic, so exactly ob_logprob), ordered by logprob descending, ties by id
  sum      the float64 sum of exp(logprob) over the whole row is within the same bound of 1

--variant sorted-draw makes the oracle draw along the sorted order instead of increasing id (a
plausible but different pipeline): the comparison must then fail, which shows it compares
something.

Cases: rows of 2..4096 logits and some of 151936 (normal logits of several widths, values
rounded to create ties, masked -Inf tokens, one dominant token, constant rows), with
temperature, top_k, top_p, min_p, seed and position drawn at random, greedy included. Prints a
summary (how many tokens agree, how many sit on a boundary, how many of those differ); exit 0
when nothing differs outside a boundary.
"""
import json
import math
import os
import struct
import subprocess
import sys
import tempfile

import numpy as np

TOL = 2e-5
M64 = (1 << 64) - 1


def mix64(x):
    x ^= x >> 30
    x = (x * 0xBF58476D1CE4E5B9) & M64
    x ^= x >> 27
    x = (x * 0x94D049BB133111EB) & M64
    x ^= x >> 31
    return x


def rand24(seed, pos):
    return mix64((mix64(seed) + (pos + 1) * 0x9E3779B97F4A7C15) & M64) >> 40


def make_cases(n_cases, seed):
    rng = np.random.default_rng(seed)
    cases = []
    for c in range(n_cases):
        n = 151936 if c % 100 == 7 else int(rng.integers(2, 4097))
        kind = c % 6
        if kind == 0:
            z = rng.normal(0, rng.choice([0.5, 2.0, 5.0, 10.0]), n)
        elif kind == 1:       # ties
            z = np.round(rng.normal(0, 3.0, n) * 2) / 2
        elif kind == 2:       # masked tokens
            z = rng.normal(0, 4.0, n)
            z[rng.random(n) < 0.3] = -np.inf
            z[rng.integers(n)] = rng.normal()
        elif kind == 3:       # one dominant token
            z = rng.normal(0, 1.0, n)
            z[rng.integers(n)] += rng.choice([5.0, 12.0, 30.0])
        elif kind == 4:       # a large offset: float32 spacing of the logits shows
            z = rng.normal(0, 2.0, n) + rng.choice([-300.0, 1000.0])
        else:                 # constant or nearly so
            z = np.full(n, rng.normal() * 10)
            z[rng.integers(n, size=3)] += 1e-3
        z = z.astype(np.float32)
        T = float(np.float32(rng.choice([0.0, 0.1, 0.5, 0.7, 1.0, 1.0, 1.3, 2.0])))
        top_k = int(rng.choice([0, 0, 0, 1, 5, 40, 200, n]))
        top_p = float(np.float32(rng.choice([1.0, 1.0, 0.5, 0.8, 0.9, 0.95, 0.999])))
        min_p = float(np.float32(rng.choice([0.0, 0.0, 0.0, 0.01, 0.05, 0.2])))
        sd = int(rng.integers(0, 1 << 63)) * 2 + int(rng.integers(2))
        pos = int(rng.integers(0, 1 << 20)) if c % 10 else int(rng.integers(0, 1 << 63))
        ntop = int(min(n, rng.integers(0, 21)))
        cases.append((z, T, top_k, top_p, min_p, sd, pos, ntop))
    return cases


def write_cases(path, cases):
    with open(path, "wb") as f:
        for z, T, k, tp, mp, sd, pos, ntop in cases:
            f.write(struct.pack("<IfIffQQI", len(z), T, k, tp, mp, sd, pos, ntop))
            f.write(z.astype("<f4").tobytes())


def near(values, x, scale):
    return bool(np.any(np.abs(values - x) <= TOL * scale))


def lse_bound(n):
    return (math.ceil(n / 32) + 8) * 2.0 ** -24


def oracle(z, T, top_k, top_p, min_p, sd, pos, variant=None):
    """(token, |F|, the boundaries it sits near) by the definition in lib/sample.h, in
    float64"""
    n = len(z)
    z64 = z.astype(np.float64)
    ids = np.arange(n)
    if T == 0.0:
        return int(np.argmax(z64)), 1, set()
    order = np.lexsort((ids, -z64))            # z descending, id ascending
    if 0 < top_k < n:
        order = order[:top_k]
    zmax = z64.max()
    with np.errstate(invalid="ignore"):
        e = np.exp((z64 - zmax) / T)
    e[np.isneginf(z64)] = 0.0
    S = math.fsum(e[order])
    boundary = set()
    keep = order
    if top_p < 1.0:
        c = np.cumsum(e[order])
        P = top_p * S
        j = int(np.searchsorted(c, P, side="left"))
        if near(c, P, S):
            boundary.add("top_p")
        keep = order[:j + 1]
    if min_p > 0.0:
        if near(e[keep], min_p, min_p):
            boundary.add("min_p")
        keep = keep[e[keep] >= min_p]
    F = keep if variant == "sorted-draw" else np.sort(keep)
    w = e[F]
    W = math.fsum(w)
    target = W * (rand24(sd, pos) * 2.0 ** -24)
    cum = np.cumsum(w)
    j = int(np.searchsorted(cum, target, side="right"))
    j = min(j, len(F) - 1)
    if near(cum[max(0, j - 1):j + 1], target, W):
        boundary.add("draw")
    return int(F[j]), len(F), boundary


def main(argv):
    if len(argv) < 3 or argv[1] != "check":
        print(__doc__, file=sys.stderr)
        return 2
    unit = argv[2]
    n_cases, seed, variant = 3000, 1, None
    for i in range(3, len(argv) - 1):
        if argv[i] == "--cases":
            n_cases = int(argv[i + 1])
        if argv[i] == "--seed":
            seed = int(argv[i + 1])
        if argv[i] == "--variant":
            variant = argv[i + 1]
    cases = make_cases(n_cases, seed)
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "cases.bin")
        write_cases(path, cases)
        out = subprocess.run([unit, "run", path], capture_output=True, text=True)
    if out.returncode != 0:
        print(out.stderr)
        return 1
    ours = [json.loads(line) for line in out.stdout.splitlines()]
    if len(ours) != len(cases):
        print(f"{len(cases)} cases, {len(ours)} results")
        return 1
    bad = agree = on_boundary = boundary_diff = 0
    kinds = {"top_p": 0, "min_p": 0, "draw": 0}
    max_dlogl = max_dsum = 0.0
    for i, ((z, T, k, tp, mp, sd, pos, ntop), r) in enumerate(zip(cases, ours)):
        what = f"case {i} (n {len(z)}, T {T}, top_k {k}, top_p {tp}, min_p {mp})"
        if "error" in r:
            bad += 1
            print(f"{what}: {r['error']}")
            continue
        tok, nf, boundary = oracle(z, T, k, tp, mp, sd, pos, variant)
        on_boundary += bool(boundary)
        for b in boundary:
            kinds[b] += 1
        if r["token"] == tok and r["n_cand"] == nf:
            agree += 1
        elif boundary:
            boundary_diff += 1
        else:
            bad += 1
            if bad <= 20:
                print(f"{what}: token {r['token']} ({r['n_cand']} candidates), oracle {tok} ({nf})")
        # log-probabilities
        m = np.frombuffer(bytes.fromhex(r["m"])[::-1], dtype="<f4")[0]
        logl = np.frombuffer(bytes.fromhex(r["logl"])[::-1], dtype="<f4")[0]
        if m.tobytes() != z.max().tobytes():
            bad += 1
            print(f"{what}: m {m} is not the largest logit {z.max()}")
        z64 = z.astype(np.float64)
        ref = np.log(math.fsum(np.exp(z64[np.isfinite(z64)] - float(m))))
        bound = lse_bound(len(z))
        max_dlogl = max(max_dlogl, abs(float(logl) - ref) / bound)
        if abs(float(logl) - ref) > bound:
            bad += 1
            print(f"{what}: log l {logl} vs {ref}")
        lp = (z - m) - logl                      # float32 arithmetic: ob_logprob exactly
        dsum = abs(math.fsum(np.exp(lp.astype(np.float64))) - 1.0)
        max_dsum = max(max_dsum, dsum / bound)
        if dsum > bound:
            bad += 1
            print(f"{what}: logprobs sum to 1 {dsum:+.3g}")
        top = np.lexsort((np.arange(len(z)), -lp))[:ntop]
        want = [[int(t), lp[t].astype("<f4").tobytes()[::-1].hex()] for t in top]
        if r["top"] != want:
            bad += 1
            print(f"{what}: top {r['top'][:4]}... oracle {want[:4]}...")
    print(f"{len(cases)} cases: {agree} tokens agree with the float64 oracle; {on_boundary} sit "
          f"within float32 rounding of a boundary (top_p {kinds['top_p']}, min_p "
          f"{kinds['min_p']}, draw {kinds['draw']}), {boundary_diff} of them differ; "
          f"|log l - exact| and |sum p - 1| at most {max_dlogl:.2f} and {max_dsum:.2f} of "
          f"their bound; failures {bad}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
