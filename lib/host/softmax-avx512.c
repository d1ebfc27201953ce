/*
 * softmax-avx512.c — AVX-512 versions of exp and expsum (softmax.h; row_max is the AVX2
 * one). References: ob_expf, ob_lse_sum (lib/arith/arith.h); each must be equal to them bit for
 * bit. exp is exp16 (avx512.h), tails through the same lanes under a mask.
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

void ob_softmax_avx512(struct ob_softmax *t)
{
    t->exp = exp_avx512;
    t->expsum = expsum_avx512;
}
