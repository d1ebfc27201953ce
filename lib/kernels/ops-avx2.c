/*
 * ops-avx2.c — AVX2 versions of exp, swiglu and the attention head. References: ob_expf,
 * ob_silu, ob_attn_head (lib/arith.h); each must be equal to them bit for bit.
 *
 * exp: the reference's operations lane by lane (the same constants, fmadd for its fmaf,
 * _mm256_round_ps for ob_rint — equal for the |x| <= 150 it sees). The reference's final
 * scaling by 2^k takes one to two multiplications by powers of two depending on k, but every
 * path rounds only once, at the end: the result is always RN(p * 2^k). Here every lane
 * multiplies by 2^(k>>1) (exact: the product stays normal) and then by 2^(k - (k>>1)), which
 * rounds once to the same RN(p * 2^k). NaN, overflow and underflow are blended in as the
 * reference returns them.
 *
 * attention: scores are the reference's 32-partial fmaf dot (four registers of 8 partials)
 * for head dimensions that are multiples of 32 (others take the reference); the value sums
 * run lane-wise over the head dimension with fmadd in increasing key order, exactly the
 * reference's per-dimension fmaf chain; chunk and final sums are scalar in its order.
 */
#include <immintrin.h>
#include <math.h>

#include "arith.h"
#include "ops.h"

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

static void exp_avx2(const float *x, float *y, size_t n)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, exp8(_mm256_loadu_ps(x + i)));
    for (; i < n; i++)
        y[i] = ob_expf(x[i]);
}

static void swiglu_avx2(float *g, const float *u, size_t n)
{
    const __m256 one = _mm256_set1_ps(1.0f), neg = _mm256_set1_ps(-0.0f);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 x = _mm256_loadu_ps(g + i);
        __m256 s = _mm256_div_ps(x, _mm256_add_ps(one, exp8(_mm256_xor_ps(x, neg))));
        _mm256_storeu_ps(g + i, _mm256_mul_ps(s, _mm256_loadu_ps(u + i)));
    }
    for (; i < n; i++)
        g[i] = ob_silu(g[i]) * u[i];
}

static inline __m256 load_h(const uint16_t *p)
{
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
}

/* ob_fold32 of four registers: s = 16, 8, then 4, 2, 1 within one */
static inline float fold32(__m256 p0, __m256 p1, __m256 p2, __m256 p3)
{
    __m256 q = _mm256_add_ps(_mm256_add_ps(p0, p2), _mm256_add_ps(p1, p3));
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(q), _mm256_extractf128_ps(q, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

static void attn_head_avx2(const float *q, const uint16_t *k, const uint16_t *v, long kv_stride,
                           int n, int hd, float scale, float *s, float *oc, float *out)
{
    if (hd % 32 || hd > 256) {
        ob_attn_head(q, k, v, kv_stride, n, hd, scale, s, oc, out);
        return;
    }
    /* fp16 keys convert exactly, so F16C loads equal ob_fp16_to_f32 on the finite values a
     * cache holds; a NaN key gives NaN scores either way */
    for (int t = 0; t < n; t++) {
        const uint16_t *kr = k + (long)t * kv_stride;
        __m256 p0 = _mm256_setzero_ps(), p1 = p0, p2 = p0, p3 = p0;
        for (int i = 0; i < hd; i += 32) {
            p0 = _mm256_fmadd_ps(_mm256_loadu_ps(q + i), load_h(kr + i), p0);
            p1 = _mm256_fmadd_ps(_mm256_loadu_ps(q + i + 8), load_h(kr + i + 8), p1);
            p2 = _mm256_fmadd_ps(_mm256_loadu_ps(q + i + 16), load_h(kr + i + 16), p2);
            p3 = _mm256_fmadd_ps(_mm256_loadu_ps(q + i + 24), load_h(kr + i + 24), p3);
        }
        s[t] = fold32(p0, p1, p2, p3) * scale;
    }
    float m = ob_max_f32(s, n);
    for (int t = 0; t < n; t++)
        s[t] = s[t] - m;
    exp_avx2(s, s, (size_t)n);
    float l = 0.0f, *o = oc + hd;
    for (int d = 0; d < hd; d++)
        o[d] = 0.0f;
    for (int c0 = 0; c0 < n; c0 += OB_ATT_CHUNK) {
        int c1 = c0 + OB_ATT_CHUNK < n ? c0 + OB_ATT_CHUNK : n;
        float lc = 0.0f;
        for (int t = c0; t < c1; t++)
            lc = lc + s[t];
        l = l + lc;
        /* o_c[d] = fmaf(e_t, v_t[d], o_c[d]) over t, 64 dimensions at a time */
        for (int d0 = 0; d0 < hd; d0 += 64) {
            int nd = hd - d0 < 64 ? (hd - d0) / 8 : 8;
            __m256 acc[8];
            for (int j = 0; j < nd; j++)
                acc[j] = _mm256_setzero_ps();
            for (int t = c0; t < c1; t++) {
                __m256 e = _mm256_set1_ps(s[t]);
                const uint16_t *vr = v + (long)t * kv_stride + d0;
                for (int j = 0; j < nd; j++)
                    acc[j] = _mm256_fmadd_ps(e, load_h(vr + 8 * j), acc[j]);
            }
            for (int j = 0; j < nd; j++)
                _mm256_storeu_ps(o + d0 + 8 * j,
                                 _mm256_add_ps(_mm256_loadu_ps(o + d0 + 8 * j), acc[j]));
        }
    }
    for (int d = 0; d < hd; d++)
        out[d] = o[d] / l;
}

void ob_ops_avx2(struct ob_ops *t)
{
    t->exp = exp_avx2;
    t->swiglu = swiglu_avx2;
    t->attn_head = attn_head_avx2;
}
