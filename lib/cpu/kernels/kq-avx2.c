/*
 * kq-avx2.c — AVX2 dot products of the K-quants (Q2_K, Q3_K, Q4_K, Q5_K, Q6_K) with Q8_K
 * activations. Reference: ob_blk_q2_k .. ob_blk_q6_k and ob_dot_* in dot.h.
 *
 * Why the results are equal:
 *  - a block's isum and msum are integer sums, exact in any order. Weights enter
 *    _mm256_maddubs_epi16 as unsigned bytes: Q2_K q (0..3), Q3_K q + 4 (0..7; the 4 * sum a
 *    comes off with the bsums), Q4_K q (0..15), Q5_K q (0..31), Q6_K q (0..63; the 32 * sum a
 *    comes off with the bsums); activations are in [-127, 127], so a pair sum is at most
 *    2 * 63 * 127 = 16002: no int16 saturation. The GEMM adds the int16 pair sums of several
 *    registers before widening: 8 for Q2_K, Q3_K, Q4_K (at most 8 * 3810 = 30480), 4 for Q5_K
 *    (31496), 2 for Q6_K (32004). Scales and mins multiply in _mm256_madd_epi16 (int32).
 *  - the block epilogue is the reference's, operation by operation:
 *        (d_w * d_a) * (float)isum - (dmin_w * d_a) * (float)msum    (Q2_K, Q4_K, Q5_K)
 *        (d_w * d_a) * (float)isum                                  (Q3_K, Q6_K)
 *    done lane-wise; cvtdq2ps rounds like the C cast. fp16 scales are converted with F16C
 *    (exact; a signalling NaN comes out quiet, and the first multiplication quietens the
 *    reference's too).
 *  - one row (dot): lane j of a register is block b0 + j of 8 consecutive blocks (b0 a multiple
 *    of 8), so lane j adds into partial j = the reference's partial b mod 8; a group of fewer
 *    than 8 blocks blends the untouched lanes back; the fold is ob_fold8's.
 *  - GEMM: lane p of a register is one (weight row, activation row) pair of a 2 x 4 tile; the
 *    8 partials are 8 registers, block b adds into register b mod 8, and they fold lane-wise
 *    in ob_fold8's order.
 */
#include <stddef.h>

#include "cpu/kernels/avx2.h"
#include "cpu/kernels/blockinfo.h"

/* ---- weight blocks: quants as bytes, scales ------------------------------------------------- */

/*
 * The block's 256 quants as unsigned bytes in 8 registers, register g = values 32g .. 32g+31
 * (for Q2_K, Q3_K and Q6_K its low 128 bits are sub-block 2g, its high 128 bits 2g + 1).
 */
