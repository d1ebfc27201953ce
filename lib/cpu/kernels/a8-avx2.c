/*
 * a8-avx2.c — AVX2 dot products of the 32-value formats (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0) with
 * A8 activations. Reference: ob_dot_q4_0 .. ob_dot_q8_0 in dot.h.
 *
 * Why the results are equal:
 *  - a block's integer sum is exact in any order. Weights enter _mm256_maddubs_epi16 as
 *    unsigned bytes (Q4 0..15, Q5 0..31, Q8_0 |w| <= 128 with the sign moved onto the
 *    activation), activations are in [-127, 127], so a pair sum is at most 2 * 15 * 127 = 3810
 *    (Q4), 7874 (Q5), 32512 (Q8_0): no int16 saturation. The GEMM kernels add int16 pair sums
 *    of several registers before widening: at most 8 for Q4 (30480), 4 for Q5 (31496), none
 *    for Q8_0.
 *  - Q4_0 / Q5_0 take the offset off in int32: sum (q - o) a = sum q a - o * sum a (exact).
 *  - the float epilogue is the reference's, operation by operation, done lane-wise on 8
 *    consecutive blocks b0 .. b0 + 7 (b0 a multiple of 8), so lane j is block b0 + j and adds
 *    into partial j, the reference's partial b mod 8; a group of fewer than 8 blocks blends the
 *    untouched lanes back. The fold is ob_fold8's (4, 2, 1).
 *  - fp16 scales are converted with F16C (exact; a signalling NaN comes out quiet, and the
 *    first multiplication quietens the reference's too, so the product bits agree).
 *
 * Two entry points per format: dot (one weight row against 1..4 raw activation rows: decode
 * and small batches) and a GEMM (many rows, see kernels.h) that prepares the activations and
 * decodes weight rows into a transposed layout once per call.
 */
#include <stddef.h>

#include "cpu/kernels/avx2.h"
#include "cpu/kernels/blockinfo.h"

/* 32 nibbles: values 0..15 = low nibbles of qs[0..15], 16..31 = high nibbles */
AI __m256i unpack_q4(const uint8_t *qs)
{
    __m256i x = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)qs));
    x = _mm256_srlv_epi64(x, _mm256_setr_epi64x(0, 0, 4, 4));
    return _mm256_and_si256(x, _mm256_set1_epi8(15));
}

/* bit j of the little-endian 32-bit qh as byte j: 16 if set, 0 if clear */
AI __m256i unpack_q5h(const uint8_t *qh)
{
    __m256i v = _mm256_set1_epi32((int)ld32(qh));
    const __m256i shuf = _mm256_setr_epi64x(0x0000000000000000ll, 0x0101010101010101ll,
                                            0x0202020202020202ll, 0x0303030303030303ll);
    v = _mm256_shuffle_epi8(v, shuf);          /* byte j = byte j/8 of qh */
    const __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201ull);
    v = _mm256_cmpeq_epi8(_mm256_and_si256(v, bit), bit);
    return _mm256_and_si256(v, _mm256_set1_epi8(16));
}

/* a weight block's 32 values as bytes: unsigned q (Q4, Q5), or the signed w of Q8_0 */
AI __m256i a8_w(const uint8_t *blk, int kind)
{
    switch (kind) {
    case K_Q4_0: return unpack_q4(blk + offsetof(struct ob_block_q4_0, qs));
    case K_Q4_1: return unpack_q4(blk + offsetof(struct ob_block_q4_1, qs));
    case K_Q5_0:
        return _mm256_or_si256(unpack_q4(blk + offsetof(struct ob_block_q5_0, qs)),
                               unpack_q5h(blk + offsetof(struct ob_block_q5_0, qh)));
    case K_Q5_1:
        return _mm256_or_si256(unpack_q4(blk + offsetof(struct ob_block_q5_1, qs)),
                               unpack_q5h(blk + offsetof(struct ob_block_q5_1, qh)));
    }
    return ld(blk + offsetof(struct ob_block_q8_0, qs));
}

