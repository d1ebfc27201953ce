/*
 * ops-avx512.c — AVX-512 versions of swiglu, geglu and the attention head (exp and expsum
 * are the host's: lib/host/softmax-avx512.c).
 * References: ob_silu, ob_gelu, ob_attn_head (lib/arith/arith.h); each must be equal to them
 * bit for bit (tests/unit/ops.c). The reasoning is ops-avx2.c's, 16 lanes wide:
 *
 * exp: exp16 (lib/host/avx512.h), ob_expf's bits lane by lane; tails go through the same lanes
 * under a mask (first16).
 *
 * attention: two query heads of a group share every key and value load. A score is the
 * reference's 32-partial fmaf dot: two registers of 16 partials per key, folded by 16 and 8,
 * then 8 keys at a time transposed so that the steps 4, 2, 1 run lane-wise, key j in lane j.
 * Value sums run lane-wise over the head dimension with fmadd in increasing key order (the
 * reference's per-dimension fmaf chain), per chunk of OB_ATT_CHUNK keys from zero, then added
 * to the running sum; the chunk's sum of e and the final sums are scalar in its order. Head
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
 * Scores of up to two heads against keys [t0, t0 + m), m <= 8, head dimension 32 NI (NI > 0:
 * the query rows held in registers; NI = 0: any multiple of 32, from memory). Per key the 32
 * partials fold by 16 (the two registers) and 8 (the two halves) into 8 lanes; 8 keys
 * transposed, the steps 4, 2, 1 lane-wise.
 */
AI void scores8(const float *qa, const float *qb, const uint16_t *k, long kv_stride, int t0,
                int m, int hd, float scale, float *sa, float *sb, int NI)
{
    __m256i fa[8], fb[8];
    __m512 QA[8], QB[8];
    UNROLL
    for (int i = 0; i < 2 * NI; i++) {
        QA[i] = _mm512_loadu_ps(qa + 16 * i);
        QB[i] = qb ? _mm512_loadu_ps(qb + 16 * i) : QA[i];
    }
    for (int j = 0; j < 8; j++) {
        if (j >= m) {
            fa[j] = fb[j] = _mm256_setzero_si256();
            continue;
        }
        const uint16_t *kr = k + (long)(t0 + j) * kv_stride;
        /* the key 8 positions on (prefetching past the last key reads nothing) */
        _mm_prefetch((const char *)(kr + 8 * kv_stride), _MM_HINT_T0);
        if (hd > 64)
            _mm_prefetch((const char *)(kr + 8 * kv_stride + 64), _MM_HINT_T0);
        __m512 a0 = _mm512_setzero_ps(), a1 = a0, b0 = a0, b1 = a0;
        if (NI) {
            UNROLL
            for (int i = 0; i < NI; i++) {
                __m512 k0 = load_h16(kr + 32 * i), k1 = load_h16(kr + 32 * i + 16);
                a0 = _mm512_fmadd_ps(QA[2 * i], k0, a0);
                a1 = _mm512_fmadd_ps(QA[2 * i + 1], k1, a1);
                if (qb) {
                    b0 = _mm512_fmadd_ps(QB[2 * i], k0, b0);
                    b1 = _mm512_fmadd_ps(QB[2 * i + 1], k1, b1);
                }
            }
        } else {
            for (int i = 0; i < hd; i += 32) {
                __m512 k0 = load_h16(kr + i), k1 = load_h16(kr + i + 16);
                a0 = _mm512_fmadd_ps(_mm512_loadu_ps(qa + i), k0, a0);
                a1 = _mm512_fmadd_ps(_mm512_loadu_ps(qa + i + 16), k1, a1);
                if (qb) {
                    b0 = _mm512_fmadd_ps(_mm512_loadu_ps(qb + i), k0, b0);
                    b1 = _mm512_fmadd_ps(_mm512_loadu_ps(qb + i + 16), k1, b1);
                }
            }
        }
        __m512 a = _mm512_add_ps(a0, a1), b = _mm512_add_ps(b0, b1);
        fa[j] = _mm256_castps_si256(_mm256_add_ps(_mm512_castps512_ps256(a), _mm512_extractf32x8_ps(a, 1)));
        fb[j] = _mm256_castps_si256(_mm256_add_ps(_mm512_castps512_ps256(b), _mm512_extractf32x8_ps(b, 1)));
    }
    const __m256 sc = _mm256_set1_ps(scale);
    for (int h = 0; h < (qb ? 2 : 1); h++) {
        __m256i *T = h ? fb : fa;
        tr8x8_32(T);
        __m256 e = _mm256_add_ps(_mm256_add_ps(_mm256_castsi256_ps(T[0]), _mm256_castsi256_ps(T[4])),
                                 _mm256_add_ps(_mm256_castsi256_ps(T[2]), _mm256_castsi256_ps(T[6])));
        __m256 o = _mm256_add_ps(_mm256_add_ps(_mm256_castsi256_ps(T[1]), _mm256_castsi256_ps(T[5])),
                                 _mm256_add_ps(_mm256_castsi256_ps(T[3]), _mm256_castsi256_ps(T[7])));
        _mm256_mask_storeu_ps((h ? sb : sa) + t0, mask8(m), _mm256_mul_ps(_mm256_add_ps(e, o), sc));
    }
}

