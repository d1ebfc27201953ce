/*
 * arith.h — the canonical arithmetic of 1b: the one scalar definition of every float operation
 * on the model's numeric path. Every SIMD, threaded or GPU kernel must reproduce these
 * functions bit for bit; tests compare them on random and real inputs.
 *
 * Rules that make the bits reproducible on any compiler and device:
 *  - only + - * /, sqrtf and explicit fmaf on floats (all correctly rounded in IEEE binary32),
 *    integer arithmetic, and bit manipulation through memcpy; no libm, no implicit
 *    contraction (-ffp-contract=off, nvcc --fmad=false), no fast-math;
 *  - every reduction has one fixed shape that does not depend on batch width, thread count,
 *    chunking or SIMD width:
 *      float sums and dots: 32 partial sums, partial j accumulating elements i = j (mod 32) in
 *        increasing i (with fmaf for products), then folded by the xor-butterfly
 *        p[j] += p[j + s] for s = 16, 8, 4, 2, 1 — exactly what a 32-lane GPU warp computes
 *        with shuffles, and what four 8-lane AVX2 (or two 16-lane AVX-512) registers compute;
 *      sums over quantised blocks: the block's value r_b is added to partial b mod 8, in
 *        increasing b, then the 8 partials fold by s = 4, 2, 1;
 *      maxima are exact in any order.
 *  - quantised dot products (lib/arith/dot.h) are integer sums, exact in any order, with a
 *    per-block float epilogue written out operation by operation.
 *
 * The header compiles as C (gcc, clang) and as GPU code (hipcc, nvcc) through OB_INLINE.
 */
#ifndef OB_ARITH_H
#define OB_ARITH_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "blocks.h"
#include "ob-inline.h"

/*
 * <math.h> only for the declarations of fmaf and sqrtf, the two functions of libm this folder
 * uses. IEEE 754 requires both to be correctly rounded, so they mean the same everywhere: gcc
 * and clang emit one instruction where the ISA has it (sqrtss; vfmadd231ss under -mfma) and
 * otherwise call libm's, which is exact too. nvcc and hipcc declare both for host and device
 * code themselves (their runtime headers are included implicitly), so they take nothing here;
 * a plain C++ compiler (g++ building hrx-sim) takes <math.h> as C does.
 */
#if !defined(__CUDACC__) && !defined(__HIPCC__)
#include <math.h>
#endif

#define OB_NPART 32                       /* partial sums of a float reduction */
#define OB_NBPART 8                       /* partial sums over quantised blocks */

/* ---- float reductions --------------------------------------------------------------------- */

/* Fold 32 partial sums: the xor-butterfly, lower half kept (the upper half is equal). */
OB_INLINE float ob_fold32(float p[OB_NPART])
{
    for (int s = OB_NPART / 2; s > 0; s >>= 1)
        for (int j = 0; j < s; j++)
            p[j] = p[j] + p[j + s];
    return p[0];
}

OB_INLINE float ob_fold8(float p[OB_NBPART])
{
    for (int s = OB_NBPART / 2; s > 0; s >>= 1)
        for (int j = 0; j < s; j++)
            p[j] = p[j] + p[j + s];
    return p[0];
}

/* sum_i a[i] * b[i] */
OB_INLINE float ob_dot_f32(const float *a, const float *b, int n)
{
    float p[OB_NPART] = {0};
    for (int i = 0; i < n; i++)
        p[i & 31] = fmaf(a[i], b[i], p[i & 31]);
    return ob_fold32(p);
}

/* sum_i a[i] */
OB_INLINE float ob_sum_f32(const float *a, int n)
{
    float p[OB_NPART] = {0};
    for (int i = 0; i < n; i++)
        p[i & 31] = p[i & 31] + a[i];
    return ob_fold32(p);
}

/* max_i a[i] (NaN-free input; exact in any order) */
OB_INLINE float ob_max_f32(const float *a, int n)
{
    float m = a[0];
    for (int i = 1; i < n; i++)
        m = a[i] > m ? a[i] : m;
    return m;
}

