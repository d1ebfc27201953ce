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
 *    dwords before widening: 8 for Q4_K (at most 8 * 3810 = 30480), 4 for Q2_K, Q3_K (7112)
 *    and Q5_K (31496), 2 for Q6_K (32004). Scales and mins multiply in _mm256_madd_epi16
 *    (int32); the GEMM's Q3_K / Q6_K offset terms -4 sc and -32 sc are within int16 (-4096 ..
 *    4096).
 *  - the block epilogue is the reference's, operation by operation:
 *        (d_w * d_a) * (float)isum - (dmin_w * d_a) * (float)msum    (Q2_K, Q4_K, Q5_K)
 *        (d_w * d_a) * (float)isum                                  (Q3_K, Q6_K)
 *    done lane-wise; cvtdq2ps rounds like the C cast. fp16 scales are converted with F16C
 *    (exact; a signalling NaN comes out quiet, and the first multiplication quietens the
 *    reference's too).
 *  - one row (dot): lane j of a register is block b0 + j of 8 consecutive blocks (b0 a multiple
 *    of 8), so lane j adds into partial j = the reference's partial b mod 8; a group of fewer
 *    than 8 blocks blends the untouched lanes back; the fold is ob_fold8's.
 *  - GEMM: lane n of a register is weight row n of an 8-row panel, one register per
 *    activation row; block b adds into partial b mod 8 (8 registers per activation row, kept in
 *    memory), and they fold lane-wise in ob_fold8's order.
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

#include "cpu/kernels/kq-rows.h"

DOT_ROWS(kq, q2_k, T_Q2)
DOT_ROWS(kq, q3_k, T_Q3)
DOT_ROWS(kq, q4_k, T_Q4)
DOT_ROWS(kq, q5_k, T_Q5)
DOT_ROWS(kq, q6_k, T_Q6)

/* ---- many rows: GEMM --------------------------------------------------------------------------- */

/*
 * Weight rows are decoded in panels of 8, one row per int32 lane (as at AVX-512, with half the
 * lanes); activation rows stay in the Q8_K layout (a copy made by prep) and enter
 * _mm256_maddubs_epi16 as 4 bytes broadcast to every lane. Every result is a lane: no
 * horizontal sums, and the epilogue runs 8 dot products at once. Within a sub-block the int16
 * pair sums of PH dwords are added before _mm256_madd_epi16 multiplies them by the scale (int16
 * pairs (sc, sc)) into int32: PH = 8 for Q4_K (8 * 3810 = 30480), 4 for Q2_K, Q3_K (a whole
 * 16-value sub-block: 4 * 1778) and Q5_K (4 * 7874 = 31496), 2 for Q6_K (2 * 16002 = 32004).
 * A tile is the panel against up to RT activation rows: RT int16 and RT int32 accumulators,
 * the weight register and a broadcast fit the 16 registers.
 */
#define PW 8                       /* weight rows of a panel */
#define RT 6                       /* activation rows of a tile */

struct kqd {                       /* one block of an 8-row panel */
    uint8_t q[64][32];             /* dword d (values 4d .. 4d + 3) of row n in lane n */
    int32_t sc[16][8];             /* sub-block j (of 32 values: j < 8, else of 16): (sc, sc) */
    int32_t mn[8][8];              /* int16 pair against bsums 2i, 2i + 1 (mn16 of kq_scales;
                                      Q3_K, Q6_K: times -4, -32: the offset's share of isum;
                                      Q4_K, Q5_K: (m_2i, m_2i+1) against prep's pair sums,
                                      i < 4) */
    float d[8], dm[8];
};

static size_t kq_prep_bytes(int k, int nr)
{
    return (size_t)nr * (size_t)(k / 256) * QB;
}

/*
 * The activation rows in the Q8_K layout; for Q4_K / Q5_K (one min per 32 values) the bsums
 * of each block are replaced by the 8 sums of pairs, S_j = bsums[2j] + bsums[2j + 1] (at most
 * 32 * 127: int16), so that four _mm256_madd_epi16 against (m_2i, m_2i+1) give the msum.
 */
AI void kq_prep(const void *x, size_t xs, int nr, int k, void *pv, int T)
{
    const int nb = k / 256;
    size_t rowb = (size_t)nb * QB;
    for (int r = 0; r < nr; r++) {
        memcpy((char *)pv + r * rowb, (const char *)x + r * xs, rowb);
        if (!kq_fam8(T))
            continue;
        struct ob_block_q8_k *a = (struct ob_block_q8_k *)((char *)pv + r * rowb);
        for (int b = 0; b < nb; b++)
            for (int j = 0; j < 8; j++)
                a[b].bsums[j] = (int16_t)(a[b].bsums[2 * j] + a[b].bsums[2 * j + 1]);
    }
}

static size_t kq_scratch_bytes(int k)
{
    return (size_t)(k / 256) * sizeof(struct kqd);
}

/*
 * pshufb pattern taking, in every dword lane, byte b0 of the lane into int16 0 and byte b1
 * into int16 1: zero-extended (hi = 0), or into the high byte with a zero low byte (hi = 1:
 * an arithmetic shift right by 8 then sign-extends it)
 */
AI __m256i pat_pair(int b0, int b1, int hi)
{
    const char z = (char)0x80;
    __m128i p = hi ? _mm_setr_epi8(z, (char)b0, z, (char)b1, z, (char)(4 + b0), z, (char)(4 + b1),
                                   z, (char)(8 + b0), z, (char)(8 + b1), z, (char)(12 + b0), z, (char)(12 + b1))
                   : _mm_setr_epi8((char)b0, z, (char)b1, z, (char)(4 + b0), z, (char)(4 + b1), z,
                                   (char)(8 + b0), z, (char)(8 + b1), z, (char)(12 + b0), z, (char)(12 + b1), z);
    return _mm256_broadcastsi128_si256(p);
}

/*
 * Rows [0, rows) of a panel (row n at w + n * rb; the rest zeros) into nb blocks. Q4_K and
 * Q6_K, the types of the common Q4_K_M files, transpose the rows' packed bytes first (half the
 * data of the unpacked quants) and unpack and decode the scales lane-wise; the others unpack
 * each row (kq_unpack, kq_scales) and transpose the results.
 */
AI void q4k_decode8(const uint8_t *w, size_t rb, int rows, int nb, struct kqd *dst, int P8)
{
    const __m256i m4 = _mm256_set1_epi8(15), m6 = _mm256_set1_epi16(63);
    const __m256i m15 = _mm256_set1_epi16(15), m30 = _mm256_set1_epi16(0x30);
    const size_t bb = sizeof(struct ob_block_q4_k);
    for (int b = 0; b < nb; b++, dst++) {
        /* rows: block b of each row; a panel (P8, matrix.h): the 8 rows' block b, transposed */
        const uint8_t *blk = w + (size_t)b * bb * (P8 ? PW : 1);
        __m256i H[4], P[8];
        if (P8)
            UNROLL
            for (int d = 0; d < 4; d++)
                H[d] = ld(blk + 32 * d);
        else
            tr8x4_ld(blk, rb, rows, H);              /* d | dmin << 16, scales 0..3, 4..7, 8..11 */
#pragma GCC unroll 1
        for (int x = 0; x < 4; x++) {                /* packed dwords 8x .. 8x + 7 */
            if (P8)
                UNROLL
                for (int i = 0; i < 8; i++)
                    P[i] = ld(blk + 32 * (4 + 8 * x + i));
            else
                tr8x8_ld(blk + offsetof(struct ob_block_q4_k, qs) + 32 * x, rb, rows, P);
            UNROLL
            for (int i = 0; i < 8; i++) {            /* qs bytes 32x + 4i ..: values 64x + 4i .. */
                st(dst->q[16 * x + i], _mm256_and_si256(P[i], m4));
                st(dst->q[16 * x + 8 + i], _mm256_and_si256(_mm256_srli_epi16(P[i], 4), m4));
            }
        }
        __m256i mj[8];
        UNROLL
        for (int j = 0; j < 8; j++) {                /* ob_k4_scale_min, lane-wise, as int16
                                                        pairs (sc_j, sc_j) and (m_j, m_j) */
            __m256i sc, m;
            if (j < 4) {
                __m256i pj = pat_pair(j, j, 0);
                sc = _mm256_and_si256(_mm256_shuffle_epi8(H[1], pj), m6);
                m = _mm256_and_si256(_mm256_shuffle_epi8(H[2], pj), m6);
            } else {
                __m256i pj = pat_pair(j - 4, j - 4, 0);
                __m256i a = _mm256_shuffle_epi8(H[3], pj);           /* scales byte j + 4 */
                __m256i b = _mm256_shuffle_epi8(H[1], pj);           /* byte j - 4 */
                __m256i c = _mm256_shuffle_epi8(H[2], pj);           /* byte j */
                sc = _mm256_or_si256(_mm256_and_si256(a, m15), _mm256_and_si256(_mm256_srli_epi16(b, 2), m30));
                m = _mm256_or_si256(_mm256_srli_epi16(a, 4), _mm256_and_si256(_mm256_srli_epi16(c, 2), m30));
            }
            st(dst->sc[j], sc);
            mj[j] = m;
        }
        UNROLL
        for (int i = 0; i < 4; i++)                  /* (m_2i, m_2i+1) */
            st(dst->mn[i], _mm256_blend_epi16(mj[2 * i], mj[2 * i + 1], 0xaa));
        _mm256_storeu_ps(dst->d, f16_lanes8(H[0], 0));
        _mm256_storeu_ps(dst->dm, f16_lanes8(H[0], 1));
    }
}

/*
 * Q6_K lane-wise, from the 8 rows' dwords one row to a lane (transposed rows, or a panel):
 * value dword D0 = 16 nib + 8x + i of a half (values 4 D0 .. 4 D0 + 3) is nibble nib of ql
 * dword 8x + i with bits 2p, 2p + 1 (p = D0 / 8 = 2 nib + x) of qh dword i on top (blocks.h);
 * scale j sign-extended as int16 pairs (sc_j, sc_j); the offset pairs (-32 sc_2i,
 * -32 sc_2i+1) (sc << 8 >> 3) against the bsums. In a panel block (matrix.h) ql dword d is
 * dword d, qh dword e dword Q6P_QH + e, scale dword s dword Q6P_SC + s.
 */
#define Q6P_QH 32
#define Q6P_SC 48

AI __m256i q6k_vals(__m256i l, __m256i q, int nib, int p, __m256i m4, __m256i m30)
{
    __m256i lo = nib ? _mm256_srli_epi16(l, 4) : l;
    __m256i hi = p < 2 ? _mm256_slli_epi16(q, 4 - 2 * p) : p > 2 ? _mm256_srli_epi16(q, 2 * p - 4) : q;
    return _mm256_or_si256(_mm256_and_si256(lo, m4), _mm256_and_si256(hi, m30));
}

AI __m256i q6k_sc(const __m256i *S, int j)
{
    return _mm256_srai_epi16(_mm256_shuffle_epi8(S[j / 4], pat_pair(j % 4, j % 4, 1)), 8);
}

AI __m256i q6k_mn(const __m256i *S, int i)
{
    return _mm256_sub_epi16(_mm256_setzero_si256(),
                            _mm256_srai_epi16(_mm256_shuffle_epi8(S[i / 2], pat_pair(2 * i % 4, 2 * i % 4 + 1, 1)), 3));
}

/* the 8 rows' d of a Q6_K panel block pb (matrix.h) as floats */
AI __m256 q6p_d(const uint8_t *pb)
{
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(pb + ob_p8_d(sizeof(struct ob_block_q6_k)))));
}

