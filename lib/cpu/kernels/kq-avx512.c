/*
 * kq-avx512.c — AVX-512 (VNNI) dot products of the K-quants (Q2_K, Q3_K, Q4_K, Q5_K, Q6_K)
 * with Q8_K activations. Reference: ob_blk_q2_k .. ob_blk_q6_k and ob_dot_* in dot.h.
 *
 * Why the results are equal:
 *  - a block's isum and msum are integer sums, exact in any order. One row (dot): a register
 *    holds 64 consecutive values of the block as unsigned bytes (Q2_K q 0..3, Q3_K q + 4 0..7,
 *    Q4_K 0..15, Q5_K 0..31, Q6_K q 0..63: the offsets 4 and 32 come off with the bsums);
 *    _mm512_maddubs_epi16 makes int16 pair sums (at most 2 * 63 * 127 = 16002: no saturation)
 *    and vpdpwssd multiplies them by their sub-block's scale and adds them into int32.
 *    GEMM: vpdpbusd sums 4 products u8 x s8 straight into int32 (no saturation), one sub-block
 *    at a time, then vpmulld scales the sub-block's sum.
 *  - the block epilogue is the reference's, operation by operation:
 *        (d_w * d_a) * (float)isum - (dmin_w * d_a) * (float)msum    (Q2_K, Q4_K, Q5_K)
 *        (d_w * d_a) * (float)isum                                  (Q3_K, Q6_K)
 *    cvtdq2ps rounds like the C cast; fp16 scales are converted with F16C (exact; a signalling
 *    NaN comes out quiet, and the first multiplication quietens the reference's too).
 *  - one row (dot, and the GEMV's one or two weight rows a call: kq-rows.h): lane j of a
 *    register is block b0 + j of 8 consecutive blocks (b0 a multiple of 8), so it adds into
 *    partial j = the reference's partial b mod 8; a group of fewer than 8 blocks blends the
 *    untouched lanes back; the fold is ob_fold8's.
 *  - GEMM: lane n of a register is weight row n0 + n of a 16-row panel, one register per
 *    activation row; blocks b = c, c + 8, c + 16, ... add into that register in increasing b
 *    (the reference's partial c; the few-row run, block by block, keeps the 8 partials in
 *    memory and adds block b into partial b mod 8, the same sums), and the 8 partials fold
 *    lane-wise in ob_fold8's order.
 */
#include <stddef.h>

#include "cpu/kernels/avx512.h"
#include "cpu/kernels/blockinfo.h"

/* ---- one weight row against 1..4 activation rows ------------------------------------------- */

/*
 * Register g (values 64g .. 64g + 63 of the block, g = 0..3) of a block's quants as unsigned
 * bytes. The layouts (blocks.h): Q4_K / Q5_K value c*64 + s*32 + l is nibble s of qs[c*32 + l]
 * (Q5_K: bit c*2 + s of qh[l] on top); Q2_K / Q3_K value h*128 + s*32 + l is bits 2s, 2s + 1 of
 * qs[h*32 + l] (Q3_K: bit h*4 + s of hmask[l] set adds 4); Q6_K value h*128 + r: nibble r / 64
 * of ql[h*64 + r % 64], bits 2 (r / 32) of qh[h*32 + r % 32] on top.
 */
AI __m512i kq_q(const uint8_t *blk, int T, int g)
{
    const __m512i m4 = _mm512_set1_epi8(15), m2 = _mm512_set1_epi8(3);
    switch (T) {
    case T_Q4:
    case T_Q5: {
        size_t qs = T == T_Q4 ? offsetof(struct ob_block_q4_k, qs) : offsetof(struct ob_block_q5_k, qs);
        __m512i x = bcast256(blk + qs + 32 * g);
        __m512i q = _mm512_and_si512(_mm512_srlv_epi64(x, _mm512_setr_epi64(0, 0, 0, 0, 4, 4, 4, 4)), m4);
        if (T == T_Q5) {
            __m512i h = bcast256(blk + offsetof(struct ob_block_q5_k, qh));
            __m512i bit = _mm512_inserti64x4(_mm512_set1_epi8((char)(1 << (2 * g))),
                                             _mm256_set1_epi8((char)(1 << (2 * g + 1))), 1);
            q = _mm512_mask_add_epi8(q, _mm512_test_epi8_mask(h, bit), q, _mm512_set1_epi8(16));
        }
        return q;
    }
    case T_Q2:
    case T_Q3: {
        size_t qs = T == T_Q2 ? offsetof(struct ob_block_q2_k, qs) : offsetof(struct ob_block_q3_k, qs);
        int h = g >> 1, s = 2 * (g & 1);
        __m512i x = bcast256(blk + qs + 32 * h);
        __m512i q = _mm512_and_si512(_mm512_srlv_epi64(x, _mm512_setr_epi64(2 * s, 2 * s, 2 * s, 2 * s,
                                                                             2 * s + 2, 2 * s + 2,
                                                                             2 * s + 2, 2 * s + 2)), m2);
        if (T == T_Q3) {
            __m512i hm = bcast256(blk + offsetof(struct ob_block_q3_k, hmask));
            __m512i bit = _mm512_inserti64x4(_mm512_set1_epi8((char)(1 << (4 * h + s))),
                                             _mm256_set1_epi8((char)(1 << (4 * h + s + 1))), 1);
            q = _mm512_mask_add_epi8(q, _mm512_test_epi8_mask(hm, bit), q, _mm512_set1_epi8(4));
        }
        return q;
    }
    }
    /* Q6_K */
    int h = g >> 1;
    __m512i l = ld512(blk + offsetof(struct ob_block_q6_k, ql) + 64 * h);
    __m512i qh = bcast256(blk + offsetof(struct ob_block_q6_k, qh) + 32 * h);
    const __m512i m30 = _mm512_set1_epi8(0x30);
    /* bits 2t, 2t + 1 of qh (t = 2 (g & 1) + half) to bits 4, 5: one 64-bit shift (the bits
     * it carries across a byte boundary fall outside the mask) */
    __m512i hi;
    if (g & 1) {
        l = _mm512_srli_epi16(l, 4);
        hi = _mm512_srlv_epi64(qh, _mm512_setr_epi64(0, 0, 0, 0, 2, 2, 2, 2));
    } else {
        hi = _mm512_sllv_epi64(qh, _mm512_setr_epi64(4, 4, 4, 4, 2, 2, 2, 2));
    }
    /* (l & 15) | (hi & 0x30) */
    return _mm512_ternarylogic_epi32(l, _mm512_and_si512(hi, m30), m4, 0xec);
}