AI void kq_unpack(const uint8_t *blk, int T, __m256i *q)
{
    const __m256i m4 = _mm256_set1_epi8(15), m2 = _mm256_set1_epi8(3), one = _mm256_set1_epi8(1);
    switch (T) {
    case T_Q4: {
        const uint8_t *qs = blk + offsetof(struct ob_block_q4_k, qs);
        UNROLL
        for (int c = 0; c < 4; c++) {
            __m256i x = ld(qs + 32 * c);
            q[2 * c] = _mm256_and_si256(x, m4);
            q[2 * c + 1] = _mm256_and_si256(_mm256_srli_epi16(x, 4), m4);
        }
        break;
    }
    case T_Q5: {
        const uint8_t *qs = blk + offsetof(struct ob_block_q5_k, qs);
        __m256i qh = ld(blk + offsetof(struct ob_block_q5_k, qh));
        UNROLL
        for (int c = 0; c < 4; c++) {
            __m256i x = ld(qs + 32 * c);
            __m256i h0 = _mm256_and_si256(_mm256_srli_epi16(qh, 2 * c), one);
            __m256i h1 = _mm256_and_si256(_mm256_srli_epi16(qh, 2 * c + 1), one);
            q[2 * c] = _mm256_or_si256(_mm256_and_si256(x, m4), _mm256_slli_epi16(h0, 4));
            q[2 * c + 1] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(x, 4), m4),
                                           _mm256_slli_epi16(h1, 4));
        }
        break;
    }
    case T_Q6: {
        const uint8_t *ql = blk + offsetof(struct ob_block_q6_k, ql);
        const uint8_t *qh = blk + offsetof(struct ob_block_q6_k, qh);
        UNROLL
        for (int h = 0; h < 2; h++) {
            __m256i l0 = ld(ql + 64 * h), l1 = ld(ql + 64 * h + 32), hb = ld(qh + 32 * h);
            __m256i lo[4] = {_mm256_and_si256(l0, m4), _mm256_and_si256(l1, m4),
                             _mm256_and_si256(_mm256_srli_epi16(l0, 4), m4),
                             _mm256_and_si256(_mm256_srli_epi16(l1, 4), m4)};
            /* bits 2s, 2s+1 of qh move to bits 4, 5 with one 16-bit shift and a mask (the
             * bits a shift carries across a byte boundary fall outside the mask) */
            const __m256i m30 = _mm256_set1_epi8(0x30);
            q[4 * h + 0] = _mm256_or_si256(lo[0], _mm256_and_si256(_mm256_slli_epi16(hb, 4), m30));
            q[4 * h + 1] = _mm256_or_si256(lo[1], _mm256_and_si256(_mm256_slli_epi16(hb, 2), m30));
            q[4 * h + 2] = _mm256_or_si256(lo[2], _mm256_and_si256(hb, m30));
            q[4 * h + 3] = _mm256_or_si256(lo[3], _mm256_and_si256(_mm256_srli_epi16(hb, 2), m30));
        }
        break;
    }
    case T_Q3: {
        const uint8_t *qs = blk + offsetof(struct ob_block_q3_k, qs);
        const __m256i m4b = _mm256_set1_epi8(4);
        __m256i hm = ld(blk + offsetof(struct ob_block_q3_k, hmask));
        UNROLL
        for (int h = 0; h < 2; h++) {
            __m256i x = ld(qs + 32 * h);
            UNROLL
            for (int s = 0; s < 4; s++) {
                int g = 4 * h + s;
                __m256i lo = _mm256_and_si256(_mm256_srli_epi16(x, 2 * s), m2);
                /* bit g of hmask to bit 2 (4 when set: q + 4) */
                __m256i hb = g <= 2 ? _mm256_slli_epi16(hm, 2 - g) : _mm256_srli_epi16(hm, g - 2);
                q[g] = _mm256_or_si256(lo, _mm256_and_si256(hb, m4b));
            }
        }
        break;
    }
    case T_Q2: {
        const uint8_t *qs = blk + offsetof(struct ob_block_q2_k, qs);
        UNROLL
        for (int h = 0; h < 2; h++) {
            __m256i x = ld(qs + 32 * h);
            UNROLL
            for (int s = 0; s < 4; s++)
                q[4 * h + s] = _mm256_and_si256(_mm256_srli_epi16(x, 2 * s), m2);
        }
        break;
    }
    }
}

/*
 * The scales of a block as int16 in natural sub-block order, sc16 (16 values: for Q4_K/Q5_K
 * only the low 8 are used), and the per-16-value "min" mn16 that multiplies the bsums:
 *   Q2_K m_k, Q4_K/Q5_K m_(k/2) (each min covers two bsums), Q3_K 4 sc_k, Q6_K 32 sc_k (as
 *   sc_k here; the shift comes later).
 */
AI void kq_scales(const uint8_t *blk, int T, __m256i *sc16, __m256i *mn16)
{
    switch (T) {
    case T_Q4:
    case T_Q5: {
        __m128i sm = k4_scales(blk + (T == T_Q4 ? offsetof(struct ob_block_q4_k, scales)
                                                : offsetof(struct ob_block_q5_k, scales)));
        *sc16 = _mm256_cvtepu8_epi16(sm);                              /* low 8: sc0..7 */
        *mn16 = _mm256_cvtepu8_epi16(_mm_unpackhi_epi8(sm, sm));       /* m0 m0 m1 m1 .. */
        break;
    }
    case T_Q6:
        *sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(blk + offsetof(struct ob_block_q6_k, scales))));
        *mn16 = *sc16;
        break;
    case T_Q3:
        *sc16 = _mm256_cvtepi8_epi16(k3_scales(blk + offsetof(struct ob_block_q3_k, scales)));
        *mn16 = *sc16;
        break;
    case T_Q2: {
        __m128i s = _mm_loadu_si128((const __m128i *)(blk + offsetof(struct ob_block_q2_k, scales)));
        *sc16 = _mm256_cvtepu8_epi16(_mm_and_si128(s, _mm_set1_epi8(15)));
        *mn16 = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(s, 4), _mm_set1_epi8(15)));
        break;
    }
    }
}