AI void q6k_decode8(const uint8_t *w, size_t rb, int rows, int nb, struct kqd *dst, int P8)
{
    const __m256i m4 = _mm256_set1_epi8(15), m30 = _mm256_set1_epi8(0x30);
    const size_t bb = sizeof(struct ob_block_q6_k);
    for (int b = 0; b < nb; b++, dst++) {
        /* rows: block b of each row; a panel (P8, matrix.h): the 8 rows' block b, transposed */
        const uint8_t *blk = w + (size_t)b * bb * (P8 ? PW : 1);
        __m256i L[8], Q[8], S[4];
#pragma GCC unroll 1
        for (int h = 0; h < 2; h++) {                /* values 128h .. 128h + 127 */
            if (P8)
                UNROLL
                for (int i = 0; i < 8; i++)
                    Q[i] = ld(blk + 32 * (Q6P_QH + 8 * h + i));
            else
                tr8x8_ld(blk + offsetof(struct ob_block_q6_k, qh) + 32 * h, rb, rows, Q);
#pragma GCC unroll 1
            for (int x = 0; x < 2; x++) {            /* ql dwords 16h + 8x .. + 7 */
                if (P8)
                    UNROLL
                    for (int i = 0; i < 8; i++)
                        L[i] = ld(blk + 32 * (16 * h + 8 * x + i));
                else
                    tr8x8_ld(blk + offsetof(struct ob_block_q6_k, ql) + 64 * h + 32 * x, rb, rows, L);
                UNROLL
                for (int nib = 0; nib < 2; nib++)
                    UNROLL
                    for (int i = 0; i < 8; i++)
                        st(dst->q[32 * h + 16 * nib + 8 * x + i],
                           q6k_vals(L[i], Q[i], nib, 2 * nib + x, m4, m30));
            }
        }
        if (P8)
            UNROLL
            for (int i = 0; i < 4; i++)
                S[i] = ld(blk + 32 * (Q6P_SC + i));
        else
            tr8x4_ld(blk + offsetof(struct ob_block_q6_k, scales), rb, rows, S);
        UNROLL
        for (int j = 0; j < 16; j++)
            st(dst->sc[j], q6k_sc(S, j));
        UNROLL
        for (int i = 0; i < 8; i++)
            st(dst->mn[i], q6k_mn(S, i));
        __m256 d = _mm256_setzero_ps();
        if (P8)
            d = q6p_d(blk);
        else if (rows > 0)
            d = f16x8_n(blk + offsetof(struct ob_block_q6_k, d), rb, rows);
        _mm256_storeu_ps(dst->d, d);
        _mm256_storeu_ps(dst->dm, _mm256_setzero_ps());
    }
}

