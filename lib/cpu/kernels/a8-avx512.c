/*
 * a8-avx512.c — AVX-512 (VNNI) dot products of the 32-value formats (Q4_0, Q4_1, Q5_0, Q5_1,
 * Q8_0) with A8 activations. Reference: ob_dot_q4_0 .. ob_dot_q8_0 in dot.h.
 *
 * Why the results are equal:
 *  - a block's integer sum is exact in any order: vpdpbusd sums 4 products u8 x s8 into int32
 *    (no intermediate saturation). Weights enter as unsigned bytes: Q4 q (0..15), Q5 q (0..31),
 *    Q8_0 w + 128 (0..255, the sign bit flipped); the offsets come off in int32 with the
 *    activation block's sum: sum (q - o) a = sum q a - o * sum a (Q4_0 o = 8, Q5_0 16, Q8_0 128).
 *  - the float epilogue is the reference's, operation by operation:
 *        (d_w * d_a) * (float)isum [+ (m_w * d_a) * (float)sum_a]
 *    One row (dot): lane j of a register is block b0 + j of 8 consecutive blocks (b0 a multiple
 *    of 8) and adds into partial j, the reference's partial b mod 8; a group of fewer than 8
 *    blocks adds under a mask; the fold is ob_fold8's. GEMM: lane n is weight row n of a panel;
 *    blocks b = c, c + 8, ... add into partial c in increasing b, folded lane-wise at the end.
 *  - fp16 scales are converted with F16C (exact; a signalling NaN comes out quiet, and the first
 *    multiplication quietens the reference's too, so the product bits agree).
 */
#include <stddef.h>

#include "cpu/kernels/avx512.h"
#include "cpu/kernels/blockinfo.h"
#include "cpu/kernels/a8p.h"

/* log2 of the offset taken off isum with the activation sum (Q8_0: the flipped sign bit) */
AI int a8_osh(int kind)
{
    return kind == K_Q8_0 ? 7 : a8_off_shift(kind);
}

/* a weight block's 32 values as unsigned bytes (Q8_0: w + 128) */
AI __m256i a8_u(const uint8_t *blk, int kind)
{
    const __m256i m4 = _mm256_set1_epi8(15);
    switch (kind) {
    case K_Q4_0:
    case K_Q4_1:
    case K_Q5_0:
    case K_Q5_1: {
        size_t qs = kind == K_Q4_0 ? offsetof(struct ob_block_q4_0, qs)
                  : kind == K_Q4_1 ? offsetof(struct ob_block_q4_1, qs)
                  : kind == K_Q5_0 ? offsetof(struct ob_block_q5_0, qs)
                                   : offsetof(struct ob_block_q5_1, qs);
        __m256i x = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(blk + qs)));
        __m256i q = _mm256_and_si256(_mm256_srlv_epi64(x, _mm256_setr_epi64x(0, 0, 4, 4)), m4);
        if (kind == K_Q5_0 || kind == K_Q5_1) {
            size_t qh = kind == K_Q5_0 ? offsetof(struct ob_block_q5_0, qh)
                                       : offsetof(struct ob_block_q5_1, qh);
            q = _mm256_mask_add_epi8(q, (__mmask32)ld32(blk + qh), q, _mm256_set1_epi8(16));
        }
        return q;
    }
    }
    return _mm256_xor_si256(ld(blk + offsetof(struct ob_block_q8_0, qs)), _mm256_set1_epi8(-128));
}

/* ---- one weight row against 1..4 raw activation rows -------------------------------------- */

/*
 * Blocks b0 .. b0 + m - 1 (m <= 8) of one weight row against NR activation rows; P[r] lane j
 * accumulates block b0 + j. Nothing past block m - 1 is read: the last group of a row whose
 * block count is not a multiple of 8 (Gemma's K = 640: 20 blocks) runs in place.
 */
