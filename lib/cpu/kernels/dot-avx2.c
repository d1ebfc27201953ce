/*
 * dot-avx2.c — the AVX2 (+FMA, F16C) level: activation quantisers, float-weight dot products,
 * and the table that also takes the quantised kernels of a8-avx2.c (Q4_0 .. Q8_0) and
 * kq-avx2.c (Q2_K .. Q6_K). Reference: lib/arith/dot.h and lib/arith/arith.h. Every function must
 * equal its reference bit for bit (tests/unit/kernels.c); speed is the only freedom.
 *
 * Why the results here are equal:
 *  - float dots keep the 32 partials in four __m256 (lane l of register g = partial 8g + l),
 *    updated with fmadd in increasing element order, then fold 16, 8, 4, 2, 1; two activation
 *    rows share each weight load, each row with its own partials;
 *  - F16 weights are converted with F16C (exact; a signalling NaN comes out quiet, which fmaf's
 *    own quietening of a NaN operand makes invisible), BF16 by a 16-bit shift (exact);
 *  - _mm256_round_ps(., nearest) is ob_rint for the |x| <= 128 it is used on.
 */
#include "cpu/kernels/avx2.h"

/* ---- activation quantisers -------------------------------------------------------------------- */

static inline __m256 absps(__m256 x)
{
    return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), x);
}

static inline float hmax(__m256 v)
{
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_movehdup_ps(m));
    return _mm_cvtss_f32(m);
}

/* 8 quants as int32 lanes (reference: ob_act_q) */
static inline __m256i quant8(__m256 x, __m256 is)
{
    __m256 v = _mm256_round_ps(_mm256_mul_ps(x, is), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    v = _mm256_and_ps(v, _mm256_cmp_ps(v, v, _CMP_ORD_Q));             /* NaN -> 0 */
    v = _mm256_min_ps(_mm256_max_ps(v, _mm256_set1_ps(-127.0f)), _mm256_set1_ps(127.0f));
    return _mm256_cvtps_epi32(v);
}

/* 32 int32 lanes (4 registers, in order) to 32 int8 */
static inline __m256i pack32(__m256i a, __m256i b, __m256i c, __m256i d)
{
    __m256i ab = _mm256_packs_epi32(a, b), cd = _mm256_packs_epi32(c, d);
    __m256i x = _mm256_packs_epi16(ab, cd);
    return _mm256_permutevar8x32_epi32(x, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

/* amax over n floats with the reference's semantics (NaN ignored: max_ps returns its second
 * operand when either is NaN, so the running maximum keeps the non-NaN value) */
static inline float amax_n(const float *x, int n)
{
    __m256 m = _mm256_setzero_ps();
    for (int i = 0; i < n; i += 8)
        m = _mm256_max_ps(absps(_mm256_loadu_ps(x + i)), m);
    return hmax(m);
}

static void actq_q8k(const float *x, void *qv, int n)
{
    struct ob_block_q8_k *y = qv;
    for (int b = 0; b < n / 256; b++, x += 256, y++) {
        float amax = amax_n(x, 256);
        float isf = amax > 0.0f ? 127.0f / amax : 0.0f;
        y->d = amax / 127.0f;
        __m256 is = _mm256_set1_ps(isf);
        for (int g = 0; g < 8; g++) {                 /* 32 values, 2 bsums */
            __m256i q0 = quant8(_mm256_loadu_ps(x + 32 * g), is);
            __m256i q1 = quant8(_mm256_loadu_ps(x + 32 * g + 8), is);
            __m256i q2 = quant8(_mm256_loadu_ps(x + 32 * g + 16), is);
            __m256i q3 = quant8(_mm256_loadu_ps(x + 32 * g + 24), is);
            _mm256_storeu_si256((__m256i *)(y->qs + 32 * g), pack32(q0, q1, q2, q3));
            y->bsums[2 * g] = (int16_t)hsum_i32(_mm256_add_epi32(q0, q1));
            y->bsums[2 * g + 1] = (int16_t)hsum_i32(_mm256_add_epi32(q2, q3));
        }
    }
}

static void actq_a8(const float *x, void *qv, int n)
{
    struct ob_act_a8 *y = qv;
    for (int b = 0; b < n / 32; b++, x += 32, y++) {
        float amax = amax_n(x, 32);
        float isf = amax > 0.0f ? 127.0f / amax : 0.0f;
        y->d = amax / 127.0f;
        __m256 is = _mm256_set1_ps(isf);
        __m256i q0 = quant8(_mm256_loadu_ps(x), is), q1 = quant8(_mm256_loadu_ps(x + 8), is);
        __m256i q2 = quant8(_mm256_loadu_ps(x + 16), is), q3 = quant8(_mm256_loadu_ps(x + 24), is);
        _mm256_storeu_si256((__m256i *)y->qs, pack32(q0, q1, q2, q3));
        y->sum = hsum_i32(_mm256_add_epi32(_mm256_add_epi32(q0, q1), _mm256_add_epi32(q2, q3)));
    }
}

static void actq_f32(const float *x, void *q, int n)
{
    memcpy(q, x, (size_t)n * sizeof(float));
}

/* ---- float weights ---------------------------------------------------------------------------- */

/* the reference's tail: the remaining elements i into partial i mod 32, in scalar fmaf */
AI float float_tail(__m256 p0, __m256 p1, __m256 p2, __m256 p3, int i, int n,
                               const float *w32, const uint16_t *w16, int bf, const float *x)
{
    if (i == n)
        return fold32(p0, p1, p2, p3);
    float p[32];
    _mm256_storeu_ps(p, p0);
    _mm256_storeu_ps(p + 8, p1);
    _mm256_storeu_ps(p + 16, p2);
    _mm256_storeu_ps(p + 24, p3);
    for (; i < n; i++) {
        float wi = w32 ? w32[i] : bf ? ob_bf16_to_f32(w16[i]) : ob_fp16_to_f32(w16[i]);
        p[i & 31] = fmaf(wi, x[i], p[i & 31]);
    }
    return ob_fold32(p);
}

static inline __m256 load_bf16(const uint16_t *w)
{
    __m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)w));
    return _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
}