AI void kq_decode8_any(const uint8_t *w, size_t rb, int rows, int nb, struct kqd *dst, int T)
{
    const size_t bb = kq_bb(T);
    for (int b = 0; b < nb; b++, dst++) {
        const uint8_t *blk = w + (size_t)b * bb;
        __m256i u[8][8], s0[8], s1[8], mn[8];        /* row n: quants, scale pairs, mins */
#pragma GCC unroll 1
        for (int n = 0; n < 8; n++) {
            if (n >= rows) {
                for (int g = 0; g < 8; g++)
                    u[n][g] = _mm256_setzero_si256();
                s0[n] = s1[n] = mn[n] = _mm256_setzero_si256();
                continue;
            }
            const uint8_t *bn = blk + n * rb;
            __m256i sc16, mn16;
            kq_unpack(bn, T, u[n]);
            kq_scales(bn, T, &sc16, &mn16);
            __m256i lo = _mm256_unpacklo_epi16(sc16, sc16), hi = _mm256_unpackhi_epi16(sc16, sc16);
            s0[n] = _mm256_permute2x128_si256(lo, hi, 0x20);        /* (sc_j, sc_j), j < 8 */
            s1[n] = _mm256_permute2x128_si256(lo, hi, 0x31);        /* j = 8 .. 15 */
            if (!kq_has_min(T))                      /* -4 sc or -32 sc */
                mn16 = _mm256_sub_epi16(_mm256_setzero_si256(), _mm256_slli_epi16(mn16, kq_corr_shift(T)));
            if (kq_fam8(T))                          /* m0 m0 m1 m1 .. -> m0 m1 .. m7 */
                mn16 = _mm256_permute4x64_epi64(_mm256_shuffle_epi8(mn16, _mm256_setr_epi8(
                           0, 1, 4, 5, 8, 9, 12, 13, -1, -1, -1, -1, -1, -1, -1, -1,
                           0, 1, 4, 5, 8, 9, 12, 13, -1, -1, -1, -1, -1, -1, -1, -1)), 0x08);
            mn[n] = mn16;
        }
#pragma GCC unroll 1
        for (int g = 0; g < 8; g++) {                /* values 32g .. 32g + 31 */
            __m256i v[8];
            UNROLL
            for (int n = 0; n < 8; n++)
                v[n] = u[n][g];
            tr8x8_32(v);
            UNROLL
            for (int i = 0; i < 8; i++)
                st(dst->q[8 * g + i], v[i]);
        }
        tr8x8_32(s0);
        tr8x8_32(s1);
        tr8x8_32(mn);
        UNROLL
        for (int j = 0; j < 8; j++) {
            st(dst->sc[j], s0[j]);
            st(dst->sc[8 + j], s1[j]);
            st(dst->mn[j], mn[j]);
        }
        __m256 d = _mm256_setzero_ps(), dm = _mm256_setzero_ps();
        if (rows > 0) {
            d = f16x8_n(blk + kq_doff(T), rb, rows < 8 ? rows : 8);
            if (kq_has_min(T))
                dm = f16x8_n(blk + kq_doff(T) + 2, rb, rows < 8 ? rows : 8);
        }
        _mm256_storeu_ps(dst->d, d);
        _mm256_storeu_ps(dst->dm, dm);
    }
}