AI void a8_group(const uint8_t *w, const uint8_t *a, size_t as, __m256 *P, int m, int kind,
                 int NR)
{
    const size_t bb = a8_bb(kind);
    __m256i wv[8];
    UNROLL
    for (int j = 0; j < 8; j++)
        wv[j] = j < m ? a8_u(w + j * bb, kind) : _mm256_setzero_si256();
    __m256 dw = f16x8_n(w, bb, m);
    __m256 mw = a8_has_m(kind) ? f16x8_n(w + 2, bb, m) : _mm256_setzero_ps();
    UNROLL
    for (int r = 0; r < NR; r++) {
        const uint8_t *ar = a + r * as;
        __m256i v[8];
        UNROLL
        for (int j = 0; j < 8; j++)
            v[j] = j < m ? dpbusd256(_mm256_setzero_si256(), wv[j],
                                     ld(ar + j * AB + offsetof(struct ob_act_a8, qs)))
                         : _mm256_setzero_si256();
        __m256i is = hsum8v(v);
        __m256 da = f32x8_n(ar, AB, m);
        __m256i sa = i32x8_n(ar + offsetof(struct ob_act_a8, sum), AB, m);
        if (a8_osh(kind))
            is = _mm256_sub_epi32(is, _mm256_slli_epi32(sa, a8_osh(kind)));
        /* (d_w * d_a) * (float)isum [+ (m_w * d_a) * (float)sum_a] */
        __m256 v0 = _mm256_mul_ps(_mm256_mul_ps(dw, da), _mm256_cvtepi32_ps(is));
        if (a8_has_m(kind))
            v0 = _mm256_add_ps(v0, _mm256_mul_ps(_mm256_mul_ps(mw, da), _mm256_cvtepi32_ps(sa)));
        P[r] = add_lanes_k(P[r], v0, m);
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
    if (b0 < nb)                         /* the last 1..7 blocks */
        a8_group(wb + b0 * bb, ab + b0 * AB, as, P, nb - b0, kind, NR);
    UNROLL
    for (int r = 0; r < NR; r++)
        out[r] = fold8(P[r]);
}

DOT_ROWS512(a8, q4_0, K_Q4_0)
DOT_ROWS512(a8, q4_1, K_Q4_1)
DOT_ROWS512(a8, q5_0, K_Q5_0)
DOT_ROWS512(a8, q5_1, K_Q5_1)
DOT_ROWS512(a8, q8_0, K_Q8_0)

/* ---- few rows with prepared activations (decode): the nibble formats ----------------------- */

/*
 * Q4_0, Q4_1, Q5_0, Q5_1 at R = 1 .. 3 (below the GEMM's min_rows): the driver lays the
 * activation rows out once per ob_matmul call (a8v_prep), then each weight row takes four
 * blocks per 512-bit register, block j in 128-bit lane j: its 16 bytes of nibble pairs, low
 * nibbles (values 0..15) in one register and high nibbles (16..31) in another, against the
 * activation's values 0..15 and 16..31 of the same four blocks, laid out to match. Two
 * vpdpbusd per register pair give four 4-product sums per lane; hsum4x2 folds the lanes of
 * eight blocks into one int32 each. The activation's scales and sums are contiguous per eight
 * blocks, so the epilogue (the reference's, operation by operation, as in a8_group) loads them
 * instead of gathering from 40-byte blocks.
 */
struct a8v {                       /* eight blocks of one activation row, prepared */
    int8_t lo[2][64];              /* [h]: values 0..15 of blocks 4h .. 4h + 3, 16 bytes each */
    int8_t hi[2][64];              /* values 16..31 */
    float d[8];                    /* d_a */
    int32_t soff[8];               /* sum << offset shift (Q4_0, Q5_0) */
    float sumf[8];                 /* (float)sum (Q4_1, Q5_1) */
    int32_t pad[8];
};

static size_t a8v_prep_bytes(int k, int nr)
{
    return (size_t)nr * (size_t)((k / 32 + 7) / 8) * sizeof(struct a8v);
}

/* groups of eight blocks per row; the last group's missing blocks are zeros */
AI void a8v_prep(const void *x, size_t xs, int nr, int k, void *pv, int kind)
{
    const int nb = k / 32;
    struct a8v *g = pv;
    for (int r = 0; r < nr; r++) {
        const struct ob_act_a8 *a = (const struct ob_act_a8 *)((const char *)x + r * xs);
        for (int b0 = 0; b0 < nb; b0 += 8, g++) {
            memset(g, 0, sizeof *g);
            for (int j = 0; j < 8 && b0 + j < nb; j++) {
                const struct ob_act_a8 *ab = &a[b0 + j];
                memcpy(&g->lo[j / 4][16 * (j % 4)], ab->qs, 16);
                memcpy(&g->hi[j / 4][16 * (j % 4)], ab->qs + 16, 16);
                g->d[j] = ab->d;
                g->soff[j] = (int32_t)((uint32_t)ab->sum << a8_osh(kind));
                g->sumf[j] = (float)ab->sum;
            }
        }
    }
}

static size_t a8v_scratch_bytes(int k)
{
    (void)k;
    return 0;
}

/* lane j of the result (j < 8) = the sum of 128-bit lane j % 4 of s[j / 4] (exact) */
AI __m256i hsum4x2(__m512i s0, __m512i s1)
{
    __m512i p = _mm512_add_epi32(_mm512_unpacklo_epi32(s0, s1), _mm512_unpackhi_epi32(s0, s1));
    __m512i q = _mm512_add_epi32(p, _mm512_unpackhi_epi64(p, p));
    __m512i idx = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 0, 0, 0, 0, 0, 0, 0, 0);
    return _mm512_castsi512_si256(_mm512_permutexvar_epi32(idx, q));
}

/* Q5: the high bits of four blocks' values 0..15 (*lo) and 16..31 (*hi) as byte masks (of
 * the first m blocks; zeros beyond) */
AI void q5_masks(const uint8_t *qh, size_t bb, int m, __mmask64 *lo, __mmask64 *hi)
{
    uint64_t q[4];
    UNROLL
    for (int j = 0; j < 4; j++)          /* the first m blocks only */
        q[j] = j < m ? ld32(qh + j * bb) : 0;
    uint64_t a = q[0] | q[1] << 32, b = q[2] | q[3] << 32;
    const uint64_t ml = 0x0000ffff0000ffffull, mh = ~ml;
    *lo = _pext_u64(a, ml) | _pext_u64(b, ml) << 32;
    *hi = _pext_u64(a, mh) | _pext_u64(b, mh) << 32;
}

