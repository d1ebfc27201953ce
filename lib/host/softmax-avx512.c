/*
 * softmax-avx512.c — AVX-512 versions of exp, expsum and row_max (softmax.h). References:
 * ob_expf, ob_lse_sum, ob_max_f32 (lib/arith/arith.h); each must be equal to them bit for bit.
 * exp is exp16 (avx512.h), tails through the same lanes under a mask.
 */
#include <immintrin.h>
#include <math.h>

#include "arith/arith.h"
#include "host/avx512.h"
#include "host/softmax.h"

static inline void exp_n(const float *x, float *y, size_t n)
{
    size_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm512_storeu_ps(y + i, exp16(_mm512_loadu_ps(x + i)));
    if (i < n) {
        __mmask16 k = first16(n - i);
        _mm512_mask_storeu_ps(y + i, k, exp16(_mm512_maskz_loadu_ps(k, x + i)));
    }
}

static void exp_avx512(const float *x, float *y, size_t n)
{
    exp_n(x, y, n);
    _mm256_zeroupper();
}

/* ob_lse_sum: p0 lane l holds partial l, p1 partial 16 + l; the tail adds under a mask */
static float expsum_avx512(const float *z, size_t n, float m)
{
    const __m512 mv = _mm512_set1_ps(m);
    __m512 p0 = _mm512_setzero_ps(), p1 = _mm512_setzero_ps();
    size_t i = 0;
    for (; i + 32 <= n; i += 32) {
        p0 = _mm512_add_ps(p0, exp16(_mm512_sub_ps(_mm512_loadu_ps(z + i), mv)));
        p1 = _mm512_add_ps(p1, exp16(_mm512_sub_ps(_mm512_loadu_ps(z + i + 16), mv)));
    }
    if (i < n) {
        __mmask16 k = first16(n - i);
        p0 = _mm512_mask_add_ps(p0, k, p0, exp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, z + i), mv)));
    }
    if (i + 16 < n) {
        __mmask16 k = first16(n - i - 16);
        p1 = _mm512_mask_add_ps(p1, k, p1,
                                exp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, z + i + 16), mv)));
    }
    /* ob_fold32: s = 16 lane-wise, then s = 8 across the halves, then ob_fold8's steps */
    __m512 q = _mm512_add_ps(p0, p1);
    float l = fold8(_mm256_add_ps(_mm512_castps512_ps256(q), _mm512_extractf32x8_ps(q, 1)));
    _mm256_zeroupper();
    return l;
}

/*
 * row_max: as the AVX2 one (softmax-avx2.c), 64 values a step: vmaxps(v, m) is v > m ? v : m,
 * lane by lane ob_max_f32's step, so every lane keeps the first of its largest values; a
 * largest value other than zero has one bit pattern, which any fold of the lanes returns, and a
 * largest zero is the row's first zero, found again. "Not less than +Inf" (unordered: true)
 * flags NaN and +Inf; the tail goes through the same lanes under a mask (-Inf elsewhere).
 */
static float row_max_avx512(const float *z, size_t n, int *bad)
{
    const __m512 inf = _mm512_set1_ps(INFINITY), ninf = _mm512_set1_ps(-INFINITY);
    __m512 m[4] = {ninf, ninf, ninf, ninf};
    __mmask16 b = 0;
    size_t i = 0;
    for (; i + 64 <= n; i += 64)
        for (int g = 0; g < 4; g++) {
            __m512 v = _mm512_loadu_ps(z + i + 16 * g);
            m[g] = _mm512_max_ps(v, m[g]);
            b |= _mm512_cmp_ps_mask(v, inf, _CMP_NLT_UQ);
        }
    for (; i < n; i += 16) {
        __mmask16 k = n - i >= 16 ? (__mmask16)0xffff : first16(n - i);
        __m512 v = _mm512_mask_loadu_ps(ninf, k, z + i);
        m[0] = _mm512_max_ps(v, m[0]);
        b |= _mm512_mask_cmp_ps_mask(k, v, inf, _CMP_NLT_UQ);
    }
    float r = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_max_ps(m[0], m[1]),
                                                 _mm512_max_ps(m[2], m[3])));
    *bad = b != 0;
    return ob_row_max_zero(z, n, r, *bad);
}

/* scale: vsubps and vdivps round as the scalar subtraction and division do; the tail under a
 * mask */
static void scale_avx512(const float *z, size_t n, float m, float T, float *y)
{
    const __m512 mv = _mm512_set1_ps(m), tv = _mm512_set1_ps(T);
    for (size_t i = 0; i < n; i += 16) {
        __mmask16 k = n - i >= 16 ? (__mmask16)0xffff : first16(n - i);
        __m512 v = _mm512_maskz_loadu_ps(k, z + i);
        _mm512_mask_storeu_ps(y + i, k, _mm512_div_ps(_mm512_sub_ps(v, mv), tv));
    }
}

void ob_softmax_avx512(struct ob_softmax *t)
{
    t->exp = exp_avx512;
    t->expsum = expsum_avx512;
    t->row_max = row_max_avx512;
    t->scale = scale_avx512;
}