/* rows [0, rows) of a panel into nb blocks (kq_decode8_any), or (P8: Q4_K, Q6_K) a panel of
 * matrix.h's layout */
AI void kq_decode8(const uint8_t *w, size_t rb, int rows, int nb, struct kqd *dst, int T, int P8)
{
    if (T == T_Q4)
        q4k_decode8(w, rb, rows, nb, dst, P8);
    else if (T == T_Q6)
        q6k_decode8(w, rb, rows, nb, dst, P8);
    else
        kq_decode8_any(w, rb, rows, nb, dst, T);
}

AI __m256i bcast32(const uint8_t *p)
{
    return _mm256_set1_epi32((int)ld32(p));
}

/* M[r] = the sum of the int16 pairs mn[i] (i < nmn) times the activation's bsum pairs */
AI void kq_mins(const struct kqd *wb, const uint8_t *ab, size_t ast, int nmn, int RA, __m256i *M)
{
    UNROLL
    for (int i = 0; i < nmn; i++) {
        __m256i mv = ld(wb->mn[i]);
        UNROLL
        for (int r = 0; r < RA; r++) {
            __m256i x = _mm256_madd_epi16(mv, bcast32(ab + r * ast + QB_BS + 4 * i));
            M[r] = i == 0 ? x : _mm256_add_epi32(M[r], x);
        }
    }
}

/*
 * A tile: the panel's 8 weight rows (W, nb blocks) against RA activation rows (a, ast bytes
 * apart); y[r * ldy + n] for the first nv rows n of the panel. Block b adds into partial b mod 8
 * (part[b & 7], in memory), which fold lane-wise in ob_fold8's order.
 */
