/*
 * dot.h — the canonical dot products of a weight row with an activation row: the scalar
 * reference that defines the bits every SIMD and GPU kernel must reproduce.
 *
 * Quantised weights meet quantised activations (arith.h): K-quants (Q2_K..Q6_K) take Q8_K
 * activations, the 32-value formats (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0) take A8. For each block b
 * the integer sums are exact in any order:
 *     isum = sum over the block's sub-blocks k of  sc_k * sum_i q_i a_i
 *     msum = sum over sub-blocks k of  m_k * (sum of a_i over k)      (formats with a min)
 * and the block's value is a float epilogue, one rounding per operation, in this order:
 *     r_b = (d_w * d_a) * (float)isum  [- (dmin_w * d_a) * (float)msum]      (K-quants)
 *     r_b = (d_w * d_a) * (float)isum  [+ (m_w * d_a) * (float)sum_a]        (Q4_1, Q5_1)
 * with (float) the round-to-nearest-even conversion of an int32. The row's result sums r_b
 * over blocks with the fixed 8-partial shape of arith.h (r_b into partial b mod 8, then
 * ob_fold8). Float weights (F32, F16, BF16) meet float activations through the 32-partial fmaf
 * shape of ob_dot_f32, the weight converted exactly to float first.
 *
 * Every function is OB_INLINE so that GPU code compiles this file unchanged.
 */
#ifndef OB_DOT_H
#define OB_DOT_H

#include "arith.h"

/* ---- 32-value formats with A8 activations ------------------------------------------------- */

/* nibble j (0..31) of a Q4 block's qs[16]: low nibbles are values 0..15, high ones 16..31 */
OB_INLINE int ob_q4_nib(const uint8_t *qs, int j)
{
    return j < 16 ? (qs[j] & 15) : (qs[j - 16] >> 4);
}

OB_INLINE int ob_q5_bit(const uint8_t *qh, int j)
{
    return (qh[j >> 3] >> (j & 7)) & 1;
}

OB_INLINE float ob_blk_q4_0(const struct ob_block_q4_0 *w, const struct ob_act_a8 *a)
{
    int isum = 0;
    for (int j = 0; j < 32; j++)
        isum += (ob_q4_nib(w->qs, j) - 8) * a->qs[j];
    return (ob_fp16_to_f32(w->d) * a->d) * (float)isum;
}

OB_INLINE float ob_blk_q4_1(const struct ob_block_q4_1 *w, const struct ob_act_a8 *a)
{
    int isum = 0;
    for (int j = 0; j < 32; j++)
        isum += ob_q4_nib(w->qs, j) * a->qs[j];
    return (ob_fp16_to_f32(w->d) * a->d) * (float)isum + (ob_fp16_to_f32(w->m) * a->d) * (float)a->sum;
}

OB_INLINE float ob_blk_q5_0(const struct ob_block_q5_0 *w, const struct ob_act_a8 *a)
{
    int isum = 0;
    for (int j = 0; j < 32; j++)
        isum += (ob_q4_nib(w->qs, j) + 16 * ob_q5_bit(w->qh, j) - 16) * a->qs[j];
    return (ob_fp16_to_f32(w->d) * a->d) * (float)isum;
}

OB_INLINE float ob_blk_q5_1(const struct ob_block_q5_1 *w, const struct ob_act_a8 *a)
{
    int isum = 0;
    for (int j = 0; j < 32; j++)
        isum += (ob_q4_nib(w->qs, j) + 16 * ob_q5_bit(w->qh, j)) * a->qs[j];
    return (ob_fp16_to_f32(w->d) * a->d) * (float)isum + (ob_fp16_to_f32(w->m) * a->d) * (float)a->sum;
}

OB_INLINE float ob_blk_q8_0(const struct ob_block_q8_0 *w, const struct ob_act_a8 *a)
{
    int isum = 0;
    for (int j = 0; j < 32; j++)
        isum += w->qs[j] * a->qs[j];
    return (ob_fp16_to_f32(w->d) * a->d) * (float)isum;
}

/* ---- K-quants with Q8_K activations ----------------------------------------------------------- */

OB_INLINE float ob_blk_q2_k(const struct ob_block_q2_k *w, const struct ob_block_q8_k *a)
{
    int isum = 0, msum = 0;
    for (int k = 0; k < 16; k++) {
        int s = 0;
        for (int i = 0; i < 16; i++) {
            int f = 16 * k + i, h = f >> 7, sh = (f >> 5) & 3, l = f & 31;
            s += ((w->qs[h * 32 + l] >> (2 * sh)) & 3) * a->qs[f];
        }
        isum += (w->scales[k] & 15) * s;
        msum += (w->scales[k] >> 4) * a->bsums[k];
    }
    return (ob_fp16_to_f32(w->d) * a->d) * (float)isum - (ob_fp16_to_f32(w->dmin) * a->d) * (float)msum;
}