/*
 * The block's scales as 16 int16 (sc16: Q4_K / Q5_K sc0..7 in words 0..7, the others sc0..15)
 * and the per-bsum term mn16 (16 int16 against bsums 0..15): Q2_K m_k, Q4_K / Q5_K m_(k/2),
 * Q3_K -4 sc_k, Q6_K -32 sc_k (the offset's share of isum).
 */
AI void kq_scales512(const uint8_t *blk, int T, __m512i *sc16, __m256i *mn16)
{
    switch (T) {
    case T_Q4:
    case T_Q5: {
        __m128i sm = k4_scales(blk + (T == T_Q4 ? offsetof(struct ob_block_q4_k, scales)
                                                : offsetof(struct ob_block_q5_k, scales)));
        *sc16 = _mm512_castsi256_si512(_mm256_cvtepu8_epi16(sm));
        *mn16 = _mm256_cvtepu8_epi16(_mm_unpackhi_epi8(sm, sm));       /* m0 m0 m1 m1 .. */
        break;
    }
    case T_Q6: {
        __m256i s = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(blk + offsetof(struct ob_block_q6_k, scales))));
        *sc16 = _mm512_castsi256_si512(s);
        *mn16 = _mm256_sub_epi16(_mm256_setzero_si256(), _mm256_slli_epi16(s, 5));
        break;
    }
    case T_Q3: {
        __m256i s = _mm256_cvtepi8_epi16(k3_scales(blk + offsetof(struct ob_block_q3_k, scales)));
        *sc16 = _mm512_castsi256_si512(s);
        *mn16 = _mm256_sub_epi16(_mm256_setzero_si256(), _mm256_slli_epi16(s, 2));
        break;
    }
    case T_Q2: {
        __m128i s = _mm_loadu_si128((const __m128i *)(blk + offsetof(struct ob_block_q2_k, scales)));
        *sc16 = _mm512_castsi256_si512(_mm256_cvtepu8_epi16(_mm_and_si128(s, _mm_set1_epi8(15))));
        *mn16 = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(s, 4), _mm_set1_epi8(15)));
        break;
    }
    }
}

/*
 * The vpdpwssd scale vector of register g (the scale of each int16 pair's sub-block) from the
 * scale words broadcast to every 128-bit lane (slo: words 0..7, shi: 8..15): one vpshufb
 * (a full word permutation, vpermw, cost more: bench/kernels --hot, Q4_K +3 %).
 */
AI __m512i kq_scv(__m512i slo, __m512i shi, int T, int g)
{
    if (kq_fam8(T)) {          /* lanes 0, 1: word 2g; lanes 2, 3: word 2g + 1 */
        int b0 = 4 * g, b1 = 4 * g + 2;
        __m512i c = _mm512_inserti64x4(_mm512_set1_epi16((short)(b0 | ((b0 + 1) << 8))),
                                       _mm256_set1_epi16((short)(b1 | ((b1 + 1) << 8))), 1);
        return _mm512_shuffle_epi8(slo, c);
    }
    /* lane i: word 4g + i, from slo (g < 2) or shi */
    int w = 4 * (g & 1);
    __m512i c = _mm512_setr_epi64(0x0001000100010001ll * ((2 * w) | ((2 * w + 1) << 8)),
                                  0x0001000100010001ll * ((2 * w) | ((2 * w + 1) << 8)),
                                  0x0001000100010001ll * ((2 * w + 2) | ((2 * w + 3) << 8)),
                                  0x0001000100010001ll * ((2 * w + 2) | ((2 * w + 3) << 8)),
                                  0x0001000100010001ll * ((2 * w + 4) | ((2 * w + 5) << 8)),
                                  0x0001000100010001ll * ((2 * w + 4) | ((2 * w + 5) << 8)),
                                  0x0001000100010001ll * ((2 * w + 6) | ((2 * w + 7) << 8)),
                                  0x0001000100010001ll * ((2 * w + 6) | ((2 * w + 7) << 8)));
    return _mm512_shuffle_epi8(g < 2 ? slo : shi, c);
}