/* 8 int32 whose sum is sum_i w_i a_i (Q8_0: sign moved onto the activation) */
AI __m256i a8_dot(__m256i wv, __m256i av, int kind)
{
    if (kind == K_Q8_0)
        return dot_u8s8(_mm256_abs_epi8(wv), _mm256_sign_epi8(av, wv));
    return dot_u8s8(wv, av);
}

/* ---- one weight row against 1..4 raw activation rows -------------------------------------- */

/*
 * 8 blocks (m of them real: the rest are zero blocks of a padded copy) of one weight row
 * against NR activation rows; P[r] lane j accumulates block j.
 */
AI void a8_group(const uint8_t *w, const uint8_t *a, size_t as, __m256 *P, int m, int kind,
                 int NR)
{
    const size_t bb = a8_bb(kind);
    __m256i wv[8];
    UNROLL
    for (int j = 0; j < 8; j++)
        wv[j] = a8_w(w + j * bb, kind);
    __m256 dw = f16x8(w, bb);
    __m256 mw = a8_has_m(kind) ? f16x8(w + 2, bb) : _mm256_setzero_ps();
    UNROLL
    for (int r = 0; r < NR; r++) {
        const uint8_t *ar = a + r * as;
        __m256i v[8];
        UNROLL
        for (int j = 0; j < 8; j++)
            v[j] = a8_dot(wv[j], ld(ar + j * AB + offsetof(struct ob_act_a8, qs)), kind);
        __m256i is = hsum8v(v);
        __m256 da = f32x8(ar, AB);
        __m256i sa = _mm256_setzero_si256();
        if (a8_off_shift(kind) || a8_has_m(kind))
            sa = i32x8(ar + offsetof(struct ob_act_a8, sum), AB);
        if (a8_off_shift(kind))
            is = _mm256_sub_epi32(is, _mm256_sll_epi32(sa, _mm_cvtsi32_si128(a8_off_shift(kind))));
        /* (d_w * d_a) * (float)isum [+ (m_w * d_a) * (float)sum_a] */
        __m256 v0 = _mm256_mul_ps(_mm256_mul_ps(dw, da), _mm256_cvtepi32_ps(is));
        if (a8_has_m(kind))
            v0 = _mm256_add_ps(v0, _mm256_mul_ps(_mm256_mul_ps(mw, da), _mm256_cvtepi32_ps(sa)));
        P[r] = add_lanes(P[r], v0, m);
    }
}

AI void a8_rows(const void *w, const void *a, size_t as, int k, float *out, int kind, int NR)
{
    const int nb = k / 32;
    const size_t bb = a8_bb(kind);
    const uint8_t *wb = w, *ab = a;
    __m256 P[OB_MAXR];
    UNROLL
    for (int r = 0; r < NR; r++)
        P[r] = _mm256_setzero_ps();
    int b0 = 0;
    for (; b0 + 8 <= nb; b0 += 8)
        a8_group(wb + b0 * bb, ab + b0 * AB, as, P, 8, kind, NR);
    if (b0 < nb) {                       /* the last 1..7 blocks, from zero-padded copies */
        int m = nb - b0;
        uint8_t wt[8 * 34] = {0};
        uint8_t at[OB_MAXR][8 * AB];
        memcpy(wt, wb + b0 * bb, (size_t)m * bb);
        UNROLL
        for (int r = 0; r < NR; r++) {
            memset(at[r], 0, sizeof at[r]);
            memcpy(at[r], ab + r * as + b0 * AB, (size_t)m * AB);
        }
        a8_group(wt, at[0], sizeof at[0], P, m, kind, NR);
    }
    UNROLL
    for (int r = 0; r < NR; r++)
        out[r] = fold8(P[r]);
}