/*
 * Blocks b0 .. b0 + m - 1 (m <= 8; nothing past them is read) of one weight row against NR
 * prepared activation groups (g, gs groups apart); P[r] lane j accumulates block b0 + j.
 */
AI void a8v_group(const uint8_t *w, const struct a8v *g, size_t gs, __m256 *P, int m, int kind,
                  int NR)
{
    const size_t bb = a8_bb(kind);
    const size_t qs = kind == K_Q4_0 ? offsetof(struct ob_block_q4_0, qs)
                    : kind == K_Q4_1 ? offsetof(struct ob_block_q4_1, qs)
                    : kind == K_Q5_0 ? offsetof(struct ob_block_q5_0, qs)
                                     : offsetof(struct ob_block_q5_1, qs);
    const __m512i m4 = _mm512_set1_epi8(15);
    __m512i L[2], H[2];
    UNROLL
    for (int h = 0; h < 2; h++) {
        const uint8_t *q = w + 4 * h * bb + qs;
        __m512i x = _mm512_setzero_si512();
        UNROLL
        for (int j = 0; j < 4; j++)      /* block 4h + j into 128-bit lane j */
            if (4 * h + j < m)
                x = _mm512_mask_broadcast_i32x4(x, (__mmask16)(0xfu << 4 * j),
                                                _mm_loadu_si128((const __m128i *)(q + j * bb)));
        L[h] = _mm512_and_si512(x, m4);
        H[h] = _mm512_and_si512(_mm512_srli_epi16(x, 4), m4);
        if (kind == K_Q5_0 || kind == K_Q5_1) {
            size_t qh = kind == K_Q5_0 ? offsetof(struct ob_block_q5_0, qh)
                                       : offsetof(struct ob_block_q5_1, qh);
            __mmask64 kl, kh;
            q5_masks(w + 4 * h * bb + qh, bb, m - 4 * h, &kl, &kh);
            const __m512i b4 = _mm512_set1_epi8(16);
            L[h] = _mm512_mask_add_epi8(L[h], kl, L[h], b4);
            H[h] = _mm512_mask_add_epi8(H[h], kh, H[h], b4);
        }
    }
    __m256 dw = f16x8_n(w, bb, m);
    __m256 mw = a8_has_m(kind) ? f16x8_n(w + 2, bb, m) : _mm256_setzero_ps();
    UNROLL
    for (int r = 0; r < NR; r++) {
        const struct a8v *a = g + r * gs;
        __m512i s0 = dpbusd(_mm512_setzero_si512(), L[0], ld512(a->lo[0]));
        __m512i s1 = dpbusd(_mm512_setzero_si512(), L[1], ld512(a->lo[1]));
        s0 = dpbusd(s0, H[0], ld512(a->hi[0]));
        s1 = dpbusd(s1, H[1], ld512(a->hi[1]));
        __m256i is = hsum4x2(s0, s1);
        if (a8_osh(kind))
            is = _mm256_sub_epi32(is, _mm256_loadu_si256((const __m256i *)a->soff));
        __m256 da = _mm256_loadu_ps(a->d);
        /* (d_w * d_a) * (float)isum [+ (m_w * d_a) * (float)sum_a] */
        __m256 v0 = _mm256_mul_ps(_mm256_mul_ps(dw, da), _mm256_cvtepi32_ps(is));
        if (a8_has_m(kind))
            v0 = _mm256_add_ps(v0, _mm256_mul_ps(_mm256_mul_ps(mw, da), _mm256_loadu_ps(a->sumf)));
        P[r] = add_lanes_k(P[r], v0, m);
    }
}

#include "cpu/kernels/a8v-rows.h"

GEMM_ENTRIES512(a8v, v_q4_0, K_Q4_0)
GEMM_ENTRIES512(a8v, v_q4_1, K_Q4_1)
GEMM_ENTRIES512(a8v, v_q5_0, K_Q5_0)
GEMM_ENTRIES512(a8v, v_q5_1, K_Q5_1)

/* ---- many rows: GEMM ---------------------------------------------------------------------- */

/*
 * As in kq-avx512.c: weight rows decoded in panels of 32 (one row per int32 lane of two
 * registers), activations broadcast 4 bytes at a time; each block's sum is 8 vpdpbusd, its
 * epilogue 16 lanes wide.
 */
#define PW 32                      /* weight rows of a panel */
#define RT 6                       /* activation rows of a tile */

struct a8p {                       /* one activation block, prepared */
    float d;                       /* d_a */
    int32_t soff;                  /* offset * sum (Q4_0, Q5_0, Q8_0) */
    float sumf;                    /* (float)sum (Q4_1, Q5_1) */
    int32_t pad;
    int8_t qs[32];
};

struct a8d {                       /* one block of a 32-row panel */
    uint8_t q[8][2][64];           /* dword t (values 4t .. 4t + 3): [t][n / 16] lane n % 16 */
    float d[2][16], m[2][16];
};