AI void kq_tile(const struct kqd *W, const uint8_t *a, size_t ast, int nb, float *y, size_t ldy,
                int nv, const char *pf, size_t pfn, int T, int RA)
{
    const int nsub = kq_fam8(T) ? 8 : 16, tps = 64 / nsub;     /* dwords per sub-block */
    const int ph = T == T_Q6 ? 2 : T == T_Q5 ? 4 : tps;       /* dwords per int16 sum */
    const int nmn = kq_fam8(T) ? 4 : 8;                         /* mins pairs */
    __m256 part[8][RT];
    clear_parts((__m256 *)part, RT, RA);
#pragma GCC unroll 1
    for (int b = 0; b < nb; b++) {
        const struct kqd *wb = W + b;
        const uint8_t *ab = a + (size_t)b * QB;
        prefetch_span(pf + pfn * b / nb, pf + pfn * (b + 1) / nb);
        /* I: isum; Q3_K, Q6_K: starting from the offset's share, taken from the bsums first */
        __m256i I[RT];
        if (kq_has_min(T))
            UNROLL
            for (int r = 0; r < RA; r++)
                I[r] = _mm256_setzero_si256();
        else
            kq_mins(wb, ab, ast, nmn, RA, I);
#pragma GCC unroll 1
        for (int j = 0; j < nsub; j++) {
            const __m256i scv = ld(wb->sc[j]);
            UNROLL
            for (int h = 0; h < tps; h += ph) {
                __m256i C[RT];
                UNROLL
                for (int t = 0; t < ph; t++) {
                    int d = j * tps + h + t;
                    __m256i wv = ld(wb->q[d]);
                    UNROLL
                    for (int r = 0; r < RA; r++) {
                        if (t == 0)
                            C[r] = mubs(wv, bcast32(ab + r * ast + QB_QS + 4 * d));
                        else
                            mubs_add_b32(&C[r], wv, ab + r * ast + QB_QS + 4 * d);
                    }
                }
                UNROLL
                for (int r = 0; r < RA; r++)
                    I[r] = _mm256_add_epi32(I[r], _mm256_madd_epi16(C[r], scv));
            }
        }
        /* msum from the bsums */
        __m256i M[RT];
        if (kq_has_min(T))
            kq_mins(wb, ab, ast, nmn, RA, M);
        __m256 dw = _mm256_loadu_ps(wb->d), dm = _mm256_loadu_ps(wb->dm);
        UNROLL
        for (int r = 0; r < RA; r++) {
            __m256 da = _mm256_set1_ps(ldf(ab + r * ast));
            __m256 v;
            if (kq_has_min(T)) {
                v = _mm256_mul_ps(_mm256_mul_ps(dw, da), _mm256_cvtepi32_ps(I[r]));
                v = _mm256_sub_ps(v, _mm256_mul_ps(_mm256_mul_ps(dm, da), _mm256_cvtepi32_ps(M[r])));
            } else {
                v = _mm256_mul_ps(_mm256_mul_ps(dw, da), _mm256_cvtepi32_ps(I[r]));
            }
            part[b & 7][r] = _mm256_add_ps(part[b & 7][r], v);
        }
    }
    fold_store_rows((const __m256 *)part, RT, RA, y, ldy, nv);
}

AI void kq_run_l(const void *w, size_t rb, int n0, int n1, int k, const void *pv, int nr, float *y,
                 size_t ldy, void *scratch, int T, int P8)
{
    const int nb = k / 256;
    const size_t ast = (size_t)nb * QB;
    struct kqd *dec = scratch;
    const uint8_t *p = pv;
    for (int n = n0; n < n1; n += PW) {
        int nv = n1 - n < PW ? n1 - n : PW;
        /* the next panel's rows, fetched while this one computes */
        int pn = n1 - n - PW < PW ? n1 - n - PW : PW;
        const char *pf = (const char *)w + (size_t)(n + PW) * rb;
        size_t pfn = pn > 0 ? (size_t)pn * rb : 0;
        kq_decode8((const uint8_t *)w + (size_t)n * rb, rb, nv, nb, dec, T, P8);
        /* tiles of RT rows or as few fewer as balance the row count (8 rows: 4 + 4) */
        int nt = (nr + RT - 1) / RT;
        for (int i = 0, r = 0; i < nt; i++) {
            int m = nr / nt + (i < nr % nt);
            const uint8_t *a = p + r * ast;
            float *yr = y + (size_t)r * ldy + n;
            /* tile i fetches part i of the next panel */
            const char *tpf = pf + pfn * i / nt;
            size_t tpfn = pfn * (i + 1) / nt - pfn * i / nt;
            switch (m) {
            case 1: kq_tile(dec, a, ast, nb, yr, ldy, nv, tpf, tpfn, T, 1); break;
            case 2: kq_tile(dec, a, ast, nb, yr, ldy, nv, tpf, tpfn, T, 2); break;
            case 3: kq_tile(dec, a, ast, nb, yr, ldy, nv, tpf, tpfn, T, 3); break;
            case 4: kq_tile(dec, a, ast, nb, yr, ldy, nv, tpf, tpfn, T, 4); break;
            case 5: kq_tile(dec, a, ast, nb, yr, ldy, nv, tpf, tpfn, T, 5); break;
            default: kq_tile(dec, a, ast, nb, yr, ldy, nv, tpf, tpfn, T, 6); break;
            }
            r += m;
        }
    }
}