DOT_ROWS(a8, q4_0, K_Q4_0)
DOT_ROWS(a8, q4_1, K_Q4_1)
DOT_ROWS(a8, q5_0, K_Q5_0)
DOT_ROWS(a8, q5_1, K_Q5_1)
DOT_ROWS(a8, q8_0, K_Q8_0)

/* ---- many rows: GEMM --------------------------------------------------------------------------- */

/*
 * Layout: blocks in groups of 8 ("octets"); within an octet the 8 blocks are transposed so that
 * register t (t = 0..7) holds, in 32-bit lane j, values 4t..4t+3 of block j. The int16 pair sums
 * of the 8 registers then belong lane-wise to one block each and may be added before widening
 * (bounds above): lane j of the widened sum is block j's integer sum, with no horizontal step.
 *
 * Prepared activations: groups of GR rows, each group an array of octets.
 */
struct a8p {                       /* GR activation rows x one octet */
    int8_t q[GR][8][32];           /* row r, register t */
    float d[GR][8];                /* d of block j */
    int32_t s[GR][8];              /* offset * sum (Q4_0, Q5_0) or sum (others) */
    float sf[GR][8];               /* (float)sum (Q4_1, Q5_1) */
};

struct a8w {                       /* GW weight rows x one octet */
    uint8_t q[GW][8][32];          /* unsigned q, or the signed w of Q8_0 */
    float d[GW][8];
    float m[GW][8];
};

AI int a8_noct(int k)
{
    return (k / 32 + 7) / 8;
}

static size_t a8_prep_bytes(int k, int nr)
{
    return (size_t)((nr + GR - 1) / GR) * a8_noct(k) * sizeof(struct a8p);
}

AI void a8_prep(const void *x, size_t xs, int nr, int k, void *pv, int kind)
{
    const int nb = k / 32, no = a8_noct(k), ng = (nr + GR - 1) / GR;
    struct a8p *p = pv;
    for (int g = 0; g < ng; g++)
        for (int o = 0; o < no; o++, p++) {
            int m = nb - 8 * o < 8 ? nb - 8 * o : 8;
            UNROLL
            for (int r = 0; r < GR; r++) {
                int row = g * GR + r;
                if (row >= nr) {
                    memset(p->q[r], 0, sizeof p->q[r]);
                    UNROLL
                    for (int j = 0; j < 8; j++) {
                        p->d[r][j] = 0.0f;
                        p->s[r][j] = 0;
                        p->sf[r][j] = 0.0f;
                    }
                    continue;
                }
                const struct ob_act_a8 *a = (const struct ob_act_a8 *)((const char *)x + row * xs) + 8 * o;
                __m256i v[8];
                UNROLL
                for (int j = 0; j < 8; j++) {
                    if (j < m) {
                        v[j] = ld(a[j].qs);
                        p->d[r][j] = a[j].d;
                        p->s[r][j] = a[j].sum * (1 << a8_off_shift(kind));
                        p->sf[r][j] = (float)a[j].sum;
                    } else {
                        v[j] = _mm256_setzero_si256();
                        p->d[r][j] = 0.0f;
                        p->s[r][j] = 0;
                        p->sf[r][j] = 0.0f;
                    }
                }
                tr8x8_32(v);
                UNROLL
                for (int t = 0; t < 8; t++)
                    st(p->q[r][t], v[t]);
            }
        }
}