static size_t a8_prep_bytes(int k, int nr)
{
    return (size_t)nr * (size_t)(k / 32) * sizeof(struct a8p);
}

AI void a8_prep(const void *x, size_t xs, int nr, int k, void *pv, int kind)
{
    const int nb = k / 32;
    struct a8p *p = pv;
    for (int r = 0; r < nr; r++) {
        const struct ob_act_a8 *a = (const struct ob_act_a8 *)((const char *)x + r * xs);
        for (int b = 0; b < nb; b++, p++) {
            p->d = a[b].d;
            p->soff = (int32_t)((uint32_t)a[b].sum << a8_osh(kind));
            p->sumf = (float)a[b].sum;
            p->pad = 0;
            memcpy(p->qs, a[b].qs, 32);
        }
    }
}

static size_t a8_scratch_bytes(int k)
{
    return (size_t)(k / 32) * sizeof(struct a8d);
}

/* rows [0, rows) of a 16-row half panel h (row n at w + n * rb; the rest zeros) */
AI void a8_decode16(const uint8_t *w, size_t rb, int rows, int nb, struct a8d *dst, int h,
                    int kind)
{
    const size_t bb = a8_bb(kind);
    for (int b = 0; b < nb; b += 2) {
        int two = b + 1 < nb;
        __m512i v[16];
        UNROLL
        for (int n = 0; n < 16; n++) {
            if (n >= rows) {
                v[n] = _mm512_setzero_si512();
                continue;
            }
            const uint8_t *blk = w + n * rb + (size_t)b * bb;
            __m256i lo = a8_u(blk, kind), hi = two ? a8_u(blk + bb, kind) : _mm256_setzero_si256();
            v[n] = _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
            dst[b].d[h][n] = _cvtsh_ss(ld16(blk));
            dst[b].m[h][n] = a8_has_m(kind) ? _cvtsh_ss(ld16(blk + 2)) : 0.0f;
            if (two) {
                dst[b + 1].d[h][n] = _cvtsh_ss(ld16(blk + bb));
                dst[b + 1].m[h][n] = a8_has_m(kind) ? _cvtsh_ss(ld16(blk + bb + 2)) : 0.0f;
            }
        }
        UNROLL
        for (int n = 0; n < 16; n++)
            if (n >= rows) {
                dst[b].d[h][n] = dst[b].m[h][n] = 0.0f;
                if (two)
                    dst[b + 1].d[h][n] = dst[b + 1].m[h][n] = 0.0f;
            }
        tr16x16_32(v);
        UNROLL
        for (int t = 0; t < 8; t++) {
            st512(dst[b].q[t][h], v[t]);
            if (two)
                st512(dst[b + 1].q[t][h], v[8 + t]);
        }
    }
}

/*
 * A tile: the panel's 32 weight rows (W, nb blocks) against RA prepared activation rows (a,
 * ast bytes apart); y[r * ldy + n] for the first nv rows n of the panel.
 */
AI void a8_tile(const struct a8d *W, const uint8_t *a, size_t ast, int nb, float *y, size_t ldy,
                int nv, int kind, int RA)
{
    __m512 part[8][RT][2];
#pragma GCC unroll 1
    for (int c = 0; c < 8; c++) {
        __m512 P[RT][2];
        UNROLL
        for (int r = 0; r < RA; r++)
            P[r][0] = P[r][1] = _mm512_setzero_ps();
#pragma GCC unroll 1
        for (int b = c; b < nb; b += 8) {
            const struct a8d *wb = W + b;
            const uint8_t *ab = a + (size_t)b * sizeof(struct a8p);
            __m512i S0[RT], S1[RT];
            UNROLL
            for (int r = 0; r < RA; r++)
                S0[r] = S1[r] = _mm512_setzero_si512();
            UNROLL
            for (int t = 0; t < 8; t++) {
                __m512i w0 = ld512(wb->q[t][0]), w1 = ld512(wb->q[t][1]);
                UNROLL
                for (int r = 0; r < RA; r++) {
                    __m512i x = bcast32(ab + r * ast + offsetof(struct a8p, qs) + 4 * t);
                    S0[r] = dpbusd(S0[r], w0, x);
                    S1[r] = dpbusd(S1[r], w1, x);
                }
            }
            UNROLL
            for (int hh = 0; hh < 2; hh++) {
                __m512 dw = _mm512_loadu_ps(wb->d[hh]);
                __m512 mw = a8_has_m(kind) ? _mm512_loadu_ps(wb->m[hh]) : _mm512_setzero_ps();
                UNROLL
                for (int r = 0; r < RA; r++) {
                    const uint8_t *pr = ab + r * ast;
                    __m512i is = hh ? S1[r] : S0[r];
                    if (a8_osh(kind))
                        is = _mm512_sub_epi32(is, bcast32(pr + offsetof(struct a8p, soff)));
                    __m512 da = _mm512_set1_ps(ldf(pr));
                    __m512 v = _mm512_mul_ps(_mm512_mul_ps(dw, da), _mm512_cvtepi32_ps(is));
                    if (a8_has_m(kind))
                        v = _mm512_add_ps(v, _mm512_mul_ps(_mm512_mul_ps(mw, da),
                                                           _mm512_set1_ps(ldf(pr + offsetof(struct a8p, sumf)))));
                    P[r][hh] = _mm512_add_ps(P[r][hh], v);
                }
            }
        }
        UNROLL
        for (int r = 0; r < RA; r++) {
            part[c][r][0] = P[r][0];
            part[c][r][1] = P[r][1];
        }
    }
    UNROLL
    for (int h = 0; h < 2; h++) {
        int m = nv - 16 * h;
        if (m <= 0)
            break;
        __mmask16 k = (__mmask16)(m >= 16 ? 0xffffu : (1u << m) - 1u);
        UNROLL
        for (int r = 0; r < RA; r++) {
            __m512 p[8];
            UNROLL
            for (int c = 0; c < 8; c++)
                p[c] = part[c][r][h];
            _mm512_mask_storeu_ps(y + (size_t)r * ldy + 16 * h, k, fold8x16(p));
        }
    }
}