/* ---- one weight row against 1..4 raw activation rows ------------------------------------------ */

/*
 * The madd scale vector of natural register g (16 int16): Q4_K/Q5_K sc_g everywhere; the
 * 16-value formats sc_2g in the low 128 bits, sc_(2g+1) in the high ones. From the bases
 * s0 = sc0..7 in both halves (and, 16-value formats, s1 = sc8..15 in both halves).
 */
AI __m256i kq_scv_g(__m256i s0, __m256i s1, int T, int g)
{
    if (kq_fam8(T))
        return _mm256_shuffle_epi8(s0, _mm256_set1_epi16((short)(0x0100 + 0x0202 * g)));
    int i = g & 3;
    __m256i m = _mm256_setr_m128i(_mm_set1_epi16((short)(0x0100 + 0x0404 * i)),
                                  _mm_set1_epi16((short)(0x0302 + 0x0404 * i)));
    return _mm256_shuffle_epi8(g < 4 ? s0 : s1, m);
}

/* register g of the block (q_g) against the NR activation rows: acc[r] += its scaled sums */
AI void kq_step(__m256i qg, int g, __m256i s0, __m256i s1, const uint8_t *a, size_t as, int T,
                int NR, __m256i *acc)
{
    __m256i scv = kq_scv_g(s0, s1, T, g);
    UNROLL
    for (int r = 0; r < NR; r++) {
        __m256i x = _mm256_madd_epi16(mubs(qg, ld(a + r * as + QB_QS + 32 * g)), scv);
        acc[r] = g == 0 ? x : _mm256_add_epi32(acc[r], x);
    }
}

/*
 * One weight block against NR activation rows: iv[r] holds 8 int32 whose sum is the block's
 * isum, mv[r] 8 whose sum is its msum (Q3_K, Q6_K: the offset is already in iv, mv is 0).
 * Each register of quants is unpacked, scaled and used at once (kq_unpack's order), so that
 * few registers are live.
 */
