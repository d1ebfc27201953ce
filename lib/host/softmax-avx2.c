/*
 * softmax-avx2.c — AVX2 versions of exp, expsum and row_max (softmax.h).
 * References: ob_expf, ob_lse_sum, ob_max_f32 (lib/arith/arith.h); each must be equal to them
 * bit for bit. exp is exp8 on each 8 values (avx2.h says why it is ob_expf's bits).
 */
#include <immintrin.h>
#include <math.h>

#include "arith/arith.h"
#include "host/avx2.h"
#include "host/softmax.h"

/* exp8 on each 8 values, the reference on the tail */
static void exp_avx2(const float *x, float *y, size_t n)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, exp8(_mm256_loadu_ps(x + i)));
    for (; i < n; i++)
        y[i] = ob_expf(x[i]);
}

/* ob_lse_sum: register g lane l holds partial 8g + l; the tail adds under a mask */
static float expsum_avx2(const float *z, size_t n, float m)
{
    const __m256 mv = _mm256_set1_ps(m);
    __m256 p[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(),
                   _mm256_setzero_ps()};
    size_t i = 0;
    for (; i + 32 <= n; i += 32)
        for (int g = 0; g < 4; g++)
            p[g] = _mm256_add_ps(p[g], exp8(_mm256_sub_ps(_mm256_loadu_ps(z + i + 8 * g), mv)));
    for (int g = 0; g < 4 && i + 8 * g < n; g++) {
        int left = (int)(n - i - 8 * g) < 8 ? (int)(n - i - 8 * g) : 8;
        __m256i k = _mm256_castps_si256(lanes_below(left));
        __m256 e = exp8(_mm256_sub_ps(_mm256_maskload_ps(z + i + 8 * g, k), mv));
        p[g] = add_lanes(p[g], e, left);
    }
    return fold32(p[0], p[1], p[2], p[3]);
}

/*
 * row_max: vmaxps(v, m) is v > m ? v : m, lane by lane ob_max_f32's step, so every lane
 * keeps the first of its largest values; a largest value other than zero has one bit pattern,
 * which any fold of the lanes returns, and a largest zero is the row's first zero, found again.
 * A compare "not less than +Inf" (unordered: true) flags NaN and +Inf.
 */
static float row_max_avx2(const float *z, size_t n, int *bad)
{
    const __m256 inf = _mm256_set1_ps(INFINITY);
    __m256 m[4], b[4];
    for (int g = 0; g < 4; g++) {
        m[g] = _mm256_set1_ps(-INFINITY);
        b[g] = _mm256_setzero_ps();
    }
    size_t i = 0;
    for (; i + 32 <= n; i += 32)
        for (int g = 0; g < 4; g++) {
            __m256 v = _mm256_loadu_ps(z + i + 8 * g);
            m[g] = _mm256_max_ps(v, m[g]);
            b[g] = _mm256_or_ps(b[g], _mm256_cmp_ps(v, inf, _CMP_NLT_UQ));
        }
    __m256 mv = _mm256_max_ps(_mm256_max_ps(m[0], m[1]), _mm256_max_ps(m[2], m[3]));
    __m256 bv = _mm256_or_ps(_mm256_or_ps(b[0], b[1]), _mm256_or_ps(b[2], b[3]));
    __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(mv), _mm256_extractf128_ps(mv, 1));
    m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    float r = _mm_cvtss_f32(_mm_max_ss(m4, _mm_movehdup_ps(m4)));
    int fl = _mm256_movemask_ps(bv) != 0;
    for (size_t t = i; t < n; t++)
        fl |= z[t] != z[t] || z[t] == INFINITY;
    if (i < n) {
        float t = ob_max_f32(z + i, (int)(n - i));
        r = t > r ? t : r;
    }
    *bad = fl;
    return ob_row_max_zero(z, n, r, fl);
}

/* scale: vsubps and vdivps round as the scalar subtraction and division do */
static void scale_avx2(const float *z, size_t n, float m, float T, float *y)
{
    const __m256 mv = _mm256_set1_ps(m), tv = _mm256_set1_ps(T);
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_div_ps(_mm256_sub_ps(_mm256_loadu_ps(z + i), mv), tv));
    for (; i < n; i++)
        y[i] = (z[i] - m) / T;
}

void ob_softmax_avx2(struct ob_softmax *t)
{
    t->exp = exp_avx2;
    t->expsum = expsum_avx2;
    t->row_max = row_max_avx2;
    t->scale = scale_avx2;
}
