/*
 * ops-avx2.c — AVX2 versions of f16_put, swiglu, geglu and the attention head (exp, expsum
 * and row_max are the host's: lib/host/softmax-avx2.c).
 * References: ob_kv_put, ob_silu, ob_gelu, ob_attn_head (lib/arith/arith.h); each must be
 * equal to them bit for bit.
 *
 * exp: exp8 (lib/host/avx2.h), ob_expf's bits lane by lane; over a row, the host's
 * ob_exp_avx2 (host/softmax.h).
 *
 * attention: two query heads of a group share every key and value load. Scores are the
 * reference's 32-partial fmaf dot (four registers of 8 partials), folded for 8 keys at once
 * after a transpose, for head dimensions that are multiples of 32 (others take the
 * reference); the value sums run lane-wise over the head dimension with fmadd in increasing
 * key order, exactly the reference's per-dimension fmaf chain; chunk and final sums are
 * scalar in its order.
 */
#include <immintrin.h>
#include <math.h>
#include <stdbool.h>

#include "arith/arith.h"
#include "cpu/kernels/avx2.h"
#include "cpu/kernels/ops.h"
#include "host/softmax.h"

/*
 * ob_kv_put with F16C: vcvtps2ph rounds to nearest even, overflows to Inf and keeps
 * subnormals as the reference does; it quietens a signalling NaN, which the reference keeps,
 * so a group of 8 holding any NaN takes the reference.
 */
static void f16_put_avx2(uint16_t *h, const float *x, size_t n)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_loadu_ps(x + i);
        if (_mm256_movemask_ps(_mm256_cmp_ps(v, v, _CMP_UNORD_Q)))
            for (size_t j = i; j < i + 8; j++)
                h[j] = ob_f32_to_fp16(x[j]);
        else
            _mm_storeu_si128((__m128i *)(h + i), _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
    }
    for (; i < n; i++)
        h[i] = ob_f32_to_fp16(x[i]);
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

/*
 * ob_gelu lane by lane: the reference's operations in its order (fmsub for its fmaf(a, b, -c),
 * which is the same single rounding), the Inf test on e and the |x| > 1e4 cases as blends.
 */
static inline __m256 gelu8(__m256 x)
{
    const __m256 c_hi = _mm256_set1_ps(-1.59576917f), c_lo = _mm256_set1_ps(4.53406805e-08f);
    const __m256 k_hi = _mm256_set1_ps(0.0447149985f), k_lo = _mm256_set1_ps(1.54614443e-09f);
    const __m256 one = _mm256_set1_ps(1.0f);
    __m256 t = _mm256_mul_ps(x, x), tl = _mm256_fmsub_ps(x, x, t);
    __m256 m = _mm256_mul_ps(k_hi, t);
    __m256 ml = _mm256_add_ps(_mm256_fmsub_ps(k_hi, t, m), _mm256_fmadd_ps(k_hi, tl, _mm256_mul_ps(k_lo, t)));
    __m256 p = _mm256_add_ps(one, m), pb = _mm256_sub_ps(p, one);
    __m256 pl = _mm256_add_ps(_mm256_add_ps(_mm256_sub_ps(one, _mm256_sub_ps(p, pb)),
                                            _mm256_sub_ps(m, pb)), ml);
    __m256 z = _mm256_mul_ps(x, p), zl = _mm256_add_ps(_mm256_fmsub_ps(x, p, z), _mm256_mul_ps(x, pl));
    __m256 a = _mm256_mul_ps(c_hi, z);
    __m256 al = _mm256_add_ps(_mm256_fmsub_ps(c_hi, z, a), _mm256_fmadd_ps(c_hi, zl, _mm256_mul_ps(c_lo, z)));
    __m256 e = exp8(a);
    e = _mm256_blendv_ps(e, _mm256_fmadd_ps(e, al, e),
                         _mm256_cmp_ps(e, _mm256_set1_ps(INFINITY), _CMP_NEQ_UQ));
    __m256 g = _mm256_div_ps(x, _mm256_add_ps(one, e));
    g = _mm256_blendv_ps(g, x, _mm256_cmp_ps(x, _mm256_set1_ps(1e4f), _CMP_GT_OQ));
    return _mm256_blendv_ps(g, _mm256_set1_ps(-0.0f), _mm256_cmp_ps(x, _mm256_set1_ps(-1e4f), _CMP_LT_OQ));
}

static void geglu_avx2(float *g, const float *u, size_t n)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(g + i, _mm256_mul_ps(gelu8(_mm256_loadu_ps(g + i)), _mm256_loadu_ps(u + i)));
    for (; i < n; i++)
        g[i] = ob_gelu(g[i]) * u[i];
}