/* ---- rounding, exp, log ------------------------------------------------------------------- */

/* Nearest integer, ties to even, for |x| < 2^22: adding 1.5 * 2^23 leaves no fraction bits,
 * so the addition itself rounds (in the default round-to-nearest-even mode). */
OB_INLINE float ob_rint(float x)
{
    return (x + 12582912.0f) - 12582912.0f;
}

OB_INLINE float ob_inf(void)
{
    return ob_f32_from_bits(0x7f800000u);
}

OB_INLINE float ob_nan(void)
{
    return ob_f32_from_bits(0x7fc00000u);
}

/* 2^k as a float, k in [-126, 127] */
OB_INLINE float ob_pow2i(int k)
{
    return ob_f32_from_bits((uint32_t)(k + 127) << 23);
}

/*
 * e^x. x = k ln2 + r with k = rint(x / ln2) and r reduced in two exact steps (Cody-Waite with
 * fmaf), |r| <= ln2/2; e^r by its degree-7 Taylor polynomial (truncation below 1e-8 relative)
 * in Horner form with fmaf; then scaled by 2^k, in two steps when the result is subnormal or k
 * is 128. Overflow gives +Inf, underflow 0, NaN stays NaN. Accuracy: see tests/unit/arith.c
 * (a dense sweep against float64).
 */
OB_INLINE float ob_expf(float x)
{
    if (x != x)
        return x;
    if (x > 88.72283935546875f)
        return ob_inf();
    if (x < -103.972084045410f)
        return 0.0f;
    float kf = ob_rint(x * 1.44269502162933349609375f);
    int k = (int)kf;
    float r = fmaf(kf, -0.693145751953125f, x);             /* ln2 high part: 16 bits */
    r = fmaf(kf, -1.428606765330187045e-06f, r);            /* ln2 - high part */
    float p = 1.98412698412698412698e-4f;                   /* 1/7! */
    p = fmaf(p, r, 1.38888888888888888889e-3f);             /* 1/6! */
    p = fmaf(p, r, 8.33333333333333333333e-3f);             /* 1/5! */
    p = fmaf(p, r, 4.16666666666666666667e-2f);             /* 1/4! */
    p = fmaf(p, r, 1.66666666666666666667e-1f);             /* 1/3! */
    p = fmaf(p, r, 0.5f);
    p = fmaf(p, r, 1.0f);
    p = fmaf(p, r, 1.0f);
    if (k > 127)
        return (p * ob_pow2i(127)) * ob_pow2i(k - 127);
    if (k < -125)                                           /* subnormal: one rounding, last */
        return (p * ob_pow2i(k + 100)) * ob_pow2i(-100);
    return p * ob_pow2i(k);
}

/*
 * Natural logarithm. x = 2^e m with m in [sqrt(1/2), sqrt(2)), f = m - 1 (exact). With
 * s = f / (2 + f), z = s^2 and hfsq = f^2 / 2, log(1 + f) = f - (hfsq - s (hfsq + R)) where
 * R = z (2/3 + 2z/5 + ... + 2z^5/11) is the atanh series (|s| < 0.172: truncation far below an
 * ulp); f enters exactly and only small corrections are rounded. Then e ln2 is added with ln2
 * split so that e * ln2_hi is exact. log(0) = -Inf, log(x < 0) = NaN, log(Inf) = Inf.
 */
