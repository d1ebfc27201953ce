/*
 * ops-avx2.c — AVX2 versions of f16_put, swiglu, geglu and the attention head (exp, expsum
 * and row_max are the host's: lib/host/softmax-avx2.c).
 * References: ob_kv_put, ob_silu, ob_gelu, ob_attn_head (lib/arith/arith.h); each must be
 * equal to them bit for bit.
 *
 * exp: exp8 (lib/host/avx2.h), ob_expf's bits lane by lane.
 *
 * attention: the query heads of a group share the key and value loads, two heads a pass over
 * the keys for the scores and up to three for the value sums. Scores are the reference's
 * 32-partial fmaf dot (four registers of 8 partials), folded 8 keys at once two keys'
 * registers together at each step, for head dimensions that are multiples of 32 (others take
 * the reference); a row's maximum is the host's row_max (the reference's where a NaN or +Inf
 * is in the row); the value sums run lane-wise over the head dimension with fmadd in
 * increasing key order, exactly the reference's per-dimension fmaf chain; chunk and final
 * sums are scalar in its order.
 */
#include <immintrin.h>
#include <math.h>
#include <stdbool.h>

#include "arith/arith.h"
#include "cpu/kernels/avx2.h"
#include "cpu/kernels/ops.h"
#include "host/simd.h"
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

/*
 * The reference's fold of one key's 32 score partials, 8 keys at once. A key's register
 * starts with its folds by 16 and 8, (a0 + a2) + (a1 + a3) (lane l: partials l, l + 8, l + 16,
 * l + 24 in ob_fold32's order); each further step takes two registers apart and together so
 * that one addition does that step for the keys of both: by 4 (two keys a register), 2
 * (four), 1 (eight), the lower partial always the first operand. Key j ends in lane
 * 4 (j & 1) + j / 2 (score_order).
 */
AI __m256 fold_by4(__m256 a, __m256 b)       /* 8 lanes of a key each -> 4 of 2 keys each */
{
    return _mm256_add_ps(_mm256_permute2f128_ps(a, b, 0x20), _mm256_permute2f128_ps(a, b, 0x31));
}

AI __m256 fold_by2(__m256 a, __m256 b)       /* 4 lanes -> 2, four keys */
{
    __m256d x = _mm256_castps_pd(a), y = _mm256_castps_pd(b);
    return _mm256_add_ps(_mm256_castpd_ps(_mm256_unpacklo_pd(x, y)),
                         _mm256_castpd_ps(_mm256_unpackhi_pd(x, y)));
}

AI __m256 fold_by1(__m256 a, __m256 b)       /* 2 lanes -> 1: lane 4 i + r holds key 2 r + i */
{
    return _mm256_add_ps(_mm256_shuffle_ps(a, b, 0x88), _mm256_shuffle_ps(a, b, 0xdd));
}