static inline __m256 load_h(const uint16_t *p)
{
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
}

/* 8x8 transpose: lane j of out[l] = lane l of in[j] (avx2.h's, on the float bits) */
static inline void transpose8(const __m256 in[8], __m256 out[8])
{
    __m256i r[8];
    for (int i = 0; i < 8; i++)
        r[i] = _mm256_castps_si256(in[i]);
    tr8x8_32(r);
    for (int i = 0; i < 8; i++)
        out[i] = _mm256_castsi256_ps(r[i]);
}

/*
 * Scores of up to two heads against keys [t0, t0 + m), m <= 8. For each key the four
 * registers of 32 partials fold by s = 16, 8 into one register (lane l: partials l and l + 8,
 * l + 16, l + 24 in ob_fold32's order); the registers of 8 keys are transposed so that the
 * remaining steps (4, 2, 1) run lane-wise, key j in lane j, in the reference's order.
 */
static inline void scores8(const float *qa, const float *qb, const uint16_t *k, long kv_stride,
                           int t0, int m, int hd, float scale, float *sa, float *sb)
{
    __m256 fa[8], fb[8], ta[8], tb[8];
    for (int j = 0; j < 8; j++) {
        if (j >= m) {
            fa[j] = fb[j] = _mm256_setzero_ps();
            continue;
        }
        const uint16_t *kr = k + (long)(t0 + j) * kv_stride;
        __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
        __m256 b0 = a0, b1 = a0, b2 = a0, b3 = a0;
        for (int i = 0; i < hd; i += 32) {
            __m256 k0 = load_h(kr + i), k1 = load_h(kr + i + 8);
            __m256 k2 = load_h(kr + i + 16), k3 = load_h(kr + i + 24);
            a0 = _mm256_fmadd_ps(_mm256_loadu_ps(qa + i), k0, a0);
            a1 = _mm256_fmadd_ps(_mm256_loadu_ps(qa + i + 8), k1, a1);
            a2 = _mm256_fmadd_ps(_mm256_loadu_ps(qa + i + 16), k2, a2);
            a3 = _mm256_fmadd_ps(_mm256_loadu_ps(qa + i + 24), k3, a3);
            if (qb) {
                b0 = _mm256_fmadd_ps(_mm256_loadu_ps(qb + i), k0, b0);
                b1 = _mm256_fmadd_ps(_mm256_loadu_ps(qb + i + 8), k1, b1);
                b2 = _mm256_fmadd_ps(_mm256_loadu_ps(qb + i + 16), k2, b2);
                b3 = _mm256_fmadd_ps(_mm256_loadu_ps(qb + i + 24), k3, b3);
            }
        }
        fa[j] = _mm256_add_ps(_mm256_add_ps(a0, a2), _mm256_add_ps(a1, a3));
        fb[j] = _mm256_add_ps(_mm256_add_ps(b0, b2), _mm256_add_ps(b1, b3));
    }
    const __m256 sc = _mm256_set1_ps(scale);
    float tmp[8];
    for (int h = 0; h < (qb ? 2 : 1); h++) {
        transpose8(h ? fb : fa, h ? tb : ta);
        __m256 *T = h ? tb : ta;
        __m256 e = _mm256_add_ps(_mm256_add_ps(T[0], T[4]), _mm256_add_ps(T[2], T[6]));
        __m256 o = _mm256_add_ps(_mm256_add_ps(T[1], T[5]), _mm256_add_ps(T[3], T[7]));
        _mm256_storeu_ps(tmp, _mm256_mul_ps(_mm256_add_ps(e, o), sc));
        float *dst = (h ? sb : sa) + t0;
        for (int j = 0; j < m; j++)
            dst[j] = tmp[j];
    }
}

/*
 * Up to two heads sharing each key and value load. The reference per head: scores, max,
 * e = exp(s - max), per chunk of OB_ATT_CHUNK keys the sum of e and the fmaf chains
 * o_c[d] += e_t v_t[d] in key order, then l and o summed over chunks in order, out = o / l.
 */