/*
 * One weight block against NR activation rows: iv[r] holds 8 int32 whose sum is the block's
 * isum (the offset of Q3_K / Q6_K included), mv[r] 8 whose sum is its msum (0 without a min).
 */
AI void kq_block(const uint8_t *blk, const uint8_t *a, size_t as, int T, int NR, __m256i *iv,
                 __m256i *mv)
{
    __m512i sc16, acc[OB_MAXR];
    __m256i mn16;
    kq_scales512(blk, T, &sc16, &mn16);
    /* the scale words in every 128-bit lane (words 0..7, and 8..15), picked per lane below */
    __m512i slo = _mm512_broadcast_i32x4(_mm512_castsi512_si128(sc16));
    __m512i shi = kq_fam8(T) ? slo : _mm512_broadcast_i32x4(_mm512_extracti32x4_epi32(sc16, 1));
    UNROLL
    for (int g = 0; g < 4; g++) {
        __m512i q = kq_q(blk, T, g), scv = kq_scv(slo, shi, T, g);
        UNROLL
        for (int r = 0; r < NR; r++) {
            __m512i p = _mm512_maddubs_epi16(q, ld512(a + r * as + QB_QS + 64 * g));
            acc[r] = g == 0 ? _mm512_madd_epi16(p, scv) : dpwssd(acc[r], p, scv);
        }
    }
    UNROLL
    for (int r = 0; r < NR; r++) {
        __m256i t = _mm256_madd_epi16(ld(a + r * as + QB_BS), mn16);
        if (kq_has_min(T)) {
            iv[r] = fold512_i32(acc[r]);
            mv[r] = t;
        } else {
            iv[r] = _mm256_add_epi32(fold512_i32(acc[r]), t);
            mv[r] = _mm256_setzero_si256();
        }
    }
}

#include "cpu/kernels/kq-rows.h"

DOT_ROWS512(kq, q2_k, T_Q2)
DOT_ROWS512(kq, q3_k, T_Q3)
DOT_ROWS512(kq, q4_k, T_Q4)
DOT_ROWS512(kq, q5_k, T_Q5)
DOT_ROWS512(kq, q6_k, T_Q6)

/* ---- many rows: GEMM ---------------------------------------------------------------------- */

/*
 * Weight rows are decoded in panels of 32, one row per int32 lane of two registers (rows 0..15,
 * 16..31); activation rows stay in the Q8_K layout (a copy made by prep) and enter vpdpbusd as
 * 4 bytes broadcast to every lane. So every result is a lane: no horizontal sums, and the
 * epilogue runs 16 dot products at once. A tile is the panel against up to RT activation rows:
 * 4 RT accumulators (a sub-block's sum and the block's isum per half panel and row) keep enough
 * independent vpdpbusd chains in flight.
 */
#define PW 32                      /* weight rows of a panel */
#define RT 6                       /* activation rows of a tile */

struct kqd {                       /* one block of a 32-row panel */
    uint8_t q[64][2][64];          /* dword d (values 4d .. 4d + 3) of each row: [d][n / 16] lane n % 16 */
    int32_t sc[16][2][16];         /* sub-block j (of 32 values: j < 8, else of 16): scale */
    int32_t mn[8][2][16];          /* int16 pair against bsums 2i, 2i + 1 (mn16 of kq_scales512) */
    float d[2][16], dm[2][16];
};

static size_t kq_prep_bytes(int k, int nr)
{
    return (size_t)nr * (size_t)(k / 256) * QB;
}

AI void kq_prep(const void *x, size_t xs, int nr, int k, void *pv, int T)
{
    size_t rowb = (size_t)(k / 256) * QB;
    for (int r = 0; r < nr; r++)
        memcpy((char *)pv + r * rowb, (const char *)x + r * xs, rowb);
}

static size_t kq_scratch_bytes(int k)
{
    return (size_t)(k / 256) * sizeof(struct kqd);
}

/* rows [0, rows) of a 16-row half panel h (row n at w + n * rb; the rest zeros) into nb blocks */
AI void kq_decode16(const uint8_t *w, size_t rb, int rows, int nb, struct kqd *dst, int h, int T)
{
    const size_t bb = kq_bb(T);
    for (int b = 0; b < nb; b++, dst++) {
        const uint8_t *blk = w + (size_t)b * bb;
        __m512i v[16];
#pragma GCC unroll 1
        for (int g = 0; g < 4; g++) {
            UNROLL
            for (int n = 0; n < 16; n++)
                v[n] = n < rows ? kq_q(blk + n * rb, T, g) : _mm512_setzero_si512();
            tr16x16_32(v);
            UNROLL
            for (int i = 0; i < 16; i++)
                st512(dst->q[16 * g + i][h], v[i]);
        }
        __m512i m[16];
        UNROLL
        for (int n = 0; n < 16; n++) {
            if (n >= rows) {
                v[n] = m[n] = _mm512_setzero_si512();
                dst->d[h][n] = dst->dm[h][n] = 0.0f;
                continue;
            }
            __m512i sc16;
            __m256i mn16;
            kq_scales512(blk + n * rb, T, &sc16, &mn16);
            v[n] = _mm512_cvtepi16_epi32(_mm512_castsi512_si256(sc16));
            m[n] = _mm512_castsi256_si512(mn16);
            dst->d[h][n] = _cvtsh_ss(ld16(blk + n * rb + kq_doff(T)));
            dst->dm[h][n] = kq_has_min(T) ? _cvtsh_ss(ld16(blk + n * rb + kq_doff(T) + 2)) : 0.0f;
        }
        tr16x16_32(v);
        tr16x16_32(m);
        UNROLL
        for (int i = 0; i < 16; i++)
            st512(dst->sc[i][h], v[i]);
        UNROLL
        for (int i = 0; i < 8; i++)
            st512(dst->mn[i][h], m[i]);
    }
}