AI void kq_block(const uint8_t *blk, const uint8_t *a, size_t as, int T, int NR, __m256i *iv,
                 __m256i *mv)
{
    __m256i sc16, mn16, acc[OB_MAXR];
    kq_scales(blk, T, &sc16, &mn16);
    __m256i s0 = _mm256_permute4x64_epi64(sc16, 0x44), s1 = _mm256_permute4x64_epi64(sc16, 0xee);
    const __m256i m4 = _mm256_set1_epi8(15), m2 = _mm256_set1_epi8(3);
    switch (T) {
    case T_Q4: {
        const uint8_t *qs = blk + offsetof(struct ob_block_q4_k, qs);
        UNROLL
        for (int c = 0; c < 4; c++) {
            __m256i x = ld(qs + 32 * c);
            kq_step(_mm256_and_si256(x, m4), 2 * c, s0, s1, a, as, T, NR, acc);
            kq_step(_mm256_and_si256(_mm256_srli_epi16(x, 4), m4), 2 * c + 1, s0, s1, a, as, T,
                    NR, acc);
        }
        break;
    }
    case T_Q5: {
        const uint8_t *qs = blk + offsetof(struct ob_block_q5_k, qs);
        __m256i qh = ld(blk + offsetof(struct ob_block_q5_k, qh));
        const __m256i b4 = _mm256_set1_epi8(16);
        UNROLL
        for (int c = 0; c < 4; c++) {
            __m256i x = ld(qs + 32 * c);
            /* bit j of qh[l] to bit 4 (j = 2c, 2c + 1) */
            __m256i h0 = 2 * c <= 4 ? _mm256_slli_epi16(qh, 4 - 2 * c) : _mm256_srli_epi16(qh, 2 * c - 4);
            __m256i h1 = 2 * c + 1 <= 4 ? _mm256_slli_epi16(qh, 3 - 2 * c) : _mm256_srli_epi16(qh, 2 * c - 3);
            kq_step(_mm256_or_si256(_mm256_and_si256(x, m4), _mm256_and_si256(h0, b4)), 2 * c, s0,
                    s1, a, as, T, NR, acc);
            kq_step(_mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(x, 4), m4),
                                    _mm256_and_si256(h1, b4)), 2 * c + 1, s0, s1, a, as, T, NR, acc);
        }
        break;
    }
    case T_Q6: {
        const uint8_t *ql = blk + offsetof(struct ob_block_q6_k, ql);
        const uint8_t *qh = blk + offsetof(struct ob_block_q6_k, qh);
        const __m256i m30 = _mm256_set1_epi8(0x30);
        UNROLL
        for (int h = 0; h < 2; h++) {
            __m256i l0 = ld(ql + 64 * h), l1 = ld(ql + 64 * h + 32), hb = ld(qh + 32 * h);
            /* bits 2s, 2s+1 of qh to bits 4, 5: one 16-bit shift and a mask */
            kq_step(_mm256_or_si256(_mm256_and_si256(l0, m4),
                                    _mm256_and_si256(_mm256_slli_epi16(hb, 4), m30)),
                    4 * h, s0, s1, a, as, T, NR, acc);
            kq_step(_mm256_or_si256(_mm256_and_si256(l1, m4),
                                    _mm256_and_si256(_mm256_slli_epi16(hb, 2), m30)),
                    4 * h + 1, s0, s1, a, as, T, NR, acc);
            kq_step(_mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4),
                                    _mm256_and_si256(hb, m30)),
                    4 * h + 2, s0, s1, a, as, T, NR, acc);
            kq_step(_mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4),
                                    _mm256_and_si256(_mm256_srli_epi16(hb, 2), m30)),
                    4 * h + 3, s0, s1, a, as, T, NR, acc);
        }
        break;
    }
    case T_Q3: {
        const uint8_t *qs = blk + offsetof(struct ob_block_q3_k, qs);
        const __m256i m4b = _mm256_set1_epi8(4);
        __m256i hm = ld(blk + offsetof(struct ob_block_q3_k, hmask));
        UNROLL
        for (int h = 0; h < 2; h++) {
            __m256i x = ld(qs + 32 * h);
            UNROLL
            for (int s = 0; s < 4; s++) {
                int g = 4 * h + s;
                __m256i lo = _mm256_and_si256(_mm256_srli_epi16(x, 2 * s), m2);
                __m256i hb = g <= 2 ? _mm256_slli_epi16(hm, 2 - g) : _mm256_srli_epi16(hm, g - 2);
                kq_step(_mm256_or_si256(lo, _mm256_and_si256(hb, m4b)), g, s0, s1, a, as, T, NR,
                        acc);
            }
        }
        break;
    }
    case T_Q2: {
        const uint8_t *qs = blk + offsetof(struct ob_block_q2_k, qs);
        UNROLL
        for (int h = 0; h < 2; h++) {
            __m256i x = ld(qs + 32 * h);
            UNROLL
            for (int s = 0; s < 4; s++)
                kq_step(_mm256_and_si256(_mm256_srli_epi16(x, 2 * s), m2), 4 * h + s, s0, s1, a,
                        as, T, NR, acc);
        }
        break;
    }
    }
    UNROLL
    for (int r = 0; r < NR; r++) {
        __m256i ms = _mm256_madd_epi16(ld(a + r * as + QB_BS), mn16);
        if (kq_has_min(T)) {
            iv[r] = acc[r];
            mv[r] = ms;
        } else {
            /* sum (q - o) a = sum q a - o * sum a, per sub-block, times its scale */
            iv[r] = _mm256_sub_epi32(acc[r], _mm256_slli_epi32(ms, kq_corr_shift(T)));
            mv[r] = _mm256_setzero_si256();
        }
    }
}

