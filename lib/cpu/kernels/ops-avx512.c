/*
 * ops-avx512.c — AVX-512 versions of swiglu, geglu and the attention head (exp and expsum
 * are the host's: lib/host/softmax-avx512.c).
 * References: ob_silu, ob_gelu, ob_attn_head (lib/arith/arith.h); each must be equal to them
 * bit for bit (tests/unit/ops.c). The reasoning is ops-avx2.c's, 16 lanes wide:
 *
 * exp: exp16 (lib/host/avx512.h), ob_expf's bits lane by lane; tails go through the same lanes
 * under a mask (first16).
 *
 * attention: the query heads of a group share the key and value loads, two heads a pass over
 * the keys for the scores and up to four for the value sums. A score is the reference's
 * 32-partial fmaf dot: two registers of 16 partials per key, added (the fold by 16), then 16
 * keys at a time folded by 8, 4, 2 and 1 with two keys' registers taken apart and together
 * at each step, so that one addition serves both (fold_by8 .. fold_by1). Value sums run
 * lane-wise over the head dimension with fmadd in increasing key order (the reference's
 * per-dimension fmaf chain), per chunk of OB_ATT_CHUNK keys from zero, then added to the
 * running sum; the chunk's sum of e and the final sums are scalar in its order. Head
 * dimensions that are not multiples of 32 (or above 256) take the reference.
 */
#include <immintrin.h>
#include <math.h>
#include <stdbool.h>

#include "arith/arith.h"
#include "cpu/kernels/avx512.h"
#include "cpu/kernels/ops.h"
#include "host/avx512.h"

AI __m512 swiglu16(__m512 x, __m512 u)
{
    const __m512 one = _mm512_set1_ps(1.0f);
    __m512 e = exp16(_mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(x),
                                                          _mm512_set1_epi32((int)0x80000000u))));
    return _mm512_mul_ps(_mm512_div_ps(x, _mm512_add_ps(one, e)), u);
}

/* ob_gelu lane by lane, as gelu8 in ops-avx2.c */
AI __m512 gelu16(__m512 x)
{
    const __m512 c_hi = _mm512_set1_ps(-1.59576917f), c_lo = _mm512_set1_ps(4.53406805e-08f);
    const __m512 k_hi = _mm512_set1_ps(0.0447149985f), k_lo = _mm512_set1_ps(1.54614443e-09f);
    const __m512 one = _mm512_set1_ps(1.0f);
    __m512 t = _mm512_mul_ps(x, x), tl = _mm512_fmsub_ps(x, x, t);
    __m512 m = _mm512_mul_ps(k_hi, t);
    __m512 ml = _mm512_add_ps(_mm512_fmsub_ps(k_hi, t, m), _mm512_fmadd_ps(k_hi, tl, _mm512_mul_ps(k_lo, t)));
    __m512 p = _mm512_add_ps(one, m), pb = _mm512_sub_ps(p, one);
    __m512 pl = _mm512_add_ps(_mm512_add_ps(_mm512_sub_ps(one, _mm512_sub_ps(p, pb)),
                                            _mm512_sub_ps(m, pb)), ml);
    __m512 z = _mm512_mul_ps(x, p), zl = _mm512_add_ps(_mm512_fmsub_ps(x, p, z), _mm512_mul_ps(x, pl));
    __m512 a = _mm512_mul_ps(c_hi, z);
    __m512 al = _mm512_add_ps(_mm512_fmsub_ps(c_hi, z, a), _mm512_fmadd_ps(c_hi, zl, _mm512_mul_ps(c_lo, z)));
    __m512 e = exp16(a);
    e = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(e, _mm512_set1_ps(INFINITY), _CMP_NEQ_UQ), e,
                             _mm512_fmadd_ps(e, al, e));
    __m512 g = _mm512_div_ps(x, _mm512_add_ps(one, e));
    g = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, _mm512_set1_ps(1e4f), _CMP_GT_OQ), g, x);
    return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, _mm512_set1_ps(-1e4f), _CMP_LT_OQ), g,
                                _mm512_set1_ps(-0.0f));
}

