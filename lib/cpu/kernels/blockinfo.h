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

/* Q4_K / Q5_K: the 8 6-bit scales (bytes 0..7) and mins (bytes 8..15); ob_k4_scale_min with
 * 32-bit masks and shifts */
AI __m128i k4_scales(const uint8_t *q)
{
    uint32_t u0 = ld32(q), u1 = ld32(q + 4), u2 = ld32(q + 8);
    uint32_t s_lo = u0 & 0x3f3f3f3fu;
    uint32_t s_hi = (u2 & 0x0f0f0f0fu) | (((u0 >> 6) & 0x03030303u) << 4);
    uint32_t m_lo = u1 & 0x3f3f3f3fu;
    uint32_t m_hi = ((u2 >> 4) & 0x0f0f0f0fu) | (((u1 >> 6) & 0x03030303u) << 4);
    return _mm_setr_epi32((int)s_lo, (int)s_hi, (int)m_lo, (int)m_hi);
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