AI void kq_rows(const void *w, const void *a, size_t as, int k, float *out, int T, int NR)
{
    const int nb = k / 256;
    const size_t bb = kq_bb(T);
    const uint8_t *wb = w, *ab = a;
    __m256 P[OB_MAXR];
    UNROLL
    for (int r = 0; r < NR; r++)
        P[r] = _mm256_setzero_ps();
    for (int b0 = 0; b0 < nb; b0 += 8) {
        int m = nb - b0 < 8 ? nb - b0 : 8;
        const uint8_t *b0p = wb + (size_t)b0 * bb, *a0p = ab + (size_t)b0 * QB;
        __m256i iv[8][OB_MAXR], mv[8][OB_MAXR];
        if (m <= 4) {
            /* a short group (K = 1024 has 4 blocks): isum and msum share one reduction
             * (lanes 0..3 isum, 4..7 msum) and the epilogue is 4 lanes wide */
#pragma GCC unroll 1
            for (int j = 0; j < m; j++)
                kq_block(b0p + j * bb, a0p + j * QB, as, T, NR, iv[j], mv[j]);
#pragma GCC unroll 1
            for (int j = m; j < 4; j++)
                for (int r = 0; r < NR; r++)
                    iv[j][r] = mv[j][r] = _mm256_setzero_si256();
            __m128 dw = f16x4_n(b0p + kq_doff(T), bb, m);
            __m128 dm = kq_has_min(T) ? f16x4_n(b0p + kq_doff(T) + 2, bb, m) : _mm_setzero_ps();
            UNROLL
            for (int r = 0; r < NR; r++) {
                __m128 da = _mm_castsi128_ps(i32x4_n(a0p + r * as, QB, m));
                __m128 v;
                if (kq_has_min(T)) {
                    __m256i h = hsum8(iv[0][r], iv[1][r], iv[2][r], iv[3][r], mv[0][r], mv[1][r],
                                      mv[2][r], mv[3][r]);
                    __m128i is = _mm256_castsi256_si128(h), ms = _mm256_extracti128_si256(h, 1);
                    v = _mm_mul_ps(_mm_mul_ps(dw, da), _mm_cvtepi32_ps(is));
                    v = _mm_sub_ps(v, _mm_mul_ps(_mm_mul_ps(dm, da), _mm_cvtepi32_ps(ms)));
                } else {
                    __m128i is = hsum4(iv[0][r], iv[1][r], iv[2][r], iv[3][r]);
                    v = _mm_mul_ps(_mm_mul_ps(dw, da), _mm_cvtepi32_ps(is));
                }
                P[r] = add_lanes4(P[r], v, m);
            }
            continue;
        }
#pragma GCC unroll 1
        for (int j = 0; j < m; j++)
            kq_block(b0p + j * bb, a0p + j * QB, as, T, NR, iv[j], mv[j]);
#pragma GCC unroll 1
        for (int j = m; j < 8; j++)
            for (int r = 0; r < NR; r++)
                iv[j][r] = mv[j][r] = _mm256_setzero_si256();
        __m256 dw = f16x8_n(b0p + kq_doff(T), bb, m);
        __m256 dm = kq_has_min(T) ? f16x8_n(b0p + kq_doff(T) + 2, bb, m) : _mm256_setzero_ps();
        UNROLL
        for (int r = 0; r < NR; r++) {
            __m256i is = hsum8(iv[0][r], iv[1][r], iv[2][r], iv[3][r], iv[4][r], iv[5][r],
                               iv[6][r], iv[7][r]);
            __m256 da = f32x8_n(a0p + r * as, QB, m);
            __m256 v = _mm256_mul_ps(_mm256_mul_ps(dw, da), _mm256_cvtepi32_ps(is));
            if (kq_has_min(T)) {
                __m256i ms = hsum8(mv[0][r], mv[1][r], mv[2][r], mv[3][r], mv[4][r], mv[5][r],
                                   mv[6][r], mv[7][r]);
                v = _mm256_sub_ps(v, _mm256_mul_ps(_mm256_mul_ps(dm, da), _mm256_cvtepi32_ps(ms)));
            }
            P[r] = add_lanes(P[r], v, m);
        }
    }
    UNROLL
    for (int r = 0; r < NR; r++)
        out[r] = fold8(P[r]);
}