/*
 * Faster decoders for the two types of the common Q4_K_M files: the rows' packed bytes are
 * transposed first (16 rows x 16 dwords at a time, half the data of the unpacked quants) and
 * unpacked lane-wise, and the scale bytes are decoded lane-wise too, with no transposes of
 * their own. Loads of row n stop at rows: the missing rows of a last panel are zeros.
 */

/* 16 bytes at p + n * stride (n < rows, else zeros) as 4 registers: r[k] lane n = dword k */
AI void tr16x4_ld(const uint8_t *p, size_t stride, int rows, __m512i *r)
{
    __m512i z[4];
    UNROLL
    for (int g = 0; g < 4; g++) {              /* 128-bit lane i of z[g]: row 4i + g */
        __m512i v = _mm512_setzero_si512();
        /* the lane is an immediate: written out, not left to unrolling (clang at -O1 does not) */
#define TR16_INS(i)                                                                        \
        if (4 * (i) + g < rows)                                                            \
            v = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)(p + (4 * (i) + g) * stride)), i)
        TR16_INS(0);
        TR16_INS(1);
        TR16_INS(2);
        TR16_INS(3);
#undef TR16_INS
        z[g] = v;
    }
    __m512i a = _mm512_unpacklo_epi32(z[0], z[1]), b = _mm512_unpackhi_epi32(z[0], z[1]);
    __m512i c = _mm512_unpacklo_epi32(z[2], z[3]), d = _mm512_unpackhi_epi32(z[2], z[3]);
    r[0] = _mm512_unpacklo_epi64(a, c);
    r[1] = _mm512_unpackhi_epi64(a, c);
    r[2] = _mm512_unpacklo_epi64(b, d);
    r[3] = _mm512_unpackhi_epi64(b, d);
}

/* 64 bytes at p + n * stride (n < rows, else zeros), transposed: r[d] lane n = dword d */
AI void tr16x16_ld(const uint8_t *p, size_t stride, int rows, __m512i *r)
{
    UNROLL
    for (int n = 0; n < 16; n++)
        r[n] = n < rows ? ld512(p + n * stride) : _mm512_setzero_si512();
    tr16x16_32(r);
}

/* the packed fp16 pair of every lane (low half, or high half when hi) as floats */
AI __m512 f16_lanes(__m512i h, int hi)
{
    return _mm512_cvtph_ps(_mm512_cvtepi32_epi16(hi ? _mm512_srli_epi32(h, 16) : h));
}

AI void q4k_decode16(const uint8_t *w, size_t rb, int rows, int nb, struct kqd *dst, int h)
{
    const __m512i m4 = _mm512_set1_epi8(15), m6 = _mm512_set1_epi32(63), m2 = _mm512_set1_epi32(3);
    const size_t bb = sizeof(struct ob_block_q4_k);
    for (int b = 0; b < nb; b++, dst++) {
        const uint8_t *blk = w + (size_t)b * bb;
        __m512i H[4], P[16];
        tr16x4_ld(blk, rb, rows, H);                 /* d | dmin << 16, scales 0..3, 4..7, 8..11 */
        UNROLL
        for (int x = 0; x < 2; x++) {                /* packed dwords 16x .. 16x + 15 */
            tr16x16_ld(blk + offsetof(struct ob_block_q4_k, qs) + 64 * x, rb, rows, P);
            UNROLL
            for (int i = 0; i < 16; i++) {
                int dd = 16 * x + i, c = dd / 8, l = dd % 8;      /* qs bytes c*32 + 4l .. */
                st512(dst->q[16 * c + l][h], _mm512_and_si512(P[i], m4));
                st512(dst->q[16 * c + 8 + l][h], _mm512_and_si512(_mm512_srli_epi32(P[i], 4), m4));
            }
        }
        UNROLL
        for (int j = 0; j < 8; j++) {                /* ob_k4_scale_min, lane-wise */
            __m512i sc, m;
            if (j < 4) {
                sc = _mm512_and_si512(_mm512_srli_epi32(H[1], 8 * j), m6);
                m = _mm512_and_si512(_mm512_srli_epi32(H[2], 8 * j), m6);
            } else {
                int s = 8 * (j - 4);
                sc = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(H[3], s), _mm512_set1_epi32(15)),
                                     _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(H[1], s + 6), m2), 4));
                m = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(H[3], s + 4), _mm512_set1_epi32(15)),
                                    _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(H[2], s + 6), m2), 4));
            }
            st512(dst->sc[j][h], sc);
            st512(dst->mn[j][h], _mm512_or_si512(m, _mm512_slli_epi32(m, 16)));   /* (m_j, m_j) */
        }
        _mm512_storeu_ps(dst->d[h], f16_lanes(H[0], 0));
        _mm512_storeu_ps(dst->dm[h], f16_lanes(H[0], 1));
    }
}