OB_INLINE float ob_logf(float x)
{
    if (x != x || x < 0.0f)
        return ob_nan();
    if (x == 0.0f)
        return -ob_inf();
    if (x == ob_inf())
        return x;
    int e = 0;
    if (x < 1.17549435e-38f) {                              /* subnormal: scale up exactly */
        x = x * 8388608.0f;
        e = -23;
    }
    uint32_t u = ob_f32_bits(x);
    e += (int)((u >> 23) & 0xff) - 127;
    float m = ob_f32_from_bits((u & 0x007fffffu) | 0x3f800000u);   /* [1, 2) */
    if (m > 1.41421353816986083984375f) {
        m = m * 0.5f;
        e += 1;
    }
    float f = m - 1.0f;
    float s = f / (2.0f + f);
    float z = s * s;
    float hfsq = 0.5f * f * f;
    float p = 1.81818181818181818182e-1f;                   /* 2/11 */
    p = fmaf(p, z, 2.22222222222222222222e-1f);             /* 2/9 */
    p = fmaf(p, z, 2.85714285714285714286e-1f);             /* 2/7 */
    p = fmaf(p, z, 4.0e-1f);                                /* 2/5 */
    p = fmaf(p, z, 6.66666666666666666667e-1f);             /* 2/3 */
    float R = z * p;
    float ef = (float)e;
    float t = fmaf(s, hfsq + R, ef * 1.428606765330187045e-06f);   /* s (hfsq + R) + e ln2_lo */
    return ef * 0.693145751953125f - ((hfsq - t) - f);
}

/* silu(x) = x / (1 + e^-x) */
OB_INLINE float ob_silu(float x)
{
    return x / (1.0f + ob_expf(-x));
}

/*
 * GELU, the tanh form (Gemma's "gelu_pytorch_tanh", ggml's GELU):
 *   gelu(x) = 0.5 x (1 + tanh(u)),  u = sqrt(2/pi) (x + 0.044715 x^3).
 * Since 0.5 (1 + tanh(u)) = 1 / (1 + e^a) exactly, a = -2u = c x (1 + k x^2) with
 * c = -2 sqrt(2/pi) and k = 0.044715, it is computed as a sigmoid, like ob_silu: no tanh, and
 * no cancellation in 1 + tanh(u) for negative x. Where the value matters most, the negative
 * tail, the result is about x e^a and inherits the absolute error of a, so a is carried as a
 * float pair a_hi + a_lo (c and k as pairs too, products split exactly with fmaf, the sum
 * 1 + k x^2 by Knuth's two-sum), and e^a = e^a_hi (1 + a_lo), |a_lo| <= ulp(a_hi):
 *   t = x x,        tl = fmaf(x, x, -t)                         x^2 = t + tl exactly
 *   m = k_hi t,     ml = fmaf(k_hi, t, -m) + fmaf(k_hi, tl, k_lo t)
 *   p = 1 + m,      pl = twosum error(1, m) + ml
 *   z = x p,        zl = fmaf(x, p, -z) + x pl
 *   a = c_hi z,     al = fmaf(c_hi, z, -a) + fmaf(c_hi, zl, c_lo z)
 *   e = ob_expf(a);  e = fmaf(e, al, e) unless e is Inf;   gelu = x / (1 + e)
 * |x| > 10^4 gives x, or -0 for negative x (what the formula gives there, without the x^2
 * overflow); NaN stays NaN. Accuracy: tests/unit/arith.c (a dense sweep against float64).
 */
OB_INLINE float ob_gelu(float x)
{
    const float c_hi = -1.59576917f, c_lo = 4.53406805e-08f;   /* -2 sqrt(2/pi) */
    const float k_hi = 0.0447149985f, k_lo = 1.54614443e-09f;  /* 0.044715 */
    if (x > 1e4f)
        return x;
    if (x < -1e4f)
        return -0.0f;
    float t = x * x, tl = fmaf(x, x, -t);
    float m = k_hi * t, ml = fmaf(k_hi, t, -m) + fmaf(k_hi, tl, k_lo * t);
    float p = 1.0f + m, pb = p - 1.0f;
    float pl = ((1.0f - (p - pb)) + (m - pb)) + ml;
    float z = x * p, zl = fmaf(x, p, -z) + x * pl;
    float a = c_hi * z, al = fmaf(c_hi, z, -a) + fmaf(c_hi, zl, c_lo * z);
    float e = ob_expf(a);
    if (e != ob_inf())
        e = fmaf(e, al, e);
    return x / (1.0f + e);
}