static void geglu_avx512(float *g, const float *u, size_t n)
{
    size_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm512_storeu_ps(g + i, _mm512_mul_ps(gelu16(_mm512_loadu_ps(g + i)), _mm512_loadu_ps(u + i)));
    if (i < n) {
        __mmask16 k = first16(n - i);
        _mm512_mask_storeu_ps(g + i, k, _mm512_mul_ps(gelu16(_mm512_maskz_loadu_ps(k, g + i)),
                                                      _mm512_maskz_loadu_ps(k, u + i)));
    }
    _mm256_zeroupper();
}

static void swiglu_avx512(float *g, const float *u, size_t n)
{
    size_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm512_storeu_ps(g + i, swiglu16(_mm512_loadu_ps(g + i), _mm512_loadu_ps(u + i)));
    if (i < n) {
        __mmask16 k = first16(n - i);
        _mm512_mask_storeu_ps(g + i, k, swiglu16(_mm512_maskz_loadu_ps(k, g + i),
                                                 _mm512_maskz_loadu_ps(k, u + i)));
    }
    _mm256_zeroupper();
}

AI __m512 load_h16(const uint16_t *p)
{
    return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p));
}

/*
 * The reference's fold of one key's 32 score partials, 16 keys at once. A register of key j
 * starts with p[l] + p[l + 16] in lane l (the first step, a0 + a1); each further step takes
 * two registers apart and together so that one addition does that step for the keys of both:
 * + 8 (two keys a register), + 4 (four), + 2 (eight), + 1 (sixteen), the lower partial always
 * the first operand, as in ob_fold32. Key j ends in lane 4 (j & 3) + j / 4 (score_order).
 */
AI __m512 fold_by8(__m512 a, __m512 b)       /* 16 lanes of a key each -> 8 of 2 keys each */
{
    return _mm512_add_ps(_mm512_shuffle_f32x4(a, b, 0x44), _mm512_shuffle_f32x4(a, b, 0xee));
}

AI __m512 fold_by4(__m512 a, __m512 b)       /* 8 lanes -> 4, 128-bit lane i: key i */
{
    return _mm512_add_ps(_mm512_shuffle_f32x4(a, b, 0x88), _mm512_shuffle_f32x4(a, b, 0xdd));
}

AI __m512 fold_by2(__m512 a, __m512 b)       /* 4 lanes -> 2: keys i and 4 + i in lane i */
{
    __m512d x = _mm512_castps_pd(a), y = _mm512_castps_pd(b);
    return _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(x, y)),
                         _mm512_castpd_ps(_mm512_unpackhi_pd(x, y)));
}

AI __m512 fold_by1(__m512 a, __m512 b)       /* 2 lanes -> 1: lane 4 i + r holds key 4 r + i */
{
    return _mm512_add_ps(_mm512_shuffle_ps(a, b, 0x88), _mm512_shuffle_ps(a, b, 0xdd));
}

/* key j's score from lane 4 (j & 3) + j / 4 into lane j */
AI __m512 score_order(__m512 e)
{
    const __m512i idx = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
    return _mm512_permutexvar_ps(idx, e);
}

/* dimensions [i, i + 32) of one key into the partials a0, a1 of M query rows (Q: the rows in
 * registers, where qr) */
AI void key_slice(const float *const *q, const __m512 Q[2][8], bool qr, const uint16_t *kr,
                  int i, __m512 *a0, __m512 *a1, int M)
{
    __m512 k0 = load_h16(kr + i), k1 = load_h16(kr + i + 16);
    UNROLL
    for (int h = 0; h < M; h++) {
        a0[h] = _mm512_fmadd_ps(qr ? Q[h][i / 16] : _mm512_loadu_ps(q[h] + i), k0, a0[h]);
        a1[h] = _mm512_fmadd_ps(qr ? Q[h][i / 16 + 1] : _mm512_loadu_ps(q[h] + i + 16), k1,
                                a1[h]);
    }
}