/*
 * a8_decode16's blocks from panels (matrix.h; Q4_0, Q4_1, Q5_0, Q8_0): the 32-row panel's nv
 * rows are four 8-row panels (from w, 8 * rb bytes each; those past nv as zeros), each a half
 * of one 16-lane register, read lane-wise (a8p.h) without the transposes
 */
AI void a8p_decode32(const uint8_t *w, size_t rb, int nv, int nb, struct a8d *dst, int kind)
{
    const size_t pb = 8 * a8_bb(kind);
    for (int b = 0; b < nb; b++, dst++)
        UNROLL
        for (int p = 0; p < 4; p++) {
            const int h = p / 2, o = 8 * (p % 2);
            if (8 * p >= nv) {
                UNROLL
                for (int t = 0; t < 8; t++)
                    st(dst->q[t][h] + 4 * o, _mm256_setzero_si256());
                _mm256_storeu_ps(dst->d[h] + o, _mm256_setzero_ps());
                _mm256_storeu_ps(dst->m[h] + o, _mm256_setzero_ps());
                continue;
            }
            const uint8_t *wb = w + (size_t)p * 8 * rb + (size_t)b * pb;
            if (kind == K_Q8_0)                      /* w + 128, as a8_u */
                UNROLL
                for (int t = 0; t < 8; t++)
                    st(dst->q[t][h] + 4 * o, _mm256_xor_si256(ld(wb + 32 * t), _mm256_set1_epi8(-128)));
            else
                UNROLL
                for (int d = 0; d < 4; d++) {
                    __m256i lo, hi;
                    a8p_vals(wb, d, kind, &lo, &hi);
                    st(dst->q[d][h] + 4 * o, lo);
                    st(dst->q[4 + d][h] + 4 * o, hi);
                }
            _mm256_storeu_ps(dst->d[h] + o, a8p_scale(wb, kind, 0));
            _mm256_storeu_ps(dst->m[h] + o,
                             kind == K_Q4_1 ? a8p_scale(wb, kind, 1) : _mm256_setzero_ps());
        }
}

AI void a8_run_l(const void *w, size_t rb, int n0, int n1, int k, const void *pv, int nr,
                 float *y, size_t ldy, void *scratch, int kind, int P8)
{
    const int nb = k / 32;
    const size_t ast = (size_t)nb * sizeof(struct a8p);
    struct a8d *dec = scratch;
    const uint8_t *p = pv;
    for (int n = n0; n < n1; n += PW) {
        int nv = n1 - n < PW ? n1 - n : PW;
        const uint8_t *wn = (const uint8_t *)w + (size_t)n * rb;
        if (P8) {
            a8p_decode32(wn, rb, nv, nb, dec, kind);
        } else {
            a8_decode16(wn, rb, nv < 16 ? nv : 16, nb, dec, 0, kind);
            a8_decode16(wn + 16 * rb, rb, nv - 16, nb, dec, 1, kind);
        }
        /* tiles of RT rows or as few fewer as balance the row count (8 rows: 4 + 4) */
        int nt = (nr + RT - 1) / RT;
        for (int i = 0, r = 0; i < nt; i++) {
            int m = nr / nt + (i < nr % nt);
            const uint8_t *a = p + r * ast;
            float *yr = y + (size_t)r * ldy + n;
            switch (m) {
            case 1: a8_tile(dec, a, ast, nb, yr, ldy, nv, kind, 1); break;
            case 2: a8_tile(dec, a, ast, nb, yr, ldy, nv, kind, 2); break;
            case 3: a8_tile(dec, a, ast, nb, yr, ldy, nv, kind, 3); break;
            case 4: a8_tile(dec, a, ast, nb, yr, ldy, nv, kind, 4); break;
            case 5: a8_tile(dec, a, ast, nb, yr, ldy, nv, kind, 5); break;
            default: a8_tile(dec, a, ast, nb, yr, ldy, nv, kind, 6); break;
            }
            r += m;
        }
    }
}

AI void a8_run(const void *w, size_t rb, int n0, int n1, int k, const void *pv, int nr, float *y,
               size_t ldy, void *scratch, int kind)
{
    a8_run_l(w, rb, n0, n1, k, pv, nr, y, ldy, scratch, kind, 0);
}