/* GeGLU, the gated feed-forward of Gemma: g[i] = ob_gelu(g[i]) * u[i] */
OB_INLINE void ob_geglu(float *g, const float *u, size_t n)
{
    for (size_t i = 0; i < n; i++)
        g[i] = ob_gelu(g[i]) * u[i];
}

/* ---- normalisation, elementwise sums ------------------------------------------------------ */

/*
 * RMSNorm in three steps, so that a kernel may compute the sum of squares its own way (a SIMD
 * or GPU dot with the 32-partial shape of ob_dot_f32, bitwise equal to it) and then finish
 * with the two functions below:
 *   ss = ob_dot_f32(x, x, n);  r = ob_rms_factor(ss, n, eps);  ob_rms_apply(x, r, w, y, n)
 */

/* r = 1 / sqrt(ss / n + eps): one rounding per operation, sqrtf correctly rounded */
OB_INLINE float ob_rms_factor(float ss, int n, float eps)
{
    return 1.0f / sqrtf(ss / (float)n + eps);
}

/* y[i] = (x[i] * r) * w[i]; y may alias x */
OB_INLINE void ob_rms_apply(const float *x, float r, const float *w, float *y, int n)
{
    for (int i = 0; i < n; i++)
        y[i] = (x[i] * r) * w[i];
}

/* y = rmsnorm(x) * w over n values; y may alias x */
OB_INLINE void ob_rmsnorm(const float *x, const float *w, float *y, int n, float eps)
{
    float ss = ob_dot_f32(x, x, n);
    ob_rms_apply(x, ob_rms_factor(ss, n, eps), w, y, n);
}

/*
 * y[i] = y[i] + x[i]: the bias add (y a matmul's output row, x the bias) and the residual add
 * (y the residual stream, x a block's output) alike, one rounding each.
 */
OB_INLINE void ob_add_f32(float *y, const float *x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        y[i] = y[i] + x[i];
}

/*
 * The scale of Gemma's token embedding: sqrt(n_embd) rounded once to float (sqrtf of the
 * exact float n_embd, as llama.cpp's sqrtf(n_embd) and Hugging Face's float32
 * tensor(hidden_size ** 0.5) give; not the bfloat16 25.25 that a bf16 forward pass uses for
 * n_embd = 640). Applied with ob_scale_f32: one rounding per value.
 */
OB_INLINE float ob_embd_scale(int n_embd)
{
    return sqrtf((float)n_embd);
}

/* y[i] = y[i] * s */
OB_INLINE void ob_scale_f32(float *y, float s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        y[i] = y[i] * s;
}

/* ---- softmax ------------------------------------------------------------------------------ */

/*
 * l = sum e^(z_i - m) over z[0..n) in the 32-partial shape, for a row whose maximum is m.
 * A caller that already holds the terms e_i = ob_expf(z_i - m) gets the same bits from
 * ob_sum_f32(e, n) (the same additions in the same order).
 */
OB_INLINE float ob_lse_sum(const float *z, size_t n, float m)
{
    float p[OB_NPART] = {0};
    for (size_t i = 0; i < n; i++)
        p[i & 31] = p[i & 31] + ob_expf(z[i] - m);
    return ob_fold32(p);
}

/* log l of ob_lse_sum */
OB_INLINE float ob_lse_logl(const float *z, int n, float m)
{
    return ob_logf(ob_lse_sum(z, (size_t)n, m));
}

/*
 * log-sum-exp of z[0..n): m = max z, l = sum e^(z_i - m) (32-partial shape), lse = m + log l.
 * Log-probabilities are then (z_i - m) - log l, computed by ob_logprob with the two values
 * returned here.
 */
OB_INLINE void ob_logsumexp(const float *z, int n, float *m_out, float *logl_out)
{
    float m = ob_max_f32(z, n);
    *m_out = m;
    *logl_out = ob_lse_logl(z, n, m);
}

OB_INLINE float ob_logprob(float z, float m, float logl)
{
    return (z - m) - logl;
}

/* ---- rotary position embedding ------------------------------------------------------------- */

