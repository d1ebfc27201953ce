/*
 * avx2.h — AVX2 helpers of the host's SIMD files (lib/host/NAME-avx2.c) that the cpu route's
 * kernels share (lib/cpu/kernels/avx2.h includes this): arith.h's fixed float folds, lane
 * masks, and exp8, ob_expf on 8 lanes. Include it only from files compiled for the Makefile's
 * avx2 or avx512 level (-mavx2 -mfma -mf16c -mbmi2 at least: lib/host/NAME-LEVEL.c,
 * lib/cpu/kernels/NAME-LEVEL.c).
 *
 * The folds and masks are exact (lane moves, and the fixed shapes of arith.h); exp8 equals
 * ob_expf bit for bit, lane by lane.
 */
#ifndef OB_HOST_AVX2_H
#define OB_HOST_AVX2_H

#include <immintrin.h>
#include <math.h>

#define AI static inline __attribute__((always_inline))

/* ---- float folds (arith.h's fixed shapes) and lane masks ------------------------------------- */

/* ob_fold8 on the 8 lanes: (l + l+4), then (l + l+2), then lane 0 + lane 1 */
AI float fold8(__m256 p)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(p), _mm256_extractf128_ps(p, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* ob_fold32 on four registers of 8 partials (register g lane l = partial 8g + l) */
AI float fold32(__m256 p0, __m256 p1, __m256 p2, __m256 p3)
{
    __m256 q0 = _mm256_add_ps(p0, p2);        /* s = 16 */
    __m256 q1 = _mm256_add_ps(p1, p3);
    return fold8(_mm256_add_ps(q0, q1));      /* s = 8, then 4, 2, 1 */
}

/* mask with lanes j < n set */
AI __m256 lanes_below(int n)
{
    return _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32(n),
                                                   _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)));
}

/* p + v in lanes j < m, p elsewhere (never p + 0.0: that would turn -0.0 into +0.0) */
AI __m256 add_lanes(__m256 p, __m256 v, int m)
{
    __m256 s = _mm256_add_ps(p, v);
    return m >= 8 ? s : _mm256_blendv_ps(p, s, lanes_below(m));
}

/* ---- exp ------------------------------------------------------------------------------------ */

/*
 * exp8: ob_expf on 8 lanes, the reference's operations lane by lane (the same constants, fmadd
 * for its fmaf, _mm256_round_ps for ob_rint — equal for the |x| <= 150 it sees). The
 * reference's final scaling by 2^k takes one to two multiplications by powers of two depending
 * on k, but every path rounds only once, at the end: the result is always RN(p * 2^k). Here
 * every lane multiplies by 2^(k>>1) (exact: the product stays normal) and then by
 * 2^(k - (k>>1)), which rounds once to the same RN(p * 2^k). NaN, overflow and underflow are
 * blended in as the reference returns them.
 */
static inline __m256 exp8(__m256 x)
{
    const __m256 hi = _mm256_set1_ps(88.72283935546875f), lo = _mm256_set1_ps(-103.972084045410f);
    __m256 kf = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269502162933349609375f)),
                                _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fmadd_ps(kf, _mm256_set1_ps(-0.693145751953125f), x);
    r = _mm256_fmadd_ps(kf, _mm256_set1_ps(-1.428606765330187045e-06f), r);
    __m256 p = _mm256_set1_ps(1.98412698412698412698e-4f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.38888888888888888889e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.33333333333333333333e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.16666666666666666667e-2f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.66666666666666666667e-1f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    /* k in [-150, 128] for the lanes that reach here; out-of-range lanes are replaced below */
    __m256i k = _mm256_cvtps_epi32(_mm256_max_ps(_mm256_min_ps(kf, _mm256_set1_ps(128.0f)),
                                                 _mm256_set1_ps(-150.0f)));
    __m256i k1 = _mm256_srai_epi32(k, 1), k2 = _mm256_sub_epi32(k, k1);
    __m256 s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(k1, _mm256_set1_epi32(127)), 23));
    __m256 s2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(k2, _mm256_set1_epi32(127)), 23));
    __m256 y = _mm256_mul_ps(_mm256_mul_ps(p, s1), s2);
    y = _mm256_blendv_ps(y, _mm256_set1_ps(INFINITY), _mm256_cmp_ps(x, hi, _CMP_GT_OQ));
    y = _mm256_blendv_ps(y, _mm256_setzero_ps(), _mm256_cmp_ps(x, lo, _CMP_LT_OQ));
    return _mm256_blendv_ps(y, x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
}

#endif