/* one weight row (or zeros when w is NULL) into slot i of a pair's octets */
AI void a8_decode(const uint8_t *w, int k, struct a8w *dst, int i, int kind)
{
    const int nb = k / 32, no = a8_noct(k);
    const size_t bb = a8_bb(kind);
    for (int o = 0; o < no; o++, dst++) {
        int m = nb - 8 * o < 8 ? nb - 8 * o : 8;
        if (!w)
            m = 0;
        __m256i v[8];
        UNROLL
        for (int j = 0; j < 8; j++) {
            if (j < m) {
                const uint8_t *blk = w + (size_t)(8 * o + j) * bb;
                v[j] = a8_w(blk, kind);
                dst->d[i][j] = _cvtsh_ss(ld16(blk));
                dst->m[i][j] = a8_has_m(kind) ? _cvtsh_ss(ld16(blk + 2)) : 0.0f;
            } else {
                v[j] = _mm256_setzero_si256();
                dst->d[i][j] = 0.0f;
                dst->m[i][j] = 0.0f;
            }
        }
        tr8x8_32(v);
        UNROLL
        for (int t = 0; t < 8; t++)
            st(dst->q[i][t], v[t]);
    }
}

/* int16 pair sums of registers t0 .. t1-1 for the 8 (weight, activation) pairs of a tile */
/*
 * c[w * GR + r] = int16 sum over registers t0 .. t1-1 of the pair sums of weight row w and
 * activation row r. The loop over t stays rolled so that the accumulators stay in registers.
 */
AI void a8_acc16(const struct a8w *W, const struct a8p *A, int t0, int t1, __m256i *c)
{
    {
        __m256i w0 = ld(W->q[0][t0]), w1 = ld(W->q[1][t0]);
        UNROLL
        for (int r = 0; r < GR; r++) {
            __m256i a = ld(A->q[r][t0]);
            c[r] = mubs(w0, a);
            c[GR + r] = mubs(w1, a);
        }
    }
#pragma GCC unroll 1
    for (int t = t0 + 1; t < t1; t++) {
        __m256i w0 = ld(W->q[0][t]), w1 = ld(W->q[1][t]);
        UNROLL
        for (int r = 0; r < GR; r++) {
            __m256i a = ld(A->q[r][t]);
            c[r] = _mm256_add_epi16(c[r], mubs(w0, a));
            c[GR + r] = _mm256_add_epi16(c[GR + r], mubs(w1, a));
        }
    }
}

/*
 * A tile: weight rows 2 (W), activation rows 4 (A), over all no octets. out[w * GR + r].
 */
AI void a8_tile(const struct a8w *W, const struct a8p *A, int nb, int no, float *out, int kind)
{
    const __m256i one = _mm256_set1_epi16(1);
    __m256 P[GW * GR];
    UNROLL
    for (int i = 0; i < GW * GR; i++)
        P[i] = _mm256_setzero_ps();
    for (int o = 0; o < no; o++, W++, A++) {
        int m = nb - 8 * o < 8 ? nb - 8 * o : 8;
        __m256i e[GW * GR];                     /* lane j: block j's integer sum */
        if (kind == K_Q8_0) {
            UNROLL
            for (int i = 0; i < GW * GR; i++)
                e[i] = _mm256_setzero_si256();
#pragma GCC unroll 1
            for (int t = 0; t < 8; t++) {
                __m256i w0 = ld(W->q[0][t]), w1 = ld(W->q[1][t]);
                __m256i u0 = _mm256_abs_epi8(w0), u1 = _mm256_abs_epi8(w1);
                UNROLL
                for (int r = 0; r < GR; r++) {
                    __m256i a = ld(A->q[r][t]);
                    e[r] = _mm256_add_epi32(e[r], _mm256_madd_epi16(mubs(u0, _mm256_sign_epi8(a, w0)), one));
                    e[GR + r] = _mm256_add_epi32(e[GR + r], _mm256_madd_epi16(mubs(u1, _mm256_sign_epi8(a, w1)), one));
                }
            }
        } else if (kind == K_Q4_0 || kind == K_Q4_1) {
            __m256i c[GW * GR];
            a8_acc16(W, A, 0, 8, c);
            UNROLL
            for (int i = 0; i < GW * GR; i++)
                e[i] = _mm256_madd_epi16(c[i], one);
        } else {
            __m256i c[GW * GR];
            a8_acc16(W, A, 0, 4, c);
            UNROLL
            for (int i = 0; i < GW * GR; i++)
                e[i] = _mm256_madd_epi16(c[i], one);
            a8_acc16(W, A, 4, 8, c);
            UNROLL
            for (int i = 0; i < GW * GR; i++)
                e[i] = _mm256_add_epi32(e[i], _mm256_madd_epi16(c[i], one));
        }
        UNROLL
        for (int w = 0; w < GW; w++) {
            __m256 dw = _mm256_loadu_ps(W->d[w]);
            __m256 mw = a8_has_m(kind) ? _mm256_loadu_ps(W->m[w]) : _mm256_setzero_ps();
            UNROLL
            for (int r = 0; r < GR; r++) {
                __m256 da = _mm256_loadu_ps(A->d[r]);
                __m256i is = e[w * GR + r];
                if (a8_off_shift(kind))
                    is = _mm256_sub_epi32(is, ld(A->s[r]));
                __m256 v = _mm256_mul_ps(_mm256_mul_ps(dw, da), _mm256_cvtepi32_ps(is));
                if (a8_has_m(kind))
                    v = _mm256_add_ps(v, _mm256_mul_ps(_mm256_mul_ps(mw, da), _mm256_loadu_ps(A->sf[r])));
                P[w * GR + r] = add_lanes(P[w * GR + r], v, m);
            }
        }
    }
    UNROLL
    for (int i = 0; i < GW * GR; i++)
        out[i] = fold8(P[i]);
}