/*
 * Rotate one head vector x[0..head_dim) at one position with precomputed tables
 * cs[i] = cos(pos * theta_i), sn[i] = sin(pos * theta_i), i < n_rot / 2 (computed once on the
 * host by lib/rope.c without libm, the same floats on every machine). NEOX pairs
 * (i, i + n_rot/2); NORM pairs (2i, 2i + 1).
 * Dimensions from n_rot on are left alone.
 *   x0' = x0 c - x1 s,  x1' = x0 s + x1 c   (each product rounded, then the sum)
 */
OB_INLINE void ob_rope(float *x, const float *cs, const float *sn, int n_rot, int neox)
{
    int h = n_rot / 2;
    for (int i = 0; i < h; i++) {
        int a = neox ? i : 2 * i, b = neox ? i + h : 2 * i + 1;
        float x0 = x[a], x1 = x[b], c = cs[i], s = sn[i];
        float t0 = x0 * c, t1 = x1 * s, t2 = x0 * s, t3 = x1 * c;
        x[a] = t0 - t1;
        x[b] = t2 + t3;
    }
}

/* ---- attention ------------------------------------------------------------------------------ */

#define OB_ATT_CHUNK 64                   /* keys per chunk, aligned to absolute positions */

/* the score scale of a head of hd dimensions: 1 / sqrt(hd), two roundings */
OB_INLINE float ob_attn_scale(int hd)
{
    return 1.0f / sqrtf((float)hd);
}

/*
 * Sliding-window attention (Gemma's local layers): the query at position pos sees the keys at
 * positions [ob_attn_first_key(pos, window), pos], the last `window` positions including its
 * own (llama.cpp's LLAMA_SWA_TYPE_STANDARD: key p0 is masked when pos - p0 >= window; Hugging
 * Face's sliding-window mask likewise); window 0 means no window (every key from 0). The
 * window is ob_attn_head over those keys: k and v advanced to the first key, n = pos + 1 -
 * first, so its chunks of OB_ATT_CHUNK start at the first key. The first key is a function of
 * pos alone, so the result for a position does not depend on how its sequence was batched,
 * chunked or cached, just as without a window.
 */
OB_INLINE int ob_attn_first_key(int pos, int window)
{
    return window > 0 && pos >= window ? pos - window + 1 : 0;
}

/*
 * The KV cache holds keys and values as fp16: h[i] = ob_f32_to_fp16(x[i]) (blocks.h: round to
 * nearest even, overflow to Inf, subnormals kept, NaN kept); attention reads them back with
 * the exact ob_fp16_to_f32.
 */
OB_INLINE void ob_kv_put(uint16_t *h, const float *x, int n)
{
    for (int i = 0; i < n; i++)
        h[i] = ob_f32_to_fp16(x[i]);
}

/*
 * One query head attending to keys and values at positions 0..n-1 (n = the query's position
 * + 1), stored as fp16 rows kv_stride halfs apart:
 *   s_t = ob_dot_f32(q, k_t) * scale            (k_t converted exactly to float)
 *   m   = max s_t;  e_t = ob_expf(s_t - m)
 *   per chunk c of OB_ATT_CHUNK positions starting at a multiple of OB_ATT_CHUNK:
 *       l_c = sum of e_t in increasing t;  o_c[d] = fmaf(e_t, v_t[d], o_c[d]) in increasing t
 *   l = sum of l_c in increasing c;  o[d] likewise;  out[d] = o[d] / l
 * Chunks are fixed by absolute position, so the result for a position is the same whether it
 * was decoded alone, prefilled in a chunk of any size, or its prefix came from a cache — and a
 * GPU may give each chunk to its own thread group. s (scratch) holds n floats, oc 2 * hd.
 */
