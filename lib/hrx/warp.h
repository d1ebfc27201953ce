/*
 * warp.h — device code more than one kernel file runs: the activation quantiser of one block
 * by one warp (mm.hip's actq, norm.hip's rmsnorm_q on a GPU), rmsnorm_q's row and a head's
 * q/k norm and RoPE (norm.hip, and mm.hip's products that end with them).
 */
#ifndef OB_HRX_WARP_H
#define OB_HRX_WARP_H

#include "hrx/shim.h"
#include "arith/arith.h"

/*
 * Block b of the activation row at `row` (Q8_K for V = 8: 256 values; A8 for V = 1: 32) from
 * a warp whose lane holds values lane * V .. lane * V + V - 1 in v. amax is ob_act_amax's: the
 * largest |x| is one value whichever order finds it (a NaN never wins a comparison, -0 never
 * beats the starting +0), so each lane scans its values from +0 and the lanes' maxima meet by
 * shuffles; each value's q is ob_act_q's, and the sums (bsums over 16 values: two lanes; A8's
 * sum over the 32) are integers: ob_quantize_q8k's and ob_quantize_a8's bits. Every lane of
 * the warp must call it.
 */
template <int V>
__device__ static inline void ob_warp_actq(const float *v, int lane, char *row, int b)
{
    float amax = 0.0f;
    OB_UNROLL
    for (int i = 0; i < V; i++) {
        float a = v[i] < 0.0f ? -v[i] : v[i];
        amax = a > amax ? a : amax;
    }
    OB_UNROLL
    for (int s = 16; s > 0; s >>= 1) {
        float o = ob_shfl_xor(amax, s);
        amax = o > amax ? o : amax;
    }
    float is = amax > 0.0f ? 127.0f / amax : 0.0f;
    int8_t qv[V];
    int sum = 0;
    OB_UNROLL
    for (int i = 0; i < V; i++) {
        qv[i] = (int8_t)ob_act_q(v[i], is);
        sum += qv[i];
    }
    if (V == 8) {
        struct ob_block_q8_k *y = (struct ob_block_q8_k *)row + b;
        OB_UNROLL
        for (int i = 0; i < V; i++)
            y->qs[lane * V + i] = qv[i];
        sum += ob_shfl_xor(sum, 1);        /* lanes 2j and 2j + 1: values 16 j .. 16 j + 15 */
        if ((lane & 1) == 0)
            y->bsums[lane >> 1] = (int16_t)sum;
        if (lane == 0)
            y->d = amax / 127.0f;
    } else {
        struct ob_act_a8 *y = (struct ob_act_a8 *)row + b;
        y->qs[lane] = qv[0];
        sum = ob_warp_isum(sum);
        if (lane == 0) {
            y->d = amax / 127.0f;
            y->sum = sum;
        }
    }
}

/* this lane's partial of ob_dot_f32(x, x, k): the fmaf chain over x[lane], x[lane + 32], ... */
__device__ static inline float ob_lane_sumsq(const float *x, int k, int lane)
{
    float p = 0.0f;
    for (int i = lane; i < k; i += OB_WARP)
        p = fmaf(x[i], x[i], p);
    return p;
}

/*
 * rmsnorm of the row at x (k values, a multiple of 32 V) with weights w into y, and its
 * activation blocks quantised into the row at xq, by one warp: rmsnorm's sum (ob_warp_fold32
 * of the lanes' partials gives ob_fold32's), then, block by block, each lane computes its V
 * values as k_rmsnorm would ((x * r) * w), stores them, and the warp quantises the block from
 * them: no lane reads another's value from memory. y may be x. Every lane calls it.
 */
template <int V>
__device__ static inline void ob_warp_rmsnorm_q(const float *x, int k, const float *w, float eps,
                                                float *y, char *xq)
{
    enum { BL = V * OB_WARP };
    int lane = (int)threadIdx.x % OB_WARP;
    float r = ob_rms_factor(ob_warp_fold32(ob_lane_sumsq(x, k, lane)), k, eps);
    for (int b = 0; b < k / BL; b++) {
        float v[V], xv[V], wv[V];
        OB_UNROLL
        for (int i = 0; i < V; i++) {  /* every read before a write (y may be x): one wait */
            xv[i] = x[b * BL + lane * V + i];
            wv[i] = w[b * BL + lane * V + i];
        }
        OB_UNROLL
        for (int i = 0; i < V; i++) {
            v[i] = (xv[i] * r) * wv[i];
            y[b * BL + lane * V + i] = v[i];
        }
        ob_warp_actq<V>(v, lane, xq, b);
    }
}