DOT_ROWS(kq, q2_k, T_Q2)
DOT_ROWS(kq, q3_k, T_Q3)
DOT_ROWS(kq, q4_k, T_Q4)
DOT_ROWS(kq, q5_k, T_Q5)
DOT_ROWS(kq, q6_k, T_Q6)

/* ---- many rows: GEMM --------------------------------------------------------------------------- */

/*
 * Within a block the 256 quants are transposed so that every register holds all sub-blocks at
 * fixed positions, and the int16 pair sums of several registers can be added before the scale
 * multiplies them (bounds above):
 *   Q4_K, Q5_K: register t, 32-bit lane j = values 4t..4t+3 of sub-block j (of 32);
 *   Q2_K, Q3_K, Q6_K: register t, int16 position i < 8 = values 2t, 2t+1 of sub-block 2i,
 *     position 8 + i those of sub-block 2i + 1 (of 16).
 * The scale vector carries each sub-block's scale at its positions; _mm256_madd_epi16 then
 * gives 8 int32 whose sum is the block's isum (before the offset of Q3_K / Q6_K). Activations
 * get the same transpose once per call.
 */
struct kqp {                       /* GR activation rows x one block */
    int8_t q[GR][8][32];           /* row r, register t */
    int16_t bs[8][GR][2];          /* i, row r: bsums 2i, 2i + 1 (Q4_K, Q5_K: i < 4, the sums
                                      of bsums 4i, 4i+1 and of 4i+2, 4i+3) */
    float d[GR];
    float pad[4];
};

struct kqw {                       /* GW weight rows x one block */
    uint8_t q[GW][8][32];
    int16_t sc[GW][16];            /* madd scale vector */
    int16_t mn[8][GW * GR][2];     /* i, lane: mn16 2i, 2i + 1 of the lane's weight row (Q4_K,
                                      Q5_K: i < 4, m_2i and m_2i+1) */
    float d[GW * GR], dm[GW * GR]; /* lane: d, dmin of the lane's weight row */
};

static size_t kq_prep_bytes(int k, int nr)
{
    return (size_t)((nr + GR - 1) / GR) * (k / 256) * sizeof(struct kqp);
}

AI void kq_transpose(__m256i *v, int T)
{
    if (kq_fam8(T))
        tr8x8_32(v);
    else
        tr8x8_16(v);
}

AI void kq_prep(const void *x, size_t xs, int nr, int k, void *pv, int T)
{
    const int nb = k / 256, ng = (nr + GR - 1) / GR;
    struct kqp *p = pv;
    for (int g = 0; g < ng; g++)
        for (int b = 0; b < nb; b++, p++)
            UNROLL
            for (int r = 0; r < GR; r++) {
                int row = g * GR + r;
                if (row >= nr) {
                    memset(p->q[r], 0, sizeof p->q[r]);
                    UNROLL
                    for (int i = 0; i < 8; i++)
                        p->bs[i][r][0] = p->bs[i][r][1] = 0;
                    p->d[r] = 0.0f;
                    continue;
                }
                const struct ob_block_q8_k *a = (const struct ob_block_q8_k *)((const char *)x + row * xs) + b;
                __m256i v[8];
                UNROLL
                for (int t = 0; t < 8; t++)
                    v[t] = ld(a->qs + 32 * t);
                kq_transpose(v, T);
                UNROLL
                for (int t = 0; t < 8; t++)
                    st(p->q[r][t], v[t]);
                if (kq_fam8(T)) {           /* one min per 32 values: bsums in pairs */
                    UNROLL
                    for (int i = 0; i < 4; i++) {
                        p->bs[i][r][0] = (int16_t)(a->bsums[4 * i] + a->bsums[4 * i + 1]);
                        p->bs[i][r][1] = (int16_t)(a->bsums[4 * i + 2] + a->bsums[4 * i + 3]);
                    }
                } else {
                    UNROLL
                    for (int i = 0; i < 8; i++) {
                        p->bs[i][r][0] = a->bsums[2 * i];
                        p->bs[i][r][1] = a->bsums[2 * i + 1];
                    }
                }
                p->d[r] = a->d;
                p->pad[r] = 0.0f;
            }
}