OB_INLINE void ob_attn_head(const float *q, const uint16_t *k, const uint16_t *v,
                            long kv_stride, int n, int hd, float scale, float *s, float *oc,
                            float *out)
{
    float kt[256];
    for (int t = 0; t < n; t++) {
        const uint16_t *kr = k + (long)t * kv_stride;
        for (int d = 0; d < hd; d++)
            kt[d] = ob_fp16_to_f32(kr[d]);
        s[t] = ob_dot_f32(q, kt, hd) * scale;
    }
    float m = ob_max_f32(s, n);
    float l = 0.0f, *o = oc + hd;
    for (int d = 0; d < hd; d++)
        o[d] = 0.0f;
    for (int c0 = 0; c0 < n; c0 += OB_ATT_CHUNK) {
        int c1 = c0 + OB_ATT_CHUNK < n ? c0 + OB_ATT_CHUNK : n;
        float lc = 0.0f;
        for (int d = 0; d < hd; d++)
            oc[d] = 0.0f;
        for (int t = c0; t < c1; t++) {
            float e = ob_expf(s[t] - m);
            const uint16_t *vr = v + (long)t * kv_stride;
            lc = lc + e;
            for (int d = 0; d < hd; d++)
                oc[d] = fmaf(e, ob_fp16_to_f32(vr[d]), oc[d]);
        }
        l = l + lc;
        for (int d = 0; d < hd; d++)
            o[d] = o[d] + oc[d];
    }
    for (int d = 0; d < hd; d++)
        out[d] = o[d] / l;
}

/* ---- activation quantisation ---------------------------------------------------------------- */

/*
 * Activations are quantised per block for the integer dot products: amax = max |x| (exact),
 * q = rint(x * (127 / amax)) in [-127, 127] (never -128, so that u8 x s8 pair sums cannot
 * saturate int16 in any SIMD dot), d = amax / 127. An all-zero block has d = 0 and q = 0.
 *   Q8_K (256 values, bsums over each 16) for the K-quant weights;
 *   A8 (32 values, the sum of the quants) for Q4_0, Q4_1, Q5_0, Q5_1 and Q8_0 weights.
 */
struct ob_act_a8 {
    float d;
    int32_t sum;                          /* sum of qs */
    int8_t qs[32];
};
OB_STATIC_ASSERT(sizeof(struct ob_act_a8) == 40, "a8 block size");

OB_INLINE float ob_act_amax(const float *x, int n)
{
    float m = 0.0f;
    for (int i = 0; i < n; i++) {
        float a = x[i] < 0.0f ? -x[i] : x[i];
        m = a > m ? a : m;
    }
    return m;
}

/* q for one value, given iscale = 127 / amax; |x * iscale| <= 127 up to rounding. A NaN (from
 * an Inf or NaN input: the model is broken, but the bits stay defined) quantises to 0. */
OB_INLINE int ob_act_q(float x, float iscale)
{
    float v = ob_rint(x * iscale);
    if (v != v)
        return 0;
    return v > 127.0f ? 127 : v < -127.0f ? -127 : (int)v;
}

OB_INLINE void ob_quantize_q8k(const float *x, struct ob_block_q8_k *y, int n)
{
    for (int b = 0; b < n / 256; b++, x += 256, y++) {
        float amax = ob_act_amax(x, 256);
        float is = amax > 0.0f ? 127.0f / amax : 0.0f;
        y->d = amax / 127.0f;
        for (int i = 0; i < 256; i++)
            y->qs[i] = (int8_t)ob_act_q(x[i], is);
        for (int j = 0; j < 16; j++) {
            int s = 0;
            for (int i = 0; i < 16; i++)
                s += y->qs[16 * j + i];
            y->bsums[j] = (int16_t)s;
        }
    }
}

OB_INLINE void ob_quantize_a8(const float *x, struct ob_act_a8 *y, int n)
{
    for (int b = 0; b < n / 32; b++, x += 32, y++) {
        float amax = ob_act_amax(x, 32);
        float is = amax > 0.0f ? 127.0f / amax : 0.0f;
        y->d = amax / 127.0f;
        int s = 0;
        for (int i = 0; i < 32; i++) {
            y->qs[i] = (int8_t)ob_act_q(x[i], is);
            s += y->qs[i];
        }
        y->sum = s;
    }
}

#endif