AI void kq_run(const void *w, size_t rb, int n0, int n1, int k, const void *pv, int nr, float *y,
               size_t ldy, void *scratch, int T)
{
    kq_run_l(w, rb, n0, n1, k, pv, nr, y, ldy, scratch, T, 0);
}

GEMM_ENTRIES(kq, q2_k, T_Q2)
GEMM_ENTRIES(kq, q3_k, T_Q3)
GEMM_ENTRIES(kq, q4_k, T_Q4)
GEMM_ENTRIES(kq, q5_k, T_Q5)
GEMM_ENTRIES(kq, q6_k, T_Q6)

/* ---- Q4_K in panels (matrix.h OB_LAYOUT_P8) ---------------------------------------------------- */

/*
 * NR (1 to 4) activation rows (ast bytes apart) against a panel of 8 Q4_K rows read as they
 * lie: the tile's arithmetic (lane n is row n; int16 pair sums of 8 dwords of a sub-block,
 * then times (sc, sc) into int32; the mins against prep's pair sums; block b into partial
 * b mod 8, folded lane-wise), with the quants unpacked and the scales decoded in registers
 * where the tile reads them decoded from scratch. The panels are one stream, prefetched
 * ob_pf_panel(NR) bytes ahead (the task's first bytes were, by ob_pf_task), never past end.
 */
AI void q4k_panel_rows(const uint8_t *w, size_t at, size_t end, int nb, const uint8_t *a,
                       size_t ast, float *y, size_t ldy, int NR)
{
    const __m256i m4 = _mm256_set1_epi8(15), m6 = _mm256_set1_epi16(63);
    const __m256i m15 = _mm256_set1_epi16(15), m30 = _mm256_set1_epi16(0x30);
    const size_t pb = PW * sizeof(struct ob_block_q4_k);
    __m256 part[8][4];
    clear_parts((__m256 *)part, 4, NR);
#pragma GCC unroll 1
    for (int b = 0; b < nb; b++) {
        const uint8_t *wb = w + at + (size_t)b * pb, *ab = a + (size_t)b * QB;
        ob_pf_span(w, at + (size_t)b * pb + ob_pf_panel(NR), pb, end);
        const __m256i H1 = ld(wb + 32), H2 = ld(wb + 64), H3 = ld(wb + 96);
        __m256i I[4];
        UNROLL
        for (int x = 0; x < 4; x++) {                /* sub-blocks 2x (low nibbles), 2x + 1 */
            __m256i C0[4], C1[4];
            UNROLL
            for (int i = 0; i < 8; i++) {
                __m256i q = ld(wb + 32 * (4 + 8 * x + i));
                __m256i lo = _mm256_and_si256(q, m4), hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
                UNROLL
                for (int r = 0; r < NR; r++) {
                    const uint8_t *s = ab + r * ast + QB_QS + 64 * x + 4 * i;
                    if (i == 0) {
                        C0[r] = mubs(lo, bcast32(s));
                        C1[r] = mubs(hi, bcast32(s + 32));
                    } else {
                        mubs_add_b32(&C0[r], lo, s);
                        mubs_add_b32(&C1[r], hi, s + 32);
                    }
                }
            }
            __m256i sc[2];
            UNROLL
            for (int h = 0; h < 2; h++) {            /* ob_k4_scale_min's sc, lane-wise (sc, sc) */
                int j = 2 * x + h;
                if (j < 4) {
                    sc[h] = _mm256_and_si256(_mm256_shuffle_epi8(H1, pat_pair(j, j, 0)), m6);
                } else {
                    __m256i pj = pat_pair(j - 4, j - 4, 0);
                    sc[h] = _mm256_or_si256(_mm256_and_si256(_mm256_shuffle_epi8(H3, pj), m15),
                                            _mm256_and_si256(_mm256_srli_epi16(_mm256_shuffle_epi8(H1, pj), 2), m30));
                }
            }
            UNROLL
            for (int r = 0; r < NR; r++) {
                __m256i v = _mm256_add_epi32(_mm256_madd_epi16(C0[r], sc[0]),
                                             _mm256_madd_epi16(C1[r], sc[1]));
                I[r] = x == 0 ? v : _mm256_add_epi32(I[r], v);
            }
        }
        /* msum: (m_2i, m_2i+1) against the pair sums S_2i, S_2i+1 */
        __m256i M[4];
        UNROLL
        for (int i = 0; i < 4; i++) {
            __m256i m;
            if (i < 2) {
                m = _mm256_and_si256(_mm256_shuffle_epi8(H2, pat_pair(2 * i, 2 * i + 1, 0)), m6);
            } else {
                __m256i pj = pat_pair(2 * i - 4, 2 * i - 3, 0);
                m = _mm256_or_si256(_mm256_srli_epi16(_mm256_shuffle_epi8(H3, pj), 4),
                                    _mm256_and_si256(_mm256_srli_epi16(_mm256_shuffle_epi8(H2, pj), 2), m30));
            }
            UNROLL
            for (int r = 0; r < NR; r++) {
                __m256i v = _mm256_madd_epi16(m, bcast32(ab + r * ast + QB_BS + 4 * i));
                M[r] = i == 0 ? v : _mm256_add_epi32(M[r], v);
            }
        }
        const __m256i H0 = ld(wb);
        const __m256 dw = f16_lanes8(H0, 0), dm = f16_lanes8(H0, 1);
        UNROLL
        for (int r = 0; r < NR; r++) {
            __m256 da = _mm256_set1_ps(ldf(ab + r * ast));
            __m256 v = _mm256_mul_ps(_mm256_mul_ps(dw, da), _mm256_cvtepi32_ps(I[r]));
            v = _mm256_sub_ps(v, _mm256_mul_ps(_mm256_mul_ps(dm, da), _mm256_cvtepi32_ps(M[r])));
            part[b & 7][r] = _mm256_add_ps(part[b & 7][r], v);
        }
    }
    fold_store_rows((const __m256 *)part, 4, NR, y, ldy, PW);
}