static void attn_pair(const float *qa, const float *qb, const uint16_t *k, const uint16_t *v,
                      long kv_stride, int n, int hd, float scale, float *sa, float *sb,
                      float *oa, float *ob, float *outa, float *outb)
{
    for (int t0 = 0; t0 < n; t0 += 8)
        scores8(qa, qb, k, kv_stride, t0, n - t0 < 8 ? n - t0 : 8, hd, scale, sa, sb);
    float la = 0.0f, lb = 0.0f;
    for (int h = 0; h < (qb ? 2 : 1); h++) {
        float *s = h ? sb : sa, m = ob_max_f32(s, n);
        for (int t = 0; t < n; t++)
            s[t] = s[t] - m;
        ob_exp_avx2(s, s, (size_t)n);
    }
    for (int d = 0; d < hd; d++)
        oa[d] = ob[d] = 0.0f;
    for (int c0 = 0; c0 < n; c0 += OB_ATT_CHUNK) {
        int c1 = c0 + OB_ATT_CHUNK < n ? c0 + OB_ATT_CHUNK : n;
        float lca = 0.0f, lcb = 0.0f;
        for (int t = c0; t < c1; t++) {
            lca = lca + sa[t];
            if (qb)
                lcb = lcb + sb[t];
        }
        la = la + lca;
        lb = lb + lcb;
        for (int d0 = 0; d0 < hd; d0 += 32) {
            __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
            __m256 b0 = a0, b1 = a0, b2 = a0, b3 = a0;
            for (int t = c0; t < c1; t++) {
                const uint16_t *vr = v + (long)t * kv_stride + d0;
                __m256 v0 = load_h(vr), v1 = load_h(vr + 8), v2 = load_h(vr + 16), v3 = load_h(vr + 24);
                __m256 ea = _mm256_set1_ps(sa[t]);
                a0 = _mm256_fmadd_ps(ea, v0, a0);
                a1 = _mm256_fmadd_ps(ea, v1, a1);
                a2 = _mm256_fmadd_ps(ea, v2, a2);
                a3 = _mm256_fmadd_ps(ea, v3, a3);
                if (qb) {
                    __m256 eb = _mm256_set1_ps(sb[t]);
                    b0 = _mm256_fmadd_ps(eb, v0, b0);
                    b1 = _mm256_fmadd_ps(eb, v1, b1);
                    b2 = _mm256_fmadd_ps(eb, v2, b2);
                    b3 = _mm256_fmadd_ps(eb, v3, b3);
                }
            }
            _mm256_storeu_ps(oa + d0, _mm256_add_ps(_mm256_loadu_ps(oa + d0), a0));
            _mm256_storeu_ps(oa + d0 + 8, _mm256_add_ps(_mm256_loadu_ps(oa + d0 + 8), a1));
            _mm256_storeu_ps(oa + d0 + 16, _mm256_add_ps(_mm256_loadu_ps(oa + d0 + 16), a2));
            _mm256_storeu_ps(oa + d0 + 24, _mm256_add_ps(_mm256_loadu_ps(oa + d0 + 24), a3));
            if (qb) {
                _mm256_storeu_ps(ob + d0, _mm256_add_ps(_mm256_loadu_ps(ob + d0), b0));
                _mm256_storeu_ps(ob + d0 + 8, _mm256_add_ps(_mm256_loadu_ps(ob + d0 + 8), b1));
                _mm256_storeu_ps(ob + d0 + 16, _mm256_add_ps(_mm256_loadu_ps(ob + d0 + 16), b2));
                _mm256_storeu_ps(ob + d0 + 24, _mm256_add_ps(_mm256_loadu_ps(ob + d0 + 24), b3));
            }
        }
    }
    for (int d = 0; d < hd; d++)
        outa[d] = oa[d] / la;
    if (qb)
        for (int d = 0; d < hd; d++)
            outb[d] = ob[d] / lb;
}

static void attn_group_avx2(const float *q, int nq, const uint16_t *k, const uint16_t *v,
                            long kv_stride, int n, int hd, float scale, float *s, float *oc,
                            float *out)
{
    if (hd % 32 || hd > 256) {
        for (int h = 0; h < nq; h++)
            ob_attn_head(q + (size_t)h * hd, k, v, kv_stride, n, hd, scale, s + (size_t)h * n,
                         oc, out + (size_t)h * hd);
        return;
    }
    for (int h = 0; h < nq; h += 2) {
        bool two = h + 1 < nq;
        attn_pair(q + (size_t)h * hd, two ? q + (size_t)(h + 1) * hd : NULL, k, v, kv_stride, n,
                  hd, scale, s + (size_t)h * n, two ? s + (size_t)(h + 1) * n : NULL, oc,
                  oc + hd, out + (size_t)h * hd, two ? out + (size_t)(h + 1) * hd : NULL);
    }
}

void ob_ops_avx2(struct ob_ops *t)
{
    t->f16_put = f16_put_avx2;
    t->swiglu = swiglu_avx2;
    t->geglu = geglu_avx2;
    t->attn_group = attn_group_avx2;
}
