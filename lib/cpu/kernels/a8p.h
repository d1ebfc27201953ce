/*
 * a8p.h — the 32-value formats in panels (matrix.h OB_LAYOUT_P8: Q4_0, Q4_1, Q5_0, Q8_0) read
 * lane-wise with AVX2: a panel block's quants and scales, one weight row per 32-bit lane.
 * Included by a8-avx2.c (the panel kernels) and a8-avx512.c (its GEMM decodes 32-row panels
 * from four).
 */
#ifndef OB_KERNELS_A8P_H
#define OB_KERNELS_A8P_H

#include "cpu/kernels/avx2.h"
#include "cpu/kernels/blockinfo.h"
#include "matrix.h"

/* where a panel block (matrix.h) holds its qs dwords: Q4_0 and Q8_0 from 0, Q4_1 after its
 * (d, m) dword, Q5_0 after its qh dword */
AI size_t a8p_qs(int kind)
{
    return kind == K_Q4_0 || kind == K_Q8_0 ? 0 : 32;
}

/*
 * The nibble formats: qs dword d of a panel block's 8 rows (values 4d .. 4d + 3 in the low nibbles, 16 + 4d .. in
 * the high ones) as unsigned q bytes, *lo and *hi; Q5_0's high bits from the rearranged qh
 * (matrix.h): bit d of each byte shifted onto bit 4 for the low values, bit 4 + d for the
 * high ones (a 16-bit shift; what crosses a byte falls outside the mask).
 */
AI void a8p_vals(const uint8_t *wb, int d, int kind, __m256i *lo, __m256i *hi)
{
    const __m256i m4 = _mm256_set1_epi8(15), b4 = _mm256_set1_epi8(16);
    const __m256i q = ld(wb + a8p_qs(kind) + 32 * d);
    *lo = _mm256_and_si256(q, m4);
    *hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
    if (kind == K_Q5_0) {
        const __m256i qh = ld(wb);
        __m256i hl = _mm256_slli_epi16(qh, 4 - d), hh = d ? _mm256_srli_epi16(qh, d) : qh;
        *lo = _mm256_or_si256(*lo, _mm256_and_si256(hl, b4));
        *hi = _mm256_or_si256(*hi, _mm256_and_si256(hh, b4));
    }
}

/* Q8_0's values w = 16 h + l as the GEMM splits them: l = w & 15 and h + 8 = (w >> 4) + 8,
 * both 0..15 (lane-wise over any 32 bytes) */
AI void a8p_q8_split(__m256i q, __m256i *l, __m256i *h8)
{
    const __m256i m4 = _mm256_set1_epi8(15);
    *l = _mm256_and_si256(q, m4);
    *h8 = _mm256_xor_si256(_mm256_and_si256(_mm256_srli_epi16(q, 4), m4), _mm256_set1_epi8(8));
}

/* the 8 rows' d (hi: Q4_1's m) as floats */
AI __m256 a8p_scale(const uint8_t *wb, int kind, int hi)
{
    if (kind == K_Q4_1)
        return f16_lanes8(ld(wb), hi);
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(wb + ob_p8_d(a8_bb(kind)))));
}

#endif