AI void a8p_run(const void *w, size_t rb, int n0, int n1, int k, const void *pv, int nr,
                float *y, size_t ldy, void *scratch, int kind)
{
    a8_run_l(w, rb, n0, n1, k, pv, nr, y, ldy, scratch, kind, 1);
}

/* ---- few rows in panels: streamed, unpacked in registers ----------------------------------- */

/*
 * Up to SR activation rows (prepared as for the GEMM, struct a8p) against the panels (matrix.h)
 * as they lie, nothing decoded to memory: each block's dwords unpacked in registers (a8p.h;
 * Q8_0 as w + 128, as a8_u), each a vpdpbusd against the activation's 4 bytes broadcast, so
 * the weights stream once at about the speed of memory while the few rows of a decode batch or
 * a verify step ride along. From 4 rows two panels at once, 16 lanes (lane n is row n of the
 * pair: the first panel's rows in the low half, the second's in the high; a last lone panel
 * has zeros there); up to 3 one panel, 8 lanes, a single stream (one row streamed 15-20 %
 * slower through the pairs). The epilogue is the GEMM's, lane-wise; block b adds into partial
 * b mod 8, folded at the end.
 */
#define SR 8                       /* activation rows of a streamed tile */

AI __m512i join256(__m256i lo, __m256i hi)
{
    return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
}

AI __m512 join8ps(__m256 lo, __m256 hi)
{
    return _mm512_castpd_ps(_mm512_insertf64x4(_mm512_castpd256_pd512(_mm256_castps_pd(lo)),
                                               _mm256_castps_pd(hi), 1));
}

/* dword t of a panel block (values 4t .. 4t + 3 of each of its 8 rows) as unsigned bytes: the
 * nibble formats' t < 4 low nibbles, t >= 4 high ones (a8p_vals); Q8_0's w + 128 */
AI void a8s_dwords(const uint8_t *wb, int kind, __m256i q[8])
{
    if (kind == K_Q8_0) {
        UNROLL
        for (int t = 0; t < 8; t++)
            q[t] = _mm256_xor_si256(ld(wb + 32 * t), _mm256_set1_epi8(-128));
        return;
    }
    UNROLL
    for (int d = 0; d < 4; d++)
        a8p_vals(wb, d, kind, &q[d], &q[4 + d]);
}

/* the offset's share off isum, as an int32 of the prepared row pr */
AI int32_t a8s_soff(const uint8_t *pr)
{
    return (int32_t)ld32(pr + offsetof(struct a8p, soff));
}

AI float a8s_sumf(const uint8_t *pr)
{
    return ldf(pr + offsetof(struct a8p, sumf));
}

/* nv (8 or 16) weight rows from byte at of w: the panel there and, for 16, the next one */
AI void a8s_tile(const uint8_t *w, size_t at, size_t rb, size_t end, int nb, const uint8_t *a,
                 size_t ast, float *y, size_t ldy, int nv, int kind, int NR)
{
    const size_t pb = 8 * a8_bb(kind), pf = ob_pf_panel(NR);
    const int two = nv > 8;
    __m512 part[8][SR];
    UNROLL
    for (int c = 0; c < 8; c++)
        UNROLL
        for (int r = 0; r < NR; r++)
            part[c][r] = _mm512_setzero_ps();
#pragma GCC unroll 1
    for (int b = 0; b < nb; b++) {
        const uint8_t *p0 = w + at + (size_t)b * pb, *p1 = p0 + 8 * rb;
        const uint8_t *ab = a + (size_t)b * sizeof(struct a8p);
        ob_pf_span(w, at + (size_t)b * pb + pf, pb, end);
        if (two)
            ob_pf_span(w, at + 8 * rb + (size_t)b * pb + pf, pb, end);
        __m256i q0[8], q1[8];
        a8s_dwords(p0, kind, q0);
        if (two)
            a8s_dwords(p1, kind, q1);
        __m512i S[SR];
        UNROLL
        for (int r = 0; r < NR; r++)
            S[r] = _mm512_setzero_si512();
        UNROLL
        for (int t = 0; t < 8; t++) {
            __m512i q = join256(q0[t], two ? q1[t] : _mm256_setzero_si256());
            UNROLL
            for (int r = 0; r < NR; r++)
                S[r] = dpbusd(S[r], q, bcast32(ab + r * ast + offsetof(struct a8p, qs) + 4 * t));
        }
        const __m256 z = _mm256_setzero_ps();
        __m512 dw = join8ps(a8p_scale(p0, kind, 0), two ? a8p_scale(p1, kind, 0) : z);
        __m512 mw = a8_has_m(kind)
                  ? join8ps(a8p_scale(p0, kind, 1), two ? a8p_scale(p1, kind, 1) : z)
                  : _mm512_setzero_ps();
        UNROLL
        for (int r = 0; r < NR; r++) {
            const uint8_t *pr = ab + r * ast;
            __m512i is = S[r];
            if (a8_osh(kind))
                is = _mm512_sub_epi32(is, _mm512_set1_epi32(a8s_soff(pr)));
            __m512 da = _mm512_set1_ps(ldf(pr));
            /* (d_w * d_a) * (float)isum [+ (m_w * d_a) * (float)sum_a] */
            __m512 v = _mm512_mul_ps(_mm512_mul_ps(dw, da), _mm512_cvtepi32_ps(is));
            if (a8_has_m(kind))
                v = _mm512_add_ps(v, _mm512_mul_ps(_mm512_mul_ps(mw, da),
                                                   _mm512_set1_ps(a8s_sumf(pr))));
            part[b & 7][r] = _mm512_add_ps(part[b & 7][r], v);
        }
    }
    const __mmask16 k = two ? 0xffffu : 0xffu;
    UNROLL
    for (int r = 0; r < NR; r++) {
        __m512 p[8];
        UNROLL
        for (int c = 0; c < 8; c++)
            p[c] = part[c][r];
        _mm512_mask_storeu_ps(y + (size_t)r * ldy, k, fold8x16(p));
    }
}