/* one weight row (zeros when w is NULL) into slot i of a pair's blocks */
AI void kq_decode(const uint8_t *w, int k, struct kqw *dst, int i, int T)
{
    const int nb = k / 256;
    const size_t bb = kq_bb(T);
    for (int b = 0; b < nb; b++, dst++) {
        int16_t sc[16], mn[16];
        float d = 0.0f, dm = 0.0f;
        if (!w) {
            memset(dst->q[i], 0, sizeof dst->q[i]);
            memset(sc, 0, sizeof sc);
            memset(mn, 0, sizeof mn);
        } else {
            const uint8_t *blk = w + (size_t)b * bb;
            __m256i q[8], sc16, mn16;
            kq_unpack(blk, T, q);
            kq_transpose(q, T);
            UNROLL
            for (int t = 0; t < 8; t++)
                st(dst->q[i][t], q[t]);
            kq_scales(blk, T, &sc16, &mn16);
            int16_t s[16], m16[16];
            st(s, sc16);
            st(m16, mn16);
            if (kq_fam8(T)) {
                UNROLL
                for (int j = 0; j < 8; j++) {            /* lane j: sub-block j */
                    sc[2 * j] = sc[2 * j + 1] = s[j];
                    mn[j] = m16[2 * j];                  /* m_j, against bsums 2j + 2j+1 */
                    mn[8 + j] = 0;
                }
            } else {
                for (int p = 0; p < 8; p++) {            /* position p: 2p, 8 + p: 2p + 1 */
                    sc[p] = s[2 * p];
                    sc[8 + p] = s[2 * p + 1];
                }
                for (int kk = 0; kk < 16; kk++)
                    mn[kk] = kq_has_min(T) ? m16[kk] : (int16_t)(m16[kk] * (1 << kq_corr_shift(T)));
            }
            d = _cvtsh_ss(ld16(blk + kq_doff(T)));
            if (kq_has_min(T))
                dm = _cvtsh_ss(ld16(blk + kq_doff(T) + 2));
        }
        memcpy(dst->sc[i], sc, sizeof sc);
        UNROLL
        for (int l = 0; l < GR; l++) {
            int lane = i * GR + l;
            UNROLL
            for (int j = 0; j < 8; j++) {
                dst->mn[j][lane][0] = mn[2 * j];
                dst->mn[j][lane][1] = mn[2 * j + 1];
            }
            dst->d[lane] = d;
            dst->dm[lane] = dm;
        }
    }
}

AI __m256i bcast128(const void *p)
{
    return _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)p));
}

/*
 * c[w * GR + r] = int16 sum over registers t0 .. t1-1 of the pair sums of weight row w and
 * activation row r. The loop over t stays rolled: the 8 accumulators, the two weight registers
 * and a temporary then fit the 16 registers (a fully unrolled body makes the compiler hoist
 * loads and spill).
 */
AI void kq_acc16(const struct kqw *W, const struct kqp *A, int t0, int t1, __m256i *c)
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