/* ---- Q6_K in panels ------------------------------------------------------------------------ */

/*
 * NR (1 to 4) activation rows against a panel of 8 Q6_K rows read as they lie, as
 * q4k_panel_rows does Q4_K: the tile's arithmetic (isum from the offset's share against the
 * bsums, then per sub-block the int16 pair sums of 2 dwords times (sc, sc) into int32), the
 * quants and scales decoded in registers (q6k_vals, q6k_sc, q6k_mn), the block prefetched
 * ob_pf_panel(NR) ahead. A version that decoded a block's scale pairs into an array first and
 * stepped one qh pair at a time took 1.1-1.2 times as long at 1 and 4 rows (bench/kernels, an
 * AVX-512 Xeon at avx2), prefetching an eighth of a block a step no less.
 */
AI void q6k_panel_rows(const uint8_t *w, size_t at, size_t end, int nb, const uint8_t *a,
                       size_t ast, float *y, size_t ldy, int NR)
{
    const __m256i m4 = _mm256_set1_epi8(15), m30 = _mm256_set1_epi8(0x30);
    const size_t pb = PW * sizeof(struct ob_block_q6_k);
    __m256 part[8][4];
    clear_parts((__m256 *)part, 4, NR);
#pragma GCC unroll 1
    for (int b = 0; b < nb; b++) {
        const uint8_t *wb = w + at + (size_t)b * pb, *ab = a + (size_t)b * QB;
        __m256i S[4], I[4];
        UNROLL
        for (int i = 0; i < 4; i++)
            S[i] = ld(wb + 32 * (Q6P_SC + i));
        UNROLL
        for (int i = 0; i < 8; i++) {                /* the offset's share: -32 sc against bsums */
            __m256i mn = q6k_mn(S, i);
            UNROLL
            for (int r = 0; r < NR; r++) {
                __m256i v = _mm256_madd_epi16(mn, bcast32(ab + r * ast + QB_BS + 4 * i));
                I[r] = i == 0 ? v : _mm256_add_epi32(I[r], v);
            }
        }
        ob_pf_span(w, at + (size_t)b * pb + ob_pf_panel(NR), pb, end);
#pragma GCC unroll 1
        for (int h = 0; h < 2; h++)                  /* values 128h .. 128h + 127 */
            UNROLL
            for (int nib = 0; nib < 2; nib++)
                UNROLL
                for (int x = 0; x < 2; x++)
                    UNROLL
                    for (int g = 0; g < 2; g++) {    /* sub-block j: value dwords D0 .. D0 + 3 */
                        const int D0 = 16 * nib + 8 * x + 4 * g, j = 8 * h + D0 / 4;
                        const __m256i sc = q6k_sc(S, j);
                        UNROLL
                        for (int t = 0; t < 4; t += 2) {
                            const int i = 4 * g + t;
                            __m256i v0 = q6k_vals(ld(wb + 32 * (16 * h + 8 * x + i)),
                                                  ld(wb + 32 * (Q6P_QH + 8 * h + i)), nib,
                                                  2 * nib + x, m4, m30);
                            __m256i v1 = q6k_vals(ld(wb + 32 * (16 * h + 8 * x + i + 1)),
                                                  ld(wb + 32 * (Q6P_QH + 8 * h + i + 1)), nib,
                                                  2 * nib + x, m4, m30);
                            UNROLL
                            for (int r = 0; r < NR; r++) {
                                const uint8_t *s = ab + r * ast + QB_QS + 4 * (32 * h + D0 + t);
                                __m256i C = mubs(v0, bcast32(s));
                                mubs_add_b32(&C, v1, s + 4);
                                I[r] = _mm256_add_epi32(I[r], _mm256_madd_epi16(C, sc));
                            }
                        }
                    }
        const __m256 dw = q6p_d(wb);
        UNROLL
        for (int r = 0; r < NR; r++) {
            __m256 da = _mm256_set1_ps(ldf(ab + r * ast));
            part[b & 7][r] = _mm256_add_ps(part[b & 7][r],
                                           _mm256_mul_ps(_mm256_mul_ps(dw, da), _mm256_cvtepi32_ps(I[r])));
        }
    }
    fold_store_rows((const __m256 *)part, 4, NR, y, ldy, PW);
}

