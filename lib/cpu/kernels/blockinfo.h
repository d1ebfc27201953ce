/*
 * blockinfo.h — what the x86 kernel families (a8-*.c, kq-*.c, at every SIMD level) need to know
 * about the weight blocks: sizes, where the fp16 scales sit, offsets, and the packed K-quant
 * scale decoders (ob_k4_scale_min and ob_q3k_scale with 32-bit masks and shifts). Include it
 * after avx2.h or avx512.h.
 */
#ifndef OB_KERNELS_BLOCKINFO_H
#define OB_KERNELS_BLOCKINFO_H

#include <stddef.h>

/* ---- K-quants (Q8_K activations) ---------------------------------------------------------- */

enum { T_Q2, T_Q3, T_Q4, T_Q5, T_Q6 };

#define QB ((size_t)sizeof(struct ob_block_q8_k))      /* 292 */
#define QB_QS offsetof(struct ob_block_q8_k, qs)
#define QB_BS offsetof(struct ob_block_q8_k, bsums)

AI size_t kq_bb(int T)
{
    switch (T) {
    case T_Q2: return sizeof(struct ob_block_q2_k);
    case T_Q3: return sizeof(struct ob_block_q3_k);
    case T_Q4: return sizeof(struct ob_block_q4_k);
    case T_Q5: return sizeof(struct ob_block_q5_k);
    }
    return sizeof(struct ob_block_q6_k);
}

AI size_t kq_doff(int T)              /* offset of the fp16 d; dmin follows it */
{
    switch (T) {
    case T_Q2: return offsetof(struct ob_block_q2_k, d);
    case T_Q3: return offsetof(struct ob_block_q3_k, d);
    case T_Q4: return offsetof(struct ob_block_q4_k, d);
    case T_Q5: return offsetof(struct ob_block_q5_k, d);
    }
    return offsetof(struct ob_block_q6_k, d);
}

AI int kq_has_min(int T)               /* a dmin term (otherwise an offset folded into isum) */
{
    return T == T_Q2 || T == T_Q4 || T == T_Q5;
}

AI int kq_corr_shift(int T)            /* log2 of the offset of Q3_K (4) and Q6_K (32) */
{
    return T == T_Q3 ? 2 : 5;
}

AI int kq_fam8(int T)                  /* 8 sub-blocks of 32 (else 16 of 16) */
{
    return T == T_Q4 || T == T_Q5;
}

/*
 * Q4_K / Q5_K: the 8 6-bit scales (bytes 0..7) and mins (bytes 8..15); ob_k4_scale_min with
 * 32-bit masks and shifts, lane-wise on the three scale dwords u0, u1, u2 (loaded with the d /
 * dmin dword before them, the block's own, so one 16-byte load):
 *   s_lo = u0 & 0x3f..,   s_hi = (u2 & 0x0f..) | ((u0 >> 2) & 0x30..)   (= ((u0 >> 6) & 3) << 4)
 *   m_lo = u1 & 0x3f..,   m_hi = ((u2 >> 4) & 0x0f..) | ((u1 >> 2) & 0x30..)
 * (in general-purpose registers, then moved into a vector, the same took four vector-port
 * inserts a block)
 */
AI __m128i k4_scales(const uint8_t *q)
{
    __m128i x = _mm_loadu_si128((const __m128i *)(q - 4));          /* d|dmin, u0, u1, u2 */
    __m128i a = _mm_shuffle_epi32(x, _MM_SHUFFLE(3, 2, 3, 1));       /* u0, u2, u1, u2 */
    __m128i b = _mm_shuffle_epi32(x, _MM_SHUFFLE(2, 2, 1, 1));       /* u0, u0, u1, u1 */
    __m128i lo = _mm_and_si128(_mm_srlv_epi32(a, _mm_setr_epi32(0, 0, 0, 4)),
                               _mm_setr_epi32(0x3f3f3f3f, 0x0f0f0f0f, 0x3f3f3f3f, 0x0f0f0f0f));
    __m128i hi = _mm_and_si128(_mm_srli_epi32(b, 2),
                               _mm_setr_epi32(0, 0x30303030, 0, 0x30303030));
    return _mm_or_si128(lo, hi);
}

/* Q3_K: the 16 scales (ob_q3k_scale) as int8 */
AI __m128i k3_scales(const uint8_t *q)
{
    uint32_t a0 = ld32(q), a1 = ld32(q + 4), a2 = ld32(q + 8);
    const uint32_t m2 = 0x03030303u, m4 = 0x0f0f0f0fu;
    uint32_t t0 = (a0 & m4) | (((a2 >> 0) & m2) << 4);
    uint32_t t1 = (a1 & m4) | (((a2 >> 2) & m2) << 4);
    uint32_t t2 = ((a0 >> 4) & m4) | (((a2 >> 4) & m2) << 4);
    uint32_t t3 = ((a1 >> 4) & m4) | (((a2 >> 6) & m2) << 4);
    return _mm_sub_epi8(_mm_setr_epi32((int)t0, (int)t1, (int)t2, (int)t3), _mm_set1_epi8(32));
}

/* ---- 32-value formats (A8 activations) ------------------------------------------------------ */

enum { K_Q4_0, K_Q4_1, K_Q5_0, K_Q5_1, K_Q8_0 };

#define AB ((size_t)sizeof(struct ob_act_a8))      /* 40 */

AI size_t a8_bb(int kind)
{
    switch (kind) {
    case K_Q4_0: return sizeof(struct ob_block_q4_0);
    case K_Q4_1: return sizeof(struct ob_block_q4_1);
    case K_Q5_0: return sizeof(struct ob_block_q5_0);
    case K_Q5_1: return sizeof(struct ob_block_q5_1);
    }
    return sizeof(struct ob_block_q8_0);
}

AI int a8_has_m(int kind)
{
    return kind == K_Q4_1 || kind == K_Q5_1;
}

/* log2 of the offset taken off the quants (Q4_0: 8, Q5_0: 16), 0 for none */
AI int a8_off_shift(int kind)
{
    return kind == K_Q4_0 ? 3 : kind == K_Q5_0 ? 4 : 0;
}

#endif