/* all n scores of up to two heads, the query rows in registers where hd <= 128 */
AI void scores_all(const float *qa, const float *qb, const uint16_t *k, long kv_stride, int n,
                   int hd, float scale, float *sa, float *sb, int NI)
{
    for (int t0 = 0; t0 < n; t0 += 8)
        scores8(qa, qb, k, kv_stride, t0, n - t0 < 8 ? n - t0 : 8, hd, scale, sa, sb, NI);
}

/* the value sums of keys [c0, c1) for dimensions [d0, d0 + 16 NW): fmadd chains from zero in
 * key order, then added to the running sums oa, ob. One pass over each value row (NW up to 8:
 * the rows of a position lie kv_stride halfs apart, often 2 KB, and a second pass over a chunk
 * would find them evicted from L1 by the set conflicts of that stride). */
AI void values(const float *sa, const float *sb, const uint16_t *v, long kv_stride, int c0,
               int c1, int d0, float *oa, float *ob, float *lca, float *lcb, int NW)
{
    float la = 0.0f, lb = 0.0f;
    __m512 a[8], b[8];
    UNROLL
    for (int i = 0; i < NW; i++)
        a[i] = b[i] = _mm512_setzero_ps();
    for (int t = c0; t < c1; t++) {
        const uint16_t *vr = v + (long)t * kv_stride + d0;
        _mm_prefetch((const char *)(vr + 8 * kv_stride), _MM_HINT_T0);
        if (NW > 4)
            _mm_prefetch((const char *)(vr + 8 * kv_stride + 64), _MM_HINT_T0);
        __m512 ea = _mm512_set1_ps(sa[t]);
        __m512 eb = sb ? _mm512_set1_ps(sb[t]) : ea;
        /* the chunk's sums of e in key order, riding along (a scalar chain of adds) */
        if (lca) {
            la = la + sa[t];
            if (sb)
                lb = lb + sb[t];
        }
        UNROLL
        for (int i = 0; i < NW; i++) {
            __m512 vv = load_h16(vr + 16 * i);
            a[i] = _mm512_fmadd_ps(ea, vv, a[i]);
            if (sb)
                b[i] = _mm512_fmadd_ps(eb, vv, b[i]);
        }
    }
    if (lca) {
        *lca = la;
        *lcb = lb;
    }
    UNROLL
    for (int i = 0; i < NW; i++) {
        _mm512_storeu_ps(oa + d0 + 16 * i, _mm512_add_ps(_mm512_loadu_ps(oa + d0 + 16 * i), a[i]));
        if (sb)
            _mm512_storeu_ps(ob + d0 + 16 * i, _mm512_add_ps(_mm512_loadu_ps(ob + d0 + 16 * i), b[i]));
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

/*
 * Up to two heads sharing each key and value load. The reference per head: scores, max,
 * e = exp(s - max), per chunk of OB_ATT_CHUNK keys the sum of e and the fmaf chains
 * o_c[d] += e_t v_t[d] in key order, then l and o summed over chunks in order, out = o / l.
 */
static void attn_pair(const float *qa, const float *qb, const uint16_t *k, const uint16_t *v,
                      long kv_stride, int n, int hd, float scale, float *sa, float *sb,
                      float *oa, float *ob, float *outa, float *outb)
{
    switch (hd) {
    case 32: scores_all(qa, qb, k, kv_stride, n, hd, scale, sa, sb, 1); break;
    case 64: scores_all(qa, qb, k, kv_stride, n, hd, scale, sa, sb, 2); break;
    case 96: scores_all(qa, qb, k, kv_stride, n, hd, scale, sa, sb, 3); break;
    case 128: scores_all(qa, qb, k, kv_stride, n, hd, scale, sa, sb, 4); break;
    default: scores_all(qa, qb, k, kv_stride, n, hd, scale, sa, sb, 0); break;
    }
    float la = 0.0f, lb = 0.0f;
    for (int h = 0; h < (qb ? 2 : 1); h++) {
        float *s = h ? sb : sa, m = max_n(s, n);
        const __m512 mv = _mm512_set1_ps(m);
        int t = 0;
        for (; t + 16 <= n; t += 16)
            _mm512_storeu_ps(s + t, exp16(_mm512_sub_ps(_mm512_loadu_ps(s + t), mv)));
        if (t < n) {
            __mmask16 km = first16((size_t)(n - t));
            _mm512_mask_storeu_ps(s + t, km, exp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(km, s + t), mv)));
        }
    }
    for (int d = 0; d < hd; d++)
        oa[d] = ob[d] = 0.0f;
    for (int c0 = 0; c0 < n; c0 += OB_ATT_CHUNK) {
        int c1 = c0 + OB_ATT_CHUNK < n ? c0 + OB_ATT_CHUNK : n;
        float lca = 0.0f, lcb = 0.0f;
        for (int d0 = 0; d0 < hd; d0 += 128) {
            float *pa = d0 ? NULL : &lca, *pb = &lcb;      /* the sums in the first pass */
            switch (hd - d0 < 128 ? hd - d0 : 128) {
            case 32: values(sa, qb ? sb : NULL, v, kv_stride, c0, c1, d0, oa, ob, pa, pb, 2); break;
            case 64: values(sa, qb ? sb : NULL, v, kv_stride, c0, c1, d0, oa, ob, pa, pb, 4); break;
            case 96: values(sa, qb ? sb : NULL, v, kv_stride, c0, c1, d0, oa, ob, pa, pb, 6); break;
            default: values(sa, qb ? sb : NULL, v, kv_stride, c0, c1, d0, oa, ob, pa, pb, 8); break;
            }
        }
        la = la + lca;
        lb = lb + lcb;
    }
    for (int d = 0; d < hd; d++)
        outa[d] = oa[d] / la;
    if (qb)
        for (int d = 0; d < hd; d++)
            outb[d] = ob[d] / lb;
}

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
    for (int h = 0; h < nq; h += 2) {
        bool two = h + 1 < nq;
        attn_pair(q + (size_t)h * hd, two ? q + (size_t)(h + 1) * hd : NULL, k, v, kv_stride, n,
                  hd, scale, s + (size_t)h * n, two ? s + (size_t)(h + 1) * n : NULL, oc,
                  oc + hd, out + (size_t)h * hd, two ? out + (size_t)(h + 1) * hd : NULL);
    }
    _mm256_zeroupper();
}

void ob_ops_avx512(struct ob_ops *t)
{
    t->swiglu = swiglu_avx512;
    t->geglu = geglu_avx512;
    t->attn_group = attn_group_avx512;
}