/*
 * Scores of M (1 or 2) query rows against keys [t0, t0 + m), m <= 16, head dimension hd (a
 * multiple of 32): per key two registers of 16 fmadd partials from zero in dimension order
 * (the query rows Q in registers where qr: up to 128 dimensions), the key's halfs converted
 * once for both rows; the fold as above, each step as soon as its two registers exist, so
 * that few are live.
 */
AI void scores16(const float *const *q, const __m512 Q[2][8], bool qr, const uint16_t *k,
                 long kv_stride, int t0, int m, int hd, float scale, float *const *s, int M)
{
    __m512 B[2][2], C[2][2], D[2][2];
    UNROLL
    for (int jp = 0; jp < 8; jp++) {
        __m512 A[2][2];
        UNROLL
        for (int u = 0; u < 2; u++) {
            int j = 2 * jp + u;
            __m512 a0[2], a1[2];
            UNROLL
            for (int h = 0; h < M; h++)
                a0[h] = a1[h] = _mm512_setzero_ps();
            if (j < m) {
                const uint16_t *kr = k + (long)(t0 + j) * kv_stride;
                /* the key 8 positions on (prefetching past the last key reads nothing) */
                _mm_prefetch((const char *)(kr + 8 * kv_stride), _MM_HINT_T0);
                if (hd > 64)
                    _mm_prefetch((const char *)(kr + 8 * kv_stride + 64), _MM_HINT_T0);
                /* unrolled for the common head dimensions (constants here), a plain loop
                 * for the others (the query then from memory) */
                if (__builtin_constant_p(hd))
                    UNROLL
                    for (int i = 0; i < hd; i += 32)
                        key_slice(q, Q, qr, kr, i, a0, a1, M);
                else
#pragma GCC unroll 1
                    for (int i = 0; i < hd; i += 32)
                        key_slice(q, Q, false, kr, i, a0, a1, M);
            }
            UNROLL
            for (int h = 0; h < M; h++)
                A[h][u] = _mm512_add_ps(a0[h], a1[h]);
        }
        UNROLL
        for (int h = 0; h < M; h++) {
            B[h][jp & 1] = fold_by8(A[h][0], A[h][1]);
            if (jp & 1)
                C[h][(jp >> 1) & 1] = fold_by4(B[h][0], B[h][1]);
            if ((jp & 3) == 3)
                D[h][jp >> 2] = fold_by2(C[h][0], C[h][1]);
        }
    }
    const __m512 sc = _mm512_set1_ps(scale);
    UNROLL
    for (int h = 0; h < M; h++)
        _mm512_mask_storeu_ps(s[h] + t0, first16((size_t)m),
                              _mm512_mul_ps(score_order(fold_by1(D[h][0], D[h][1])), sc));
}

/* all n scores of query rows q[0 .. M - 1] into s[0 .. M - 1] */
AI void scores_rows(const float *const *q, const uint16_t *k, long kv_stride, int n, int hd,
                    float scale, float *const *s, int M)
{
    __m512 Q[2][8];
    const bool qr = __builtin_constant_p(hd) && hd <= 128;   /* the query rows in registers */
    if (qr)
        UNROLL
        for (int h = 0; h < M; h++)
            UNROLL
            for (int i = 0; i < hd / 16; i++)
                Q[h][i] = _mm512_loadu_ps(q[h] + 16 * i);
    for (int t0 = 0; t0 < n; t0 += 16)
        scores16(q, Q, qr, k, kv_stride, t0, n - t0 < 16 ? n - t0 : 16, hd, scale, s, M);
}

/*
 * The value sums of keys [c0, c1) for dimensions [d0, d0 + 16 NW) of M heads (weights e[h]):
 * fmadd chains from zero in key order, then added to the running sums o[h]; with lc, the
 * chunk's sums of e in key order (scalar chains, one a head). Each value row is read once
 * for all M heads (M NW <= 16 registers of sums).
 */