AI void q6k_decode16(const uint8_t *w, size_t rb, int rows, int nb, struct kqd *dst, int h)
{
    const __m512i m4 = _mm512_set1_epi8(15), m30 = _mm512_set1_epi8(0x30);
    const size_t bb = sizeof(struct ob_block_q6_k);
    __mmask16 live = (__mmask16)(rows >= 16 ? 0xffffu : rows <= 0 ? 0u : (1u << rows) - 1u);
    const __m512i idx = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11,
                                                             12, 13, 14, 15),
                                           _mm512_set1_epi32((int)rb));
    for (int b = 0; b < nb; b++, dst++) {
        const uint8_t *blk = w + (size_t)b * bb;
        __m512i L[16], S[4];
        __m512i Q[16];                               /* qh, transposed; kept in L1 */
        tr16x16_ld(blk + offsetof(struct ob_block_q6_k, qh), rb, rows, Q);
        uint8_t qt[16][64] __attribute__((aligned(64)));
        UNROLL
        for (int i = 0; i < 16; i++)
            st512(qt[i], Q[i]);
        tr16x4_ld(blk + offsetof(struct ob_block_q6_k, scales), rb, rows, S);
#pragma GCC unroll 1
        for (int hh = 0; hh < 2; hh++) {
            tr16x16_ld(blk + offsetof(struct ob_block_q6_k, ql) + 64 * hh, rb, rows, L);
            UNROLL
            for (int D0 = 0; D0 < 32; D0++) {        /* values 4D .. 4D + 3 (blocks.h) */
                int D = 32 * hh + D0, nib = D0 / 16, p = D0 / 8;
                __m512i lo = L[D0 % 16], hi = ld512(qt[8 * hh + D0 % 8]);
                if (nib)
                    lo = _mm512_srli_epi32(lo, 4);
                hi = p < 2 ? _mm512_slli_epi32(hi, 4 - 2 * p) : p > 2 ? _mm512_srli_epi32(hi, 2 * p - 4) : hi;
                /* (lo & 15) | (hi & 0x30) */
                st512(dst->q[D][h], _mm512_ternarylogic_epi32(lo, _mm512_and_si512(hi, m30), m4, 0xec));
            }
        }
        __m512i sc[16];
        UNROLL
        for (int j = 0; j < 16; j++) {               /* int8 scale j, sign-extended */
            sc[j] = _mm512_srai_epi32(_mm512_slli_epi32(S[j / 4], 24 - 8 * (j % 4)), 24);
            st512(dst->sc[j][h], sc[j]);
        }
        UNROLL
        for (int i = 0; i < 8; i++) {                /* (-32 sc_2i, -32 sc_2i+1) as int16 */
            __m512i a = _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_slli_epi32(sc[2 * i], 5));
            __m512i c = _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_slli_epi32(sc[2 * i + 1], 5));
            st512(dst->mn[i][h], _mm512_or_si512(_mm512_and_si512(a, _mm512_set1_epi32(0xffff)),
                                                 _mm512_slli_epi32(c, 16)));
        }
        /* d: the upper half of the dword at 206 (scales 14, 15, then d) */
        __m512i dw = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), live, idx,
                                                 blk + offsetof(struct ob_block_q6_k, d) - 2, 1);
        _mm512_storeu_ps(dst->d[h], f16_lanes(dw, 1));
        _mm512_storeu_ps(dst->dm[h], _mm512_setzero_ps());
    }
}

AI void kq_decode_half(const uint8_t *w, size_t rb, int rows, int nb, struct kqd *dst, int h, int T)
{
    if (T == T_Q4)
        q4k_decode16(w, rb, rows, nb, dst, h);
    else if (T == T_Q6)
        q6k_decode16(w, rb, rows, nb, dst, h);
    else
        kq_decode16(w, rb, rows, nb, dst, h, T);
}

/* one sub-block j (TPS dwords from dword j * TPS) of block W against RA rows: S0/S1 = its sums */
AI void kq_sub(const struct kqd *W, const uint8_t *ab, size_t ast, int j, int tps, int RA,
               __m512i *S0, __m512i *S1)
{
    UNROLL
    for (int r = 0; r < RA; r++)
        S0[r] = S1[r] = _mm512_setzero_si512();
    UNROLL
    for (int t = 0; t < tps; t++) {
        int d = j * tps + t;
        __m512i w0 = ld512(W->q[d][0]), w1 = ld512(W->q[d][1]);
        UNROLL
        for (int r = 0; r < RA; r++) {
            __m512i x = bcast32(ab + r * ast + QB_QS + 4 * d);
            S0[r] = dpbusd(S0[r], w0, x);
            S1[r] = dpbusd(S1[r], w1, x);
        }
    }
}