/* key j's score from lane 4 (j & 1) + j / 2 into lane j */
AI __m256 score_order(__m256 e)
{
    return _mm256_permutevar8x32_ps(e, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

/*
 * Scores of M (1 or 2) query rows against keys [t0, t0 + m), m <= 8, head dimension hd (a
 * multiple of 32): per key four registers of 8 fmadd partials from zero in dimension order,
 * each 8 halfs of the key converted once for both rows; the fold as above, each step as soon
 * as its two registers exist.
 */
AI void scores8(const float *const *q, const uint16_t *k, long kv_stride, int t0, int m,
                int hd, float scale, float *const *s, int M)
{
    __m256 P[2][2], R[2][2];
    UNROLL
    for (int jp = 0; jp < 4; jp++) {
        __m256 A[2][2];
        UNROLL
        for (int u = 0; u < 2; u++) {
            int j = 2 * jp + u;
            __m256 a[2][4];
            UNROLL
            for (int h = 0; h < M; h++)
                UNROLL
                for (int c = 0; c < 4; c++)
                    a[h][c] = _mm256_setzero_ps();
            if (j < m) {
                const uint16_t *kr = k + (long)(t0 + j) * kv_stride;
                for (int i = 0; i < hd; i += 32)
                    UNROLL
                    for (int c = 0; c < 4; c++) {
                        __m256 kc = load_h(kr + i + 8 * c);
                        UNROLL
                        for (int h = 0; h < M; h++)
                            a[h][c] = _mm256_fmadd_ps(_mm256_loadu_ps(q[h] + i + 8 * c), kc,
                                                      a[h][c]);
                    }
            }
            UNROLL
            for (int h = 0; h < M; h++)
                A[h][u] = _mm256_add_ps(_mm256_add_ps(a[h][0], a[h][2]),
                                        _mm256_add_ps(a[h][1], a[h][3]));
        }
        UNROLL
        for (int h = 0; h < M; h++) {
            P[h][jp & 1] = fold_by4(A[h][0], A[h][1]);
            if (jp & 1)
                R[h][jp >> 1] = fold_by2(P[h][0], P[h][1]);
        }
    }
    const __m256 sc = _mm256_set1_ps(scale);
    UNROLL
    for (int h = 0; h < M; h++) {
        __m256 e = _mm256_mul_ps(score_order(fold_by1(R[h][0], R[h][1])), sc);
        if (m == 8) {
            _mm256_storeu_ps(s[h] + t0, e);
        } else {
            float tmp[8];
            _mm256_storeu_ps(tmp, e);
            for (int j = 0; j < m; j++)
                s[h][t0 + j] = tmp[j];
        }
    }
}

/* all n scores of query rows q[0 .. M - 1] into s[0 .. M - 1], the head dimension a constant
 * where it is common */
static void scores_pass(const float *const *q, const uint16_t *k, long kv_stride, int n, int hd,
                        float scale, float *const *s, int M)
{
#define SCORES(HD)                                                                        \
    for (int t0 = 0; t0 < n; t0 += 8)                                                     \
        if (M == 2)                                                                       \
            scores8(q, k, kv_stride, t0, n - t0 < 8 ? n - t0 : 8, HD, scale, s, 2);       \
        else                                                                              \
            scores8(q, k, kv_stride, t0, n - t0 < 8 ? n - t0 : 8, HD, scale, s, 1)
    switch (hd) {
    case 64: SCORES(64); break;
    case 128: SCORES(128); break;
    default: SCORES(hd); break;
    }
#undef SCORES
}

/*
 * The value sums of keys [c0, c1) for dimensions [d0, d0 + 32) of M (1 to 3) heads (weights
 * e[h]): fmadd chains from zero in key order, then added to the running sums o[h]; each value
 * register converted once for all M heads. With lc, the chunk's sums of e in key order
 * (scalar chains, one a head, side by side).
 */
AI void values(const float *const *e, const uint16_t *v, long kv_stride, int c0, int c1,
               int d0, float *const *o, float *lc, int M)
{
    float l[3] = {0.0f, 0.0f, 0.0f};
    __m256 a[3][4];
    UNROLL
    for (int h = 0; h < M; h++)
        UNROLL
        for (int c = 0; c < 4; c++)
            a[h][c] = _mm256_setzero_ps();
    for (int t = c0; t < c1; t++) {
        const uint16_t *vr = v + (long)t * kv_stride + d0;
        __m256 ev[3];
        UNROLL
        for (int h = 0; h < M; h++) {
            ev[h] = _mm256_set1_ps(e[h][t]);
            if (lc)
                l[h] = l[h] + e[h][t];
        }
        UNROLL
        for (int c = 0; c < 4; c++) {
            __m256 vv = load_h(vr + 8 * c);
            UNROLL
            for (int h = 0; h < M; h++)
                a[h][c] = _mm256_fmadd_ps(ev[h], vv, a[h][c]);
        }
    }
    UNROLL
    for (int h = 0; h < M; h++) {
        if (lc)
            lc[h] = l[h];
        UNROLL
        for (int c = 0; c < 4; c++) {
            float *p = o[h] + d0 + 8 * c;
            _mm256_storeu_ps(p, _mm256_add_ps(_mm256_loadu_ps(p), a[h][c]));
        }
    }
}

/*
 * The query heads of a group: scores two heads a pass over the keys, then per chunk of
 * OB_ATT_CHUNK keys the value sums of up to three heads a pass. The reference per head:
 * scores, max, e = exp(s - max), per chunk the sum of e and the fmaf chains
 * o_c[d] += e_t v_t[d] in key order, then l and o summed over chunks in order, out = o / l.
 */
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
    /* oc: the heads' running sums o (nq * hd), then their l (nq) */
    float *l = oc + (size_t)nq * hd;
    for (int h = 0; h < nq; h += 2) {
        int M = nq - h < 2 ? 1 : 2;
        const float *qh[2] = {q + (size_t)h * hd, q + (size_t)(h + M - 1) * hd};
        float *sh[2] = {s + (size_t)h * n, s + (size_t)(h + M - 1) * n};
        scores_pass(qh, k, kv_stride, n, hd, scale, sh, M);
    }
    const struct ob_softmax *sm = ob_softmax(OB_ISA_AVX2);
    for (int h = 0; h < nq; h++) {
        /* the row's maximum vectorised, the reference's where a NaN or +Inf makes it differ */
        int bad = 0;
        float *sh = s + (size_t)h * n, m = sm->row_max(sh, (size_t)n, &bad);
        if (bad)
            m = ob_max_f32(sh, n);
        const __m256 mv = _mm256_set1_ps(m);
        int t = 0;
        for (; t + 8 <= n; t += 8)
            _mm256_storeu_ps(sh + t, exp8(_mm256_sub_ps(_mm256_loadu_ps(sh + t), mv)));
        for (; t < n; t++)
            sh[t] = ob_expf(sh[t] - m);
        l[h] = 0.0f;
    }
    for (size_t d = 0; d < (size_t)nq * hd; d++)
        oc[d] = 0.0f;
    int passes = (nq + 2) / 3;                   /* of up to three heads, as even as can be */
    for (int c0 = 0; c0 < n; c0 += OB_ATT_CHUNK) {
        int c1 = c0 + OB_ATT_CHUNK < n ? c0 + OB_ATT_CHUNK : n;
        for (int p = 0, h = 0; p < passes; p++) {
            int M = nq / passes + (p < nq % passes);
            const float *eh[3];
            float *oh[3], lc[3] = {0.0f, 0.0f, 0.0f};
            for (int i = 0; i < M; i++) {
                eh[i] = s + (size_t)(h + i) * n;
                oh[i] = oc + (size_t)(h + i) * hd;
            }
            for (int d0 = 0; d0 < hd; d0 += 32) {
                float *lp = d0 ? NULL : lc;      /* the sums in the first pass */
                switch (M) {
                case 1: values(eh, v, kv_stride, c0, c1, d0, oh, lp, 1); break;
                case 2: values(eh, v, kv_stride, c0, c1, d0, oh, lp, 2); break;
                default: values(eh, v, kv_stride, c0, c1, d0, oh, lp, 3); break;
                }
            }
            for (int i = 0; i < M; i++)
                l[h + i] = l[h + i] + lc[i];
            h += M;
        }
    }
    for (int h = 0; h < nq; h++)
        for (int d = 0; d < hd; d++)
            out[(size_t)h * hd + d] = oc[(size_t)h * hd + d] / l[h];
}

void ob_ops_avx2(struct ob_ops *t)
{
    t->f16_put = f16_put_avx2;
    t->swiglu = swiglu_avx2;
    t->geglu = geglu_avx2;
    t->attn_group = attn_group_avx2;
}