AI void values(const float *const *e, const uint16_t *v, long kv_stride, int c0, int c1,
               int d0, float *const *o, float *lc, int M, int NW)
{
    float l[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    __m512 a[4][8];
    UNROLL
    for (int h = 0; h < M; h++)
        UNROLL
        for (int i = 0; i < NW; i++)
            a[h][i] = _mm512_setzero_ps();
    for (int t = c0; t < c1; t++) {
        const uint16_t *vr = v + (long)t * kv_stride + d0;
        _mm_prefetch((const char *)(vr + 8 * kv_stride), _MM_HINT_T0);
        if (NW > 4)
            _mm_prefetch((const char *)(vr + 8 * kv_stride + 64), _MM_HINT_T0);
        __m512 ev[4];
        UNROLL
        for (int h = 0; h < M; h++) {
            ev[h] = _mm512_set1_ps(e[h][t]);
            if (lc)
                l[h] = l[h] + e[h][t];
        }
        UNROLL
        for (int i = 0; i < NW; i++) {
            __m512 vv = load_h16(vr + 16 * i);
            UNROLL
            for (int h = 0; h < M; h++)
                a[h][i] = _mm512_fmadd_ps(ev[h], vv, a[h][i]);
        }
    }
    UNROLL
    for (int h = 0; h < M; h++) {
        if (lc)
            lc[h] = l[h];
        UNROLL
        for (int i = 0; i < NW; i++) {
            float *p = o[h] + d0 + 16 * i;
            _mm512_storeu_ps(p, _mm512_add_ps(_mm512_loadu_ps(p), a[h][i]));
        }
    }
}

/*
 * ob_max_f32: every lane starts from s[0] and keeps its maximum with vmaxps(x, m), which
 * returns m when x is a NaN, as the reference's comparison skips it (and a NaN s[0] stays in
 * every lane, as in the reference). The order differs from the reference's only between equal
 * values, i.e. in the sign of a zero maximum, and s - m then gives the same bits whatever that
 * sign is, but for s = -0, where exp(-0) = exp(+0) = 1.
 */
AI float max_n(const float *s, int n)
{
    __m512 m = _mm512_set1_ps(s[0]);
    int t = 0;
    for (; t + 16 <= n; t += 16)
        m = _mm512_max_ps(_mm512_loadu_ps(s + t), m);
    if (t < n) {
        __mmask16 k = first16((size_t)(n - t));
        m = _mm512_mask_max_ps(m, k, _mm512_maskz_loadu_ps(k, s + t), m);
    }
    __m256 h = _mm256_max_ps(_mm512_castps512_ps256(m), _mm512_extractf32x8_ps(m, 1));
    __m128 q = _mm_max_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
    q = _mm_max_ps(q, _mm_movehl_ps(q, q));
    q = _mm_max_ss(q, _mm_movehdup_ps(q));
    return _mm_cvtss_f32(q);
}

/* the weights e = exp(s - max) of the n scores at s, in place */
AI void weights(float *s, int n)
{
    const __m512 mv = _mm512_set1_ps(max_n(s, n));
    int t = 0;
    for (; t + 16 <= n; t += 16)
        _mm512_storeu_ps(s + t, exp16(_mm512_sub_ps(_mm512_loadu_ps(s + t), mv)));
    if (t < n) {
        __mmask16 km = first16((size_t)(n - t));
        _mm512_mask_storeu_ps(s + t, km, exp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(km, s + t), mv)));
    }
}

/* the scores of the M query rows q[0 .. M - 1], the head dimension a constant where it is
 * common */
static void scores_pass(const float *const *q, const uint16_t *k, long kv_stride, int n, int hd,
                        float scale, float *const *s, int M)
{
#define SCORES(HD)                                                                        \
    (M == 2 ? scores_rows(q, k, kv_stride, n, HD, scale, s, 2)                            \
            : scores_rows(q, k, kv_stride, n, HD, scale, s, 1))
    switch (hd) {
    case 64: SCORES(64); break;
    case 96: SCORES(96); break;
    case 128: SCORES(128); break;
    case 256: SCORES(256); break;
    default: SCORES(hd); break;
    }
#undef SCORES
}