/*
 * Block wb of the panel (32 weight rows) against RA activation rows (block ab of each, ast
 * bytes apart): V[r][h] = the block's term of rows 16h .. 16h + 15, the reference's
 *     (d_w * d_a) * (float)isum - (dmin_w * d_a) * (float)msum   (or without the min)
 */
AI void kq_bterm(const struct kqd *wb, const uint8_t *ab, size_t ast, int T, int RA, __m512 V[][2])
{
    const int nsub = kq_fam8(T) ? 8 : 16, tps = 64 / nsub;     /* dwords per sub-block */
    __m512i I0[RT], I1[RT], S0[RT], S1[RT];
    kq_sub(wb, ab, ast, 0, tps, RA, S0, S1);
    {
        __m512i sc0 = ld512(wb->sc[0][0]), sc1 = ld512(wb->sc[0][1]);
        UNROLL
        for (int r = 0; r < RA; r++) {
            I0[r] = _mm512_mullo_epi32(S0[r], sc0);
            I1[r] = _mm512_mullo_epi32(S1[r], sc1);
        }
    }
#pragma GCC unroll 1
    for (int j = 1; j < nsub; j++) {
        kq_sub(wb, ab, ast, j, tps, RA, S0, S1);
        __m512i sc0 = ld512(wb->sc[j][0]), sc1 = ld512(wb->sc[j][1]);
        UNROLL
        for (int r = 0; r < RA; r++) {
            I0[r] = _mm512_add_epi32(I0[r], _mm512_mullo_epi32(S0[r], sc0));
            I1[r] = _mm512_add_epi32(I1[r], _mm512_mullo_epi32(S1[r], sc1));
        }
    }
    /* msum (or the offset's share of isum) from the bsums */
    UNROLL
    for (int r = 0; r < RA; r++)
        S0[r] = S1[r] = _mm512_setzero_si512();
    UNROLL
    for (int i = 0; i < 8; i++) {
        __m512i m0 = ld512(wb->mn[i][0]), m1 = ld512(wb->mn[i][1]);
        UNROLL
        for (int r = 0; r < RA; r++) {
            __m512i x = bcast32(ab + r * ast + QB_BS + 4 * i);
            S0[r] = dpwssd(S0[r], m0, x);
            S1[r] = dpwssd(S1[r], m1, x);
        }
    }
    UNROLL
    for (int h = 0; h < 2; h++) {
        __m512 dw = _mm512_loadu_ps(wb->d[h]), dm = _mm512_loadu_ps(wb->dm[h]);
        UNROLL
        for (int r = 0; r < RA; r++) {
            __m512 da = _mm512_set1_ps(ldf(ab + r * ast));
            __m512i is = h ? I1[r] : I0[r], ms = h ? S1[r] : S0[r];
            __m512 v;
            if (kq_has_min(T)) {
                v = _mm512_mul_ps(_mm512_mul_ps(dw, da), _mm512_cvtepi32_ps(is));
                v = _mm512_sub_ps(v, _mm512_mul_ps(_mm512_mul_ps(dm, da), _mm512_cvtepi32_ps(ms)));
            } else {
                v = _mm512_mul_ps(_mm512_mul_ps(dw, da), _mm512_cvtepi32_ps(_mm512_add_epi32(is, ms)));
            }
            V[r][h] = v;
        }
    }
}

/* the 8 partials part[c][r][h] of RA rows, folded, to y[r * ldy + n] for the first nv rows n */
AI void kq_store(__m512 part[8][RT][2], float *y, size_t ldy, int nv, int RA)
{
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
 * A tile: the panel's 32 weight rows (W, nb decoded blocks) against RA activation rows (a, ast
 * bytes apart); y[r * ldy + n] for the first nv rows n of the panel. Partial c (blocks c,
 * c + 8, ...) is complete before the next one starts, so that it can stay in registers across
 * its blocks.
 */
AI void kq_tile(const struct kqd *W, const uint8_t *a, size_t ast, int nb, float *y, size_t ldy,
                int nv, int T, int RA)
{
    __m512 part[8][RT][2];
#pragma GCC unroll 1
    for (int c = 0; c < 8; c++) {
        UNROLL
        for (int r = 0; r < RA; r++)
            part[c][r][0] = part[c][r][1] = _mm512_setzero_ps();
#pragma GCC unroll 1
        for (int b = c; b < nb; b += 8) {
            __m512 V[RT][2];
            kq_bterm(W + b, a + (size_t)b * QB, ast, T, RA, V);
            UNROLL
            for (int r = 0; r < RA; r++) {
                part[c][r][0] = _mm512_add_ps(part[c][r][0], V[r][0]);
                part[c][r][1] = _mm512_add_ps(part[c][r][1], V[r][1]);
            }
        }
    }
    kq_store(part, y, ldy, nv, RA);
}

/* RA activation rows (a, ast apart) against block b of a decoded panel: its term into part */
AI void kq_tile_block(const struct kqd *wb, const uint8_t *a, size_t ast, int b, int T, int RA,
                      __m512 part[8][RT][2])
{
    __m512 V[RT][2];
    kq_bterm(wb, a + (size_t)b * QB, ast, T, RA, V);
    UNROLL
    for (int r = 0; r < RA; r++) {
        part[b & 7][r][0] = _mm512_add_ps(part[b & 7][r][0], V[r][0]);
        part[b & 7][r][1] = _mm512_add_ps(part[b & 7][r][1], V[r][1]);
    }
}