/* the same over the one panel at byte at of w, 8 lanes (NR <= 3) */
AI void a8s_tile8(const uint8_t *w, size_t at, size_t end, int nb, const uint8_t *a,
                  size_t ast, float *y, size_t ldy, int kind, int NR)
{
    const size_t pb = 8 * a8_bb(kind), pf = ob_pf_panel(NR);
    __m256 part[8][3];
    clear_parts((__m256 *)part, 3, NR);
#pragma GCC unroll 1
    for (int b = 0; b < nb; b++) {
        const uint8_t *p0 = w + at + (size_t)b * pb, *ab = a + (size_t)b * sizeof(struct a8p);
        ob_pf_span(w, at + (size_t)b * pb + pf, pb, end);
        __m256i q[8], S[3];
        a8s_dwords(p0, kind, q);
        UNROLL
        for (int r = 0; r < NR; r++)
            S[r] = _mm256_setzero_si256();
        UNROLL
        for (int t = 0; t < 8; t++)
            UNROLL
            for (int r = 0; r < NR; r++)
                S[r] = dpbusd256(S[r], q[t], _mm256_set1_epi32((int)ld32(
                                     ab + r * ast + offsetof(struct a8p, qs) + 4 * t)));
        __m256 dw = a8p_scale(p0, kind, 0);
        __m256 mw = a8_has_m(kind) ? a8p_scale(p0, kind, 1) : _mm256_setzero_ps();
        UNROLL
        for (int r = 0; r < NR; r++) {
            const uint8_t *pr = ab + r * ast;
            __m256i is = S[r];
            if (a8_osh(kind))
                is = _mm256_sub_epi32(is, _mm256_set1_epi32(a8s_soff(pr)));
            __m256 da = _mm256_set1_ps(ldf(pr));
            /* (d_w * d_a) * (float)isum [+ (m_w * d_a) * (float)sum_a] */
            __m256 v = _mm256_mul_ps(_mm256_mul_ps(dw, da), _mm256_cvtepi32_ps(is));
            if (a8_has_m(kind))
                v = _mm256_add_ps(v, _mm256_mul_ps(_mm256_mul_ps(mw, da),
                                                   _mm256_set1_ps(a8s_sumf(pr))));
            part[b & 7][r] = _mm256_add_ps(part[b & 7][r], v);
        }
    }
    fold_store_rows((const __m256 *)part, 3, NR, y, ldy, 8);
}

AI void a8s_run(const void *w, size_t rb, int n0, int n1, int k, const void *pv, int nr,
                float *y, size_t ldy, void *scratch, int kind)
{
    (void)scratch;
    const int nb = k / 32;
    const size_t ast = (size_t)nb * sizeof(struct a8p), end = (size_t)n1 * rb;
    const uint8_t *p = pv;
    ob_pf_task(w, rb, n0, n1);
    if (nr <= 3) {
        for (int n = n0; n < n1; n += 8)
            switch (nr) {
            case 1: a8s_tile8(w, (size_t)n * rb, end, nb, p, ast, y + n, ldy, kind, 1); break;
            case 2: a8s_tile8(w, (size_t)n * rb, end, nb, p, ast, y + n, ldy, kind, 2); break;
            default: a8s_tile8(w, (size_t)n * rb, end, nb, p, ast, y + n, ldy, kind, 3); break;
            }
        return;
    }
    /* tiles of SR rows or as few fewer as balance the row count (12 rows: 6 + 6) */
    int nt = (nr + SR - 1) / SR;
    for (int n = n0; n < n1; n += 16) {
        int nv = n1 - n < 16 ? n1 - n : 16;
        size_t at = (size_t)n * rb;
        for (int i = 0, r = 0; i < nt; i++) {
            int m = nr / nt + (i < nr % nt);
            const uint8_t *a = p + r * ast;
            float *yr = y + (size_t)r * ldy + n;
            switch (m) {
            case 1: a8s_tile(w, at, rb, end, nb, a, ast, yr, ldy, nv, kind, 1); break;
            case 2: a8s_tile(w, at, rb, end, nb, a, ast, yr, ldy, nv, kind, 2); break;
            case 3: a8s_tile(w, at, rb, end, nb, a, ast, yr, ldy, nv, kind, 3); break;
            case 4: a8s_tile(w, at, rb, end, nb, a, ast, yr, ldy, nv, kind, 4); break;
            case 5: a8s_tile(w, at, rb, end, nb, a, ast, yr, ldy, nv, kind, 5); break;
            case 6: a8s_tile(w, at, rb, end, nb, a, ast, yr, ldy, nv, kind, 6); break;
            case 7: a8s_tile(w, at, rb, end, nb, a, ast, yr, ldy, nv, kind, 7); break;
            default: a8s_tile(w, at, rb, end, nb, a, ast, yr, ldy, nv, kind, 8); break;
            }
            r += m;
        }
    }
}