/* the value sums of one chunk for M heads, in passes of at most 128 dimensions */
static void values_pass(const float *const *e, const uint16_t *v, long kv_stride, int c0,
                        int c1, int hd, float *const *o, float *lc, int M)
{
    for (int d0 = 0; d0 < hd; d0 += 128) {
        float *l = d0 ? NULL : lc;               /* the sums in the first pass */
        switch ((hd - d0 < 128 ? hd - d0 : 128) / 32 * 4 + M - 1) {
        case 4: values(e, v, kv_stride, c0, c1, d0, o, l, 1, 2); break;
        case 5: values(e, v, kv_stride, c0, c1, d0, o, l, 2, 2); break;
        case 6: values(e, v, kv_stride, c0, c1, d0, o, l, 3, 2); break;
        case 7: values(e, v, kv_stride, c0, c1, d0, o, l, 4, 2); break;
        case 8: values(e, v, kv_stride, c0, c1, d0, o, l, 1, 4); break;
        case 9: values(e, v, kv_stride, c0, c1, d0, o, l, 2, 4); break;
        case 10: values(e, v, kv_stride, c0, c1, d0, o, l, 3, 4); break;
        case 11: values(e, v, kv_stride, c0, c1, d0, o, l, 4, 4); break;
        case 12: values(e, v, kv_stride, c0, c1, d0, o, l, 1, 6); break;
        case 13: values(e, v, kv_stride, c0, c1, d0, o, l, 2, 6); break;
        case 16: values(e, v, kv_stride, c0, c1, d0, o, l, 1, 8); break;
        default: values(e, v, kv_stride, c0, c1, d0, o, l, 2, 8); break;
        }
    }
}

/*
 * The query heads of a group: scores two heads a pass over the keys, then per chunk of
 * OB_ATT_CHUNK keys the value sums of as many heads a pass as 16 registers of sums hold (four
 * of 64 dimensions, two of 128). The reference per head: scores, max, e = exp(s - max), per
 * chunk the sum of e and the fmaf chains o_c[d] += e_t v_t[d] in key order, then l and o
 * summed over chunks in order, out = o / l.
 */
static void attn_group_avx512(const float *q, int nq, const uint16_t *k, const uint16_t *v,
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
    for (int h = 0; h < nq; h++) {
        weights(s + (size_t)h * n, n);
        l[h] = 0.0f;
    }
    for (size_t d = 0; d < (size_t)nq * hd; d++)
        oc[d] = 0.0f;
    int per = hd <= 64 ? 4 : 2;                  /* heads a values pass */
    for (int c0 = 0; c0 < n; c0 += OB_ATT_CHUNK) {
        int c1 = c0 + OB_ATT_CHUNK < n ? c0 + OB_ATT_CHUNK : n;
        for (int h = 0; h < nq; h += per) {
            int M = nq - h < per ? nq - h : per;
            const float *eh[4];
            float *oh[4], lc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
            for (int i = 0; i < M; i++) {
                eh[i] = s + (size_t)(h + i) * n;
                oh[i] = oc + (size_t)(h + i) * hd;
            }
            values_pass(eh, v, kv_stride, c0, c1, hd, oh, lc, M);
            for (int i = 0; i < M; i++)
                l[h + i] = l[h + i] + lc[i];
        }
    }
    for (int h = 0; h < nq; h++)
        for (int d = 0; d < hd; d++)
            out[(size_t)h * hd + d] = oc[(size_t)h * hd + d] / l[h];
    _mm256_zeroupper();
}

void ob_ops_avx512(struct ob_ops *t)
{
    t->swiglu = swiglu_avx512;
    t->geglu = geglu_avx512;
    t->attn_group = attn_group_avx512;
}