/*
 * The panel entries (Q4_K, Q6_K): a few activation rows stream the panels (the type's
 * panel-rows kernel), 4 rows a pass over each panel (its later passes read it from the L1);
 * more run the tiles on panels decoded without the transposes. Against those tiles
 * (bench/kernels, an AVX-512 Xeon at avx2): Q4_K over the six Qwen3-0.6B shapes together, 4
 * rows 13 % (1 thread) and 23 % (2 threads) faster, 8 rows 4-8 % faster at 2 threads and
 * 3-6 % slower at 1, so Q4_K streams up to 8 rows; Q6_K (1024 x 151936, 3072 x 1024) 2 to 4
 * rows in 0.6-0.85 of the tiles' time, but 8 rows (with 1024 x 2048) in 1.0-1.25 of it (two
 * passes of its costlier decode), so it streams up to 4.
 */
AI void panel_pass(const void *w, size_t at, size_t end, int nb, const uint8_t *a, size_t ast,
                   float *y, size_t ldy, int T, int NR)
{
    if (T == T_Q4)
        q4k_panel_rows(w, at, end, nb, a, ast, y, ldy, NR);
    else
        q6k_panel_rows(w, at, end, nb, a, ast, y, ldy, NR);
}

AI void kqp_run(const void *w, size_t rb, int n0, int n1, int k, const void *pv, int nr,
                float *y, size_t ldy, void *scratch, int T)
{
    if (nr > (T == T_Q6 ? 4 : 8)) {
        kq_run_l(w, rb, n0, n1, k, pv, nr, y, ldy, scratch, T, 1);
        return;
    }
    const size_t ast = (size_t)(k / 256) * QB, end = (size_t)n1 * rb;
    ob_pf_task(w, rb, n0, n1);
    for (int n = n0; n < n1; n += PW)
        for (int r = 0; r < nr; r += 4) {
            const uint8_t *a = (const uint8_t *)pv + r * ast;
            float *yr = y + (size_t)r * ldy + n;
            size_t at = (size_t)n * rb;
            switch (nr - r) {
            case 1: panel_pass(w, at, end, k / 256, a, ast, yr, ldy, T, 1); break;
            case 2: panel_pass(w, at, end, k / 256, a, ast, yr, ldy, T, 2); break;
            case 3: panel_pass(w, at, end, k / 256, a, ast, yr, ldy, T, 3); break;
            default: panel_pass(w, at, end, k / 256, a, ast, yr, ldy, T, 4); break;
            }
        }
}

#define kqp_prep kq_prep
GEMM_ENTRIES(kqp, p_q4_k, T_Q4)
GEMM_ENTRIES(kqp, p_q6_k, T_Q6)

/* ---- few rows with prepared activations: GEMV (kq-rows.h) ----------------------------------- */

GEMM_ENTRIES(kqv, v_q2_k, T_Q2)
GEMM_ENTRIES(kqv, v_q3_k, T_Q3)
GEMM_ENTRIES(kqv, v_q4_k, T_Q4)
GEMM_ENTRIES(kqv, v_q5_k, T_Q5)
GEMM_ENTRIES(kqv, v_q6_k, T_Q6)

/* min_rows: where the GEMM overtakes the dot kernel, weights from memory (bench/kernels on an
 * AVX-512 Xeon held at avx2; hot weights favour the GEMM from 2 or 3 rows) */
void ob_kernels_avx2_kq(struct ob_kernel_table *t)
{
    GEMM_SET(t, OB_Q2_K, kq, q2_k, 4, PW);
    GEMM_SET(t, OB_Q3_K, kq, q3_k, 4, PW);
    GEMM_SET(t, OB_Q4_K, kq, q4_k, 4, PW);
    GEMM_SET(t, OB_Q5_K, kq, q5_k, 4, PW);
    GEMM_SET(t, OB_Q6_K, kq, q6_k, 5, PW);
    KQV_SET(t);
    /* Q4_K in panels: R = 1 streams 7-12 % faster than the row layout's GEMV (bench/kernels
     * --layout rows,panels), and from 9 rows on the tiles run without the transposes */
    PANEL_SET(t, OB_Q4_K, kq, p_q4_k, PW);
    PANEL_SET(t, OB_Q6_K, kq, p_q6_k, PW);
}