/*
 * Block 0 of a panel's nv rows (row n at w + n * rb) into dec. Not inlined: the decoders' own
 * constants would stay in registers across the tiles' loop, and its accumulators spilled.
 */
static __attribute__((noinline)) void kq_decode_block(const uint8_t *w, size_t rb, int nv,
                                                      struct kqd *dec, int T)
{
    switch (T) {
#define KQ_DEC(t)                                                                                  \
    case t:                                                                                        \
        kq_decode_half(w, rb, nv < 16 ? nv : 16, 1, dec, 0, t);                                    \
        kq_decode_half(w + 16 * rb, rb, nv - 16, 1, dec, 1, t);                                    \
        break;
    KQ_DEC(T_Q2) KQ_DEC(T_Q3) KQ_DEC(T_Q4) KQ_DEC(T_Q5) KQ_DEC(T_Q6)
#undef KQ_DEC
    }
}

/*
 * Block t of the weight stream the few-row run reads, panel by panel (t counted in blocks from
 * block 0 of the panel at row n; nothing from row n1 on), into the L2 (prefetcht2, as the dot
 * path: an L1 prefetch would push the decoded block out).
 */
#define PF_BLOCKS 2                /* how many blocks ahead (a block of 32 rows: 4.5 .. 6.7 KB) */

AI void kq_pf_block(const uint8_t *w, size_t rb, int n, int n1, int nb, int t, size_t bb)
{
    int pn = n + PW * (t / nb), rows = n1 - pn < PW ? n1 - pn : PW;
    if (rows <= 0)
        return;
    const char *q = (const char *)w + (size_t)pn * rb + (size_t)(t % nb) * bb;
    for (int r = 0; r < rows; r++, q += rb)
        for (const char *l = q - ((uintptr_t)q & 63); l < q + bb; l += 64)
            _mm_prefetch(l, _MM_HINT_T2);
}

/*
 * Few activation rows (nr <= SMALL_R: decode at a batch width): the panel at row n (of a range
 * ending at n1) against two tiles of RA0 and RA1 rows (RA1 may be 0), y[r * ldy + n ..]. There
 * a panel costs more to fetch and decode than its tiles cost to run, so the run goes block by
 * block: block b of the panel's 32 rows is decoded into one kqd (11 KB, in the L1, where the
 * whole decoded panel of a 3072-value row is 130 KB, in the L2), both tiles take it at once
 * and add its terms into their partials (in memory) in kq_tile's order, while the block
 * PF_BLOCKS on is fetched.
 */
#define SMALL_R 8

AI void kq_panel_small(const uint8_t *w, size_t rb, int n, int n1, int nb, const uint8_t *p,
                       size_t ast, float *y, size_t ldy, struct kqd *dec, int T, int RA0, int RA1)
{
    const size_t bb = kq_bb(T);
    const uint8_t *wn = w + (size_t)n * rb;
    const int nv = n1 - n < PW ? n1 - n : PW;
    __m512 part0[8][RT][2], part1[8][RT][2];
    for (int c = 0; c < 8; c++)
        UNROLL
        for (int r = 0; r < RT; r++) {
            if (r < RA0)
                part0[c][r][0] = part0[c][r][1] = _mm512_setzero_ps();
            if (r < RA1)
                part1[c][r][0] = part1[c][r][1] = _mm512_setzero_ps();
        }
#pragma GCC unroll 1
    for (int b = 0; b < nb; b++) {
        kq_pf_block(w, rb, n, n1, nb, b + PF_BLOCKS, bb);
        kq_decode_block(wn + b * bb, rb, nv, dec, T);
        kq_tile_block(dec, p, ast, b, T, RA0, part0);
        if (RA1)
            kq_tile_block(dec, p + RA0 * ast, ast, b, T, RA1, part1);
    }
    kq_store(part0, y + n, ldy, nv, RA0);
    if (RA1)
        kq_store(part1, y + RA0 * ldy + n, ldy, nv, RA1);
}

AI void kq_run_small(const uint8_t *w, size_t rb, int n0, int n1, int k, const uint8_t *p, int nr,
                     float *y, size_t ldy, struct kqd *dec, int T)
{
    const int nb = k / 256;
    const size_t ast = (size_t)nb * QB;
    for (int t = 0; t < PF_BLOCKS; t++)           /* the first blocks: nothing before fetches them */
        kq_pf_block(w, rb, n0, n1, nb, t, kq_bb(T));
    for (int n = n0; n < n1; n += PW) {
        /* tiles of up to 4 rows, balanced (8 rows: 4 + 4, 7: 4 + 3) */
        switch (nr) {
        case 1: kq_panel_small(w, rb, n, n1, nb, p, ast, y, ldy, dec, T, 1, 0); break;
        case 2: kq_panel_small(w, rb, n, n1, nb, p, ast, y, ldy, dec, T, 2, 0); break;
        case 3: kq_panel_small(w, rb, n, n1, nb, p, ast, y, ldy, dec, T, 3, 0); break;
        case 4: kq_panel_small(w, rb, n, n1, nb, p, ast, y, ldy, dec, T, 4, 0); break;
        case 5: kq_panel_small(w, rb, n, n1, nb, p, ast, y, ldy, dec, T, 3, 2); break;
        case 6: kq_panel_small(w, rb, n, n1, nb, p, ast, y, ldy, dec, T, 3, 3); break;
        case 7: kq_panel_small(w, rb, n, n1, nb, p, ast, y, ldy, dec, T, 4, 3); break;
        default: kq_panel_small(w, rb, n, n1, nb, p, ast, y, ldy, dec, T, 4, 4); break;
        }
    }
}