/*
 * One head of one row by one warp, as qk_rope and rope_kv do it: x's hd values normalised
 * with nw (ob_rmsnorm over the head; none where nw is NULL), then ob_rope's rotation at
 * position pos (r's cos / sin tables), a lane a pair; into x in place, or as fp16 into hk
 * (ob_kv_put's conversion; x then only read). Every lane calls it.
 */
__device__ static inline void ob_warp_rope(const struct ob_hrx_rope &r, float *x, const float *nw,
                                           int pos, uint16_t *hk, int lane)
{
    /* the norm first (its sum needs every original value: read before any lane writes) */
    float f = 0.0f;
    if (nw)
        f = ob_rms_factor(ob_warp_fold32(ob_lane_sumsq(x, r.hd, lane)), r.hd, r.eps);
    int half = r.n_rot / 2;
    const float *cs = r.cs + (size_t)pos * half, *sn = r.sn + (size_t)pos * half;
    /* 4 pairs a lane at a time, every read before a write (the rotation is in place, so the
     * compiler would otherwise wait for each pair's reads after the previous pair's stores) */
    for (int p0 = lane; p0 < half; p0 += 4 * OB_WARP) {
        float x0[4], x1[4], n0[4], n1[4], c[4], s[4];
        OB_UNROLL
        for (int u = 0; u < 4; u++) {
            int p = p0 + u * OB_WARP, a = r.neox ? p : 2 * p, b = r.neox ? p + half : 2 * p + 1;
            bool in = p < half;
            x0[u] = in ? x[a] : 0.0f;
            x1[u] = in ? x[b] : 0.0f;
            n0[u] = in && nw ? nw[a] : 0.0f;
            n1[u] = in && nw ? nw[b] : 0.0f;
            c[u] = in ? cs[p] : 0.0f;
            s[u] = in ? sn[p] : 0.0f;
        }
        OB_UNROLL
        for (int u = 0; u < 4; u++) {
            int p = p0 + u * OB_WARP, a = r.neox ? p : 2 * p, b = r.neox ? p + half : 2 * p + 1;
            if (p >= half)
                continue;
            float y0 = x0[u], y1 = x1[u];
            if (nw) {
                y0 = (y0 * f) * n0[u];
                y1 = (y1 * f) * n1[u];
            }
            float t0 = y0 * c[u], t1 = y1 * s[u], t2 = y0 * s[u], t3 = y1 * c[u];
            if (hk) {
                hk[a] = ob_f32_to_fp16(t0 - t1);
                hk[b] = ob_f32_to_fp16(t2 + t3);
            } else {
                x[a] = t0 - t1;
                x[b] = t2 + t3;
            }
        }
    }
    if (hk)                        /* the values past n_rot: normalised or as they are */
        for (int d = r.n_rot + lane; d < r.hd; d += OB_WARP)
            hk[d] = ob_f32_to_fp16(nw ? (x[d] * f) * nw[d] : x[d]);
    else if (nw)
        for (int d = r.n_rot + lane; d < r.hd; d += OB_WARP)
            x[d] = (x[d] * f) * nw[d];
}

/* a head's n values as fp16 into dst (ob_kv_put's conversion) by one warp: 4 reads a lane,
 * then 4 writes */
__device__ static inline void ob_warp_fp16(const float *v, uint16_t *dst, int n, int lane)
{
    for (int d0 = lane; d0 < n; d0 += 4 * OB_WARP) {
        float vv[4];
        OB_UNROLL
        for (int u = 0; u < 4; u++)
            vv[u] = d0 + u * OB_WARP < n ? v[d0 + u * OB_WARP] : 0.0f;
        OB_UNROLL
        for (int u = 0; u < 4; u++)
            if (d0 + u * OB_WARP < n)
                dst[d0 + u * OB_WARP] = ob_f32_to_fp16(vv[u]);
    }
}

#endif