static size_t a8s_scratch_bytes(int k)
{
    (void)k;
    return 0;
}

GEMM_ENTRIES512(a8, q4_0, K_Q4_0)
GEMM_ENTRIES512(a8, q4_1, K_Q4_1)
GEMM_ENTRIES512(a8, q5_0, K_Q5_0)
GEMM_ENTRIES512(a8, q5_1, K_Q5_1)
GEMM_ENTRIES512(a8, q8_0, K_Q8_0)
#define a8p_prep a8_prep
GEMM_ENTRIES512(a8p, p_q4_0, K_Q4_0)
GEMM_ENTRIES512(a8p, p_q4_1, K_Q4_1)
GEMM_ENTRIES512(a8p, p_q5_0, K_Q5_0)
GEMM_ENTRIES512(a8p, p_q8_0, K_Q8_0)
#define a8s_prep a8_prep
GEMM_ENTRIES512(a8s, s_q4_0, K_Q4_0)
GEMM_ENTRIES512(a8s, s_q4_1, K_Q4_1)
GEMM_ENTRIES512(a8s, s_q5_0, K_Q5_0)
GEMM_ENTRIES512(a8s, s_q8_0, K_Q8_0)

/* min_rows: where the GEMM overtakes the dot kernel (bench/kernels, hot weights) */
void ob_kernels_avx512_a8(struct ob_kernel_table *t)
{
    GEMM_SET(t, OB_Q4_0, a8, q4_0, 4, PW);
    GEMM_SET(t, OB_Q4_1, a8, q4_1, 4, PW);
    GEMM_SET(t, OB_Q5_0, a8, q5_0, 4, PW);
    GEMM_SET(t, OB_Q5_1, a8, q5_1, 4, PW);
    GEMM_SET(t, OB_Q8_0, a8, q8_0, 4, PW);
    GEMV_SET(t, OB_Q4_0, a8v, v_q4_0);
    GEMV_SET(t, OB_Q4_1, a8v, v_q4_1);
    GEMV_SET(t, OB_Q5_0, a8v, v_q5_0);
    GEMV_SET(t, OB_Q5_1, a8v, v_q5_1);
    /* Q4_0, Q4_1, Q5_0 and Q8_0 in panels (the AVX2 level asks for them): up to 8 rows
     * stream them (a8s_run; 4 to 8 rows in 0.5-0.9 of the time the GEMM took, 1 to 3 as fast
     * as the AVX2 panel kernels for the nibble formats, 0.8-0.9 of their time for Q8_0), from
     * 9 rows this level's GEMM on 32-row panels decoded from four (8 to 64 rows 0.65-0.95 of
     * the time this GEMM took on rows; bench/kernels --layout rows,panels on an AVX-512 Xeon) */
    t->pgemm[OB_Q4_0] = (struct ob_gemm){9, PW, a8_prep_bytes, prep_p_q4_0, a8_scratch_bytes,
                                         run_p_q4_0};
    t->pgemm[OB_Q4_1] = (struct ob_gemm){9, PW, a8_prep_bytes, prep_p_q4_1, a8_scratch_bytes,
                                         run_p_q4_1};
    t->pgemm[OB_Q5_0] = (struct ob_gemm){9, PW, a8_prep_bytes, prep_p_q5_0, a8_scratch_bytes,
                                         run_p_q5_0};
    t->pgemm[OB_Q8_0] = (struct ob_gemm){9, PW, a8_prep_bytes, prep_p_q8_0, a8_scratch_bytes,
                                         run_p_q8_0};
    t->pgemv[OB_Q4_0] = (struct ob_gemm){1, 16, a8_prep_bytes, prep_s_q4_0, a8s_scratch_bytes,
                                         run_s_q4_0};
    t->pgemv[OB_Q4_1] = (struct ob_gemm){1, 16, a8_prep_bytes, prep_s_q4_1, a8s_scratch_bytes,
                                         run_s_q4_1};
    t->pgemv[OB_Q5_0] = (struct ob_gemm){1, 16, a8_prep_bytes, prep_s_q5_0, a8s_scratch_bytes,
                                         run_s_q5_0};
    t->pgemv[OB_Q8_0] = (struct ob_gemm){1, 16, a8_prep_bytes, prep_s_q8_0, a8s_scratch_bytes,
                                         run_s_q8_0};
}