AI void kq_run(const void *w, size_t rb, int n0, int n1, int k, const void *pv, int nr, float *y,
               size_t ldy, void *scratch, int T)
{
    const int nb = k / 256;
    const size_t ast = (size_t)nb * QB;
    struct kqd *dec = scratch;
    const uint8_t *p = pv;
    if (nr <= SMALL_R) {
        kq_run_small(w, rb, n0, n1, k, p, nr, y, ldy, dec, T);
        return;
    }
    for (int n = n0; n < n1; n += PW) {
        int nv = n1 - n < PW ? n1 - n : PW;
        const uint8_t *wn = (const uint8_t *)w + (size_t)n * rb;
        kq_decode_half(wn, rb, nv < 16 ? nv : 16, nb, dec, 0, T);
        kq_decode_half(wn + 16 * rb, rb, nv - 16, nb, dec, 1, T);
        /* tiles of RT rows or as few fewer as balance the row count (8 rows: 4 + 4) */
        int nt = (nr + RT - 1) / RT;
        for (int i = 0, r = 0; i < nt; i++) {
            int m = nr / nt + (i < nr % nt);
            const uint8_t *a = p + r * ast;
            float *yr = y + (size_t)r * ldy + n;
            switch (m) {
            case 1: kq_tile(dec, a, ast, nb, yr, ldy, nv, T, 1); break;
            case 2: kq_tile(dec, a, ast, nb, yr, ldy, nv, T, 2); break;
            case 3: kq_tile(dec, a, ast, nb, yr, ldy, nv, T, 3); break;
            case 4: kq_tile(dec, a, ast, nb, yr, ldy, nv, T, 4); break;
            case 5: kq_tile(dec, a, ast, nb, yr, ldy, nv, T, 5); break;
            default: kq_tile(dec, a, ast, nb, yr, ldy, nv, T, 6); break;
            }
            r += m;
        }
    }
}

GEMM_ENTRIES512(kq, q2_k, T_Q2)
GEMM_ENTRIES512(kq, q3_k, T_Q3)
GEMM_ENTRIES512(kq, q4_k, T_Q4)
GEMM_ENTRIES512(kq, q5_k, T_Q5)
GEMM_ENTRIES512(kq, q6_k, T_Q6)

/* ---- few rows with prepared activations: GEMV (kq-rows.h) -------------------------------- */

GEMM_ENTRIES512(kqv, v_q2_k, T_Q2)
GEMM_ENTRIES512(kqv, v_q3_k, T_Q3)
GEMM_ENTRIES512(kqv, v_q4_k, T_Q4)
GEMM_ENTRIES512(kqv, v_q5_k, T_Q5)
GEMM_ENTRIES512(kqv, v_q6_k, T_Q6)

/*
 * min_rows: where the GEMM overtakes the dot kernel (measured: bench/kernels, Mdot/s at 2
 * threads, 1024 x 2048, 3072 x 1024 and 1024 x 151936, weights from memory, AVX-512 Xeon),
 * measured again with the block-by-block few-row run: Q4_K dot 79-95 against GEMM 80-85 at
 * R = 3, 91-95 against 102-110 at 4 (3072 x 1024: 30 against 40); Q6_K dot 77-82 against GEMM
 * 65-68 at R = 4, 66-74 against 71-83 at 5 and 6 (3072 x 1024: 18-21 against 28-31).
 */
void ob_kernels_avx512_kq(struct ob_kernel_table *t)
{
    GEMM_SET(t, OB_Q2_K, kq, q2_k, 4, PW);
    GEMM_SET(t, OB_Q3_K, kq, q3_k, 4, PW);
    GEMM_SET(t, OB_Q4_K, kq, q4_k, 4, PW);
    GEMM_SET(t, OB_Q5_K, kq, q5_k, 4, PW);
    GEMM_SET(t, OB_Q6_K, kq, q6_k, 5, PW);
    KQV_SET(t);
    /* this level reads Q4_K rows as fast as the AVX2 panel kernels read panels (R = 1: 88-89
     * against 87 % of the streaming read, bench/kernels --layout rows,panels on an AVX-512
     * Xeon), so the copy keeps them rows; Q6_K rows too (R = 1 100-104 against 91-102 %,
     * R = 16 a GEMM 5-10 % faster than the AVX2 panel tiles, though 4 and 8 rows run 20-30 %
     * faster through the AVX2 panel kernel). The AVX2 panel entries stay for a copy made in
     * panels by an AVX2 context. */
    t->panels &= ~((uint64_t)1 << OB_Q4_K | (uint64_t)1 << OB_Q6_K);
}
