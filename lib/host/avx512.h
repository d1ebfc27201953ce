/*
 * avx512.h — AVX-512 helpers of the host's SIMD files (lib/host/NAME-avx512.c) that the cpu
 * route's kernels share (lib/cpu/kernels/ops-avx512.c): exp16, ob_expf on 16 lanes, and the
 * tail mask first16; with avx2.h's. Include it only from files compiled for the Makefile's
 * avx512 level, which follow cpu/kernels/avx512.h's rule (no plain int8 loop: the VNNI guard).
 *
 * exp16 is exp8's reasoning (avx2.h) 16 lanes wide, with roundscale for ob_rint; it equals
 * ob_expf bit for bit, lane by lane.
 */
#ifndef OB_HOST_AVX512_H
#define OB_HOST_AVX512_H

#include <stddef.h>

#include "host/avx2.h"

static inline __m512 exp16(__m512 x)
{
    const __m512 hi = _mm512_set1_ps(88.72283935546875f), lo = _mm512_set1_ps(-103.972084045410f);
    __m512 kf = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269502162933349609375f)),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fmadd_ps(kf, _mm512_set1_ps(-0.693145751953125f), x);
    r = _mm512_fmadd_ps(kf, _mm512_set1_ps(-1.428606765330187045e-06f), r);
    __m512 p = _mm512_set1_ps(1.98412698412698412698e-4f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.38888888888888888889e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.33333333333333333333e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.16666666666666666667e-2f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.66666666666666666667e-1f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    /* k in [-150, 128] for the lanes that reach here; out-of-range lanes are replaced below */
    __m512i k = _mm512_cvtps_epi32(_mm512_max_ps(_mm512_min_ps(kf, _mm512_set1_ps(128.0f)),
                                                 _mm512_set1_ps(-150.0f)));
    __m512i k1 = _mm512_srai_epi32(k, 1), k2 = _mm512_sub_epi32(k, k1);
    __m512 s1 = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(k1, _mm512_set1_epi32(127)), 23));
    __m512 s2 = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(k2, _mm512_set1_epi32(127)), 23));
    __m512 y = _mm512_mul_ps(_mm512_mul_ps(p, s1), s2);
    y = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, hi, _CMP_GT_OQ), y, _mm512_set1_ps(INFINITY));
    y = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, lo, _CMP_LT_OQ), y, _mm512_setzero_ps());
    return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), y, x);
}

/* lanes j < m set (all 16 from m = 16 on) */
AI __mmask16 first16(size_t m)
{
    return (__mmask16)(m >= 16 ? 0xffffu : (1u << m) - 1u);
}

#endif