OB_INLINE float ob_blk_q3_k(const struct ob_block_q3_k *w, const struct ob_block_q8_k *a)
{
    int isum = 0;
    for (int k = 0; k < 16; k++) {
        int s = 0;
        for (int i = 0; i < 16; i++) {
            int f = 16 * k + i, h = f >> 7, sh = (f >> 5) & 3, l = f & 31;
            int q = ((w->qs[h * 32 + l] >> (2 * sh)) & 3) - (((w->hmask[l] >> (f >> 5)) & 1) ? 0 : 4);
            s += q * a->qs[f];
        }
        isum += ob_q3k_scale(k, w->scales) * s;
    }
    return (ob_fp16_to_f32(w->d) * a->d) * (float)isum;
}

OB_INLINE float ob_blk_q4_k(const struct ob_block_q4_k *w, const struct ob_block_q8_k *a)
{
    int isum = 0, msum = 0;
    for (int j = 0; j < 8; j++) {
        uint8_t sc, m;
        ob_k4_scale_min(j, w->scales, &sc, &m);
        int s = 0;
        for (int l = 0; l < 32; l++) {
            int f = 32 * j + l, c = f >> 6, hi = (f >> 5) & 1;
            s += ((w->qs[c * 32 + l] >> (4 * hi)) & 15) * a->qs[f];
        }
        isum += sc * s;
        msum += m * (a->bsums[2 * j] + a->bsums[2 * j + 1]);
    }
    return (ob_fp16_to_f32(w->d) * a->d) * (float)isum - (ob_fp16_to_f32(w->dmin) * a->d) * (float)msum;
}

OB_INLINE float ob_blk_q5_k(const struct ob_block_q5_k *w, const struct ob_block_q8_k *a)
{
    int isum = 0, msum = 0;
    for (int j = 0; j < 8; j++) {
        uint8_t sc, m;
        ob_k4_scale_min(j, w->scales, &sc, &m);
        int s = 0;
        for (int l = 0; l < 32; l++) {
            int f = 32 * j + l, c = f >> 6, hi = (f >> 5) & 1;
            int q = ((w->qs[c * 32 + l] >> (4 * hi)) & 15) + 16 * ((w->qh[l] >> j) & 1);
            s += q * a->qs[f];
        }
        isum += sc * s;
        msum += m * (a->bsums[2 * j] + a->bsums[2 * j + 1]);
    }
    return (ob_fp16_to_f32(w->d) * a->d) * (float)isum - (ob_fp16_to_f32(w->dmin) * a->d) * (float)msum;
}

OB_INLINE float ob_blk_q6_k(const struct ob_block_q6_k *w, const struct ob_block_q8_k *a)
{
    int isum = 0;
    for (int k = 0; k < 16; k++) {
        int s = 0;
        for (int i = 0; i < 16; i++) {
            int f = 16 * k + i, h = f >> 7, r = f & 127;
            int lo = (w->ql[h * 64 + (r & 63)] >> (4 * (r >> 6))) & 15;
            int hi = (w->qh[h * 32 + (r & 31)] >> (2 * (r >> 5))) & 3;
            s += (lo + 16 * hi - 32) * a->qs[f];
        }
        isum += w->scales[k] * s;
    }
    return (ob_fp16_to_f32(w->d) * a->d) * (float)isum;
}

/* ---- rows ------------------------------------------------------------------------------------ */

#define OB_DOT_ROW(name, wtype, atype)                                              \
    OB_INLINE float ob_dot_##name(const wtype *w, const atype *a, int nb)           \
    {                                                                               \
        float p[OB_NBPART] = {0};                                                   \
        for (int b = 0; b < nb; b++)                                                \
            p[b & 7] = p[b & 7] + ob_blk_##name(&w[b], &a[b]);                      \
        return ob_fold8(p);                                                         \
    }

OB_DOT_ROW(q4_0, struct ob_block_q4_0, struct ob_act_a8)
OB_DOT_ROW(q4_1, struct ob_block_q4_1, struct ob_act_a8)
OB_DOT_ROW(q5_0, struct ob_block_q5_0, struct ob_act_a8)
OB_DOT_ROW(q5_1, struct ob_block_q5_1, struct ob_act_a8)
OB_DOT_ROW(q8_0, struct ob_block_q8_0, struct ob_act_a8)
OB_DOT_ROW(q2_k, struct ob_block_q2_k, struct ob_block_q8_k)
OB_DOT_ROW(q3_k, struct ob_block_q3_k, struct ob_block_q8_k)
OB_DOT_ROW(q4_k, struct ob_block_q4_k, struct ob_block_q8_k)
OB_DOT_ROW(q5_k, struct ob_block_q5_k, struct ob_block_q8_k)
OB_DOT_ROW(q6_k, struct ob_block_q6_k, struct ob_block_q8_k)
#undef OB_DOT_ROW

/* float weights: the 32-partial fmaf shape, weights converted exactly */
OB_INLINE float ob_dot_f16(const uint16_t *w, const float *x, int n)
{
    float p[OB_NPART] = {0};
    for (int i = 0; i < n; i++)
        p[i & 31] = fmaf(ob_fp16_to_f32(w[i]), x[i], p[i & 31]);
    return ob_fold32(p);
}

OB_INLINE float ob_dot_bf16(const uint16_t *w, const float *x, int n)
{
    float p[OB_NPART] = {0};
    for (int i = 0; i < n; i++)
        p[i & 31] = fmaf(ob_bf16_to_f32(w[i]), x[i], p[i & 31]);
    return ob_fold32(p);
}

#endif