#define NPAIR 4                    /* weight pairs decoded at once */

static size_t a8_scratch_bytes(int k)
{
    return (size_t)NPAIR * a8_noct(k) * sizeof(struct a8w);
}

AI void a8_run(const void *w, size_t rb, int n0, int n1, int k, const void *pv, int nr, float *y,
               size_t ldy, void *scratch, int kind)
{
    const int nb = k / 32, no = a8_noct(k), ng = (nr + GR - 1) / GR;
    struct a8w *dec = scratch;
    const struct a8p *p = pv;
    for (int n = n0; n < n1; n += GW * NPAIR) {
        int np = 0;
        for (; np < NPAIR && n + GW * np < n1; np++)
            UNROLL
            for (int i = 0; i < GW; i++) {
                int row = n + GW * np + i;
                a8_decode(row < n1 ? (const uint8_t *)w + (size_t)row * rb : NULL, k,
                          dec + np * no, i, kind);
            }
        for (int g = 0; g < ng; g++) {
            int rr = nr - g * GR < GR ? nr - g * GR : GR;
            for (int q = 0; q < np; q++) {
                float out[GW * GR];
                a8_tile(dec + q * no, p + (size_t)g * no, nb, no, out, kind);
                tile_store(out, y, ldy, n + GW * q, n1, g * GR, rr);
            }
        }
    }
}

GEMM_ENTRIES(a8, q4_0, K_Q4_0)
GEMM_ENTRIES(a8, q4_1, K_Q4_1)
GEMM_ENTRIES(a8, q5_0, K_Q5_0)
GEMM_ENTRIES(a8, q5_1, K_Q5_1)
GEMM_ENTRIES(a8, q8_0, K_Q8_0)

/* min_rows: where the GEMM overtakes the dot kernel (measured on Zen 3; hot weights) */
void ob_kernels_avx2_a8(struct ob_kernel_table *t)
{
    GEMM_SET(t, OB_Q4_0, a8, q4_0, 3, GW * NPAIR);
    GEMM_SET(t, OB_Q4_1, a8, q4_1, 3, GW * NPAIR);
    GEMM_SET(t, OB_Q5_0, a8, q5_0, 3, GW * NPAIR);
    GEMM_SET(t, OB_Q5_1, a8, q5_1, 3, GW * NPAIR);
    GEMM_SET(t, OB_Q8_0, a8, q8_0, 6, GW * NPAIR);
}