/* A tile: GW weight rows (W) x GR activation rows (A) over nb blocks; out[w * GR + r]. */
AI void kq_tile(const struct kqw *W, const struct kqp *A, int nb, float *out, int T)
{
    const int ph = T == T_Q6 ? 2 : T == T_Q5 ? 4 : 8;  /* registers per int16 sum */
    __m256 P[8];
    UNROLL
    for (int j = 0; j < 8; j++)
        P[j] = _mm256_setzero_ps();
    for (int b = 0; b < nb; b++, W++, A++) {
        __m256i e[GW * GR];
        const __m256i sc0 = ld(W->sc[0]), sc1 = ld(W->sc[1]);
        UNROLL
        for (int t0 = 0; t0 < 8; t0 += ph) {
            __m256i c[GW * GR];
            kq_acc16(W, A, t0, t0 + ph, c);
            UNROLL
            for (int r = 0; r < GR; r++) {
                __m256i x0 = _mm256_madd_epi16(c[r], sc0), x1 = _mm256_madd_epi16(c[GR + r], sc1);
                e[r] = t0 == 0 ? x0 : _mm256_add_epi32(e[r], x0);
                e[GR + r] = t0 == 0 ? x1 : _mm256_add_epi32(e[GR + r], x1);
            }
        }
        __m256i is = hsum8v(e);                          /* lane p = w * GR + r */
        __m256i ms = _mm256_madd_epi16(bcast128(A->bs[0]), ld(W->mn[0]));
        UNROLL
        for (int i = 1; i < 4; i++)
            ms = _mm256_add_epi32(ms, _mm256_madd_epi16(bcast128(A->bs[i]), ld(W->mn[i])));
        if (!kq_fam8(T)) {
            UNROLL
            for (int i = 4; i < 8; i++)
                ms = _mm256_add_epi32(ms, _mm256_madd_epi16(bcast128(A->bs[i]), ld(W->mn[i])));
        }
        __m256 dw = _mm256_loadu_ps(W->d);
        __m256 da = _mm256_castsi256_ps(bcast128(A->d));
        __m256 v;
        if (kq_has_min(T)) {
            v = _mm256_mul_ps(_mm256_mul_ps(dw, da), _mm256_cvtepi32_ps(is));
            __m256 dm = _mm256_loadu_ps(W->dm);
            v = _mm256_sub_ps(v, _mm256_mul_ps(_mm256_mul_ps(dm, da), _mm256_cvtepi32_ps(ms)));
        } else {
            is = _mm256_sub_epi32(is, ms);
            v = _mm256_mul_ps(_mm256_mul_ps(dw, da), _mm256_cvtepi32_ps(is));
        }
        P[b & 7] = _mm256_add_ps(P[b & 7], v);
    }
    _mm256_storeu_ps(out, fold8v(P));
}

#define NPAIR 4                    /* weight pairs decoded at once */

static size_t kq_scratch_bytes(int k)
{
    return (size_t)NPAIR * (k / 256) * sizeof(struct kqw);
}

AI void kq_run(const void *w, size_t rb, int n0, int n1, int k, const void *pv, int nr, float *y,
               size_t ldy, void *scratch, int T)
{
    const int nb = k / 256, ng = (nr + GR - 1) / GR;
    struct kqw *dec = scratch;
    const struct kqp *p = pv;
    for (int n = n0; n < n1; n += GW * NPAIR) {
        int np = 0;
        for (; np < NPAIR && n + GW * np < n1; np++)
            UNROLL
            for (int i = 0; i < GW; i++) {
                int row = n + GW * np + i;
                kq_decode(row < n1 ? (const uint8_t *)w + (size_t)row * rb : NULL, k,
                          dec + np * nb, i, T);
            }
        for (int g = 0; g < ng; g++) {
            int rr = nr - g * GR < GR ? nr - g * GR : GR;
            for (int q = 0; q < np; q++) {
                float out[GW * GR];
                kq_tile(dec + q * nb, p + (size_t)g * nb, nb, out, T);
                tile_store(out, y, ldy, n + GW * q, n1, g * GR, rr);
            }
        }
    }
}

GEMM_ENTRIES(kq, q2_k, T_Q2)
GEMM_ENTRIES(kq, q3_k, T_Q3)
GEMM_ENTRIES(kq, q4_k, T_Q4)
GEMM_ENTRIES(kq, q5_k, T_Q5)
GEMM_ENTRIES(kq, q6_k, T_Q6)

/* min_rows: where the GEMM overtakes the dot kernel (measured on Zen 3; hot weights) */
void ob_kernels_avx2_kq(struct ob_kernel_table *t)
{
    GEMM_SET(t, OB_Q2_K, kq, q2_k, 4, GW * NPAIR);
    GEMM_SET(t, OB_Q3_K, kq, q3_k, 6, GW * NPAIR);
    GEMM_SET(t, OB_Q4_K, kq, q4_k, 4, GW * NPAIR);
    GEMM_SET(t, OB_Q5_K, kq, q5_k, 4, GW * NPAIR);
    GEMM_SET(t, OB_Q6_K, kq, q6_k, 6, GW * NPAIR);
}