/* kind: 0 f32, 1 f16, 2 bf16 */
static inline __m256 load_w(const void *w, int i, int kind)
{
    if (kind == 0)
        return _mm256_loadu_ps((const float *)w + i);
    if (kind == 1)
        return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const uint16_t *)w + i)));
    return load_bf16((const uint16_t *)w + i);
}

/* one row, or two sharing the weight loads (each row's partials as in the reference) */
AI void rows_float(const void *w, const void *a, size_t as, int nr, int k, float *out, int kind)
{
    int r = 0;
    for (; r + 2 <= nr; r += 2) {
        const float *x = (const float *)((const char *)a + r * as);
        const float *z = (const float *)((const char *)a + (r + 1) * as);
        __m256 p0 = _mm256_setzero_ps(), p1 = p0, p2 = p0, p3 = p0;
        __m256 q0 = p0, q1 = p0, q2 = p0, q3 = p0;
        int i = 0;
        for (; i + 32 <= k; i += 32) {
            __m256 w0 = load_w(w, i, kind), w1 = load_w(w, i + 8, kind);
            __m256 w2 = load_w(w, i + 16, kind), w3 = load_w(w, i + 24, kind);
            p0 = _mm256_fmadd_ps(w0, _mm256_loadu_ps(x + i), p0);
            p1 = _mm256_fmadd_ps(w1, _mm256_loadu_ps(x + i + 8), p1);
            p2 = _mm256_fmadd_ps(w2, _mm256_loadu_ps(x + i + 16), p2);
            p3 = _mm256_fmadd_ps(w3, _mm256_loadu_ps(x + i + 24), p3);
            q0 = _mm256_fmadd_ps(w0, _mm256_loadu_ps(z + i), q0);
            q1 = _mm256_fmadd_ps(w1, _mm256_loadu_ps(z + i + 8), q1);
            q2 = _mm256_fmadd_ps(w2, _mm256_loadu_ps(z + i + 16), q2);
            q3 = _mm256_fmadd_ps(w3, _mm256_loadu_ps(z + i + 24), q3);
        }
        out[r] = float_tail(p0, p1, p2, p3, i, k, kind == 0 ? (const float *)w : NULL,
                            (const uint16_t *)w, kind == 2, x);
        out[r + 1] = float_tail(q0, q1, q2, q3, i, k, kind == 0 ? (const float *)w : NULL,
                                (const uint16_t *)w, kind == 2, z);
    }
    for (; r < nr; r++) {
        const float *x = (const float *)((const char *)a + r * as);
        __m256 p0 = _mm256_setzero_ps(), p1 = p0, p2 = p0, p3 = p0;
        int i = 0;
        for (; i + 32 <= k; i += 32) {
            p0 = _mm256_fmadd_ps(load_w(w, i, kind), _mm256_loadu_ps(x + i), p0);
            p1 = _mm256_fmadd_ps(load_w(w, i + 8, kind), _mm256_loadu_ps(x + i + 8), p1);
            p2 = _mm256_fmadd_ps(load_w(w, i + 16, kind), _mm256_loadu_ps(x + i + 16), p2);
            p3 = _mm256_fmadd_ps(load_w(w, i + 24, kind), _mm256_loadu_ps(x + i + 24), p3);
        }
        out[r] = float_tail(p0, p1, p2, p3, i, k, kind == 0 ? (const float *)w : NULL,
                            (const uint16_t *)w, kind == 2, x);
    }
}

static void rows_f32(const void *w, const void *a, size_t as, int nr, int k, float *out)
{
    rows_float(w, a, as, nr, k, out, 0);
}

static void rows_f16(const void *w, const void *a, size_t as, int nr, int k, float *out)
{
    rows_float(w, a, as, nr, k, out, 1);
}

static void rows_bf16(const void *w, const void *a, size_t as, int nr, int k, float *out)
{
    rows_float(w, a, as, nr, k, out, 2);
}

void ob_kernels_avx2(struct ob_kernel_table *t)
{
    t->dot[OB_F32] = rows_f32;
    t->dot[OB_F16] = rows_f16;
    t->dot[OB_BF16] = rows_bf16;
    ob_kernels_avx2_a8(t);
    ob_kernels_avx2_kq(t);
    t->actq[OB_ACT_F32] = actq_f32;
    t->actq[OB_ACT_Q8K] = actq_q8k;
    t->actq[OB_ACT_A8] = actq_a8;
}
