/*
 * dot-avx2.c — AVX2 (+FMA, F16C) versions of the dot products and activation quantisers.
 * Reference: lib/kernels/dot.h and lib/arith.h. Every function here must equal its reference
 * bit for bit (tests/unit/kernels.c); speed is the only freedom.
 *
 * Why the results are equal:
 *  - integer sums are exact, so any SIMD grouping gives the reference isum/msum. Every
 *    _mm256_maddubs_epi16 below multiplies an unsigned value of at most 63 (or the |w| <= 128
 *    of Q8_0 with the sign moved onto the activation) by an activation in [-127, 127], so its
 *    int16 pair sums stay below 2 * 128 * 127 = 32512 and never saturate;
 *  - epilogues use the reference's operations in the reference's order, lane-wise; int32 ->
 *    float conversion (cvtdq2ps) rounds to nearest even like the C cast;
 *  - the 8 block partials of a row are one __m256 whose lane j is partial j, so 8 consecutive
 *    blocks starting at a multiple of 8 add lane-wise into it; the fold is the reference's
 *    4, 2, 1 order;
 *  - float dots keep the 32 partials in four __m256 (lane l of register g = partial 8g + l),
 *    updated with fmadd in increasing element order, then fold 16, 8, 4, 2, 1;
 *  - _mm256_round_ps(., nearest) is ob_rint for the |x| <= 128 it is used on.
 */
#include <immintrin.h>
#include <string.h>

#include "kernels.h"

/* ---- helpers -------------------------------------------------------------------------------- */

static inline int hsum_i32(__m256i v)
{
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(1, 0, 3, 2)));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(2, 3, 0, 1)));
    return _mm_cvtsi128_si32(s);
}

/* ob_fold8 on the 8 lanes: (l + l+4), then (l + l+2), then lane 0 + lane 1 */
static inline float fold8(__m256 p)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(p), _mm256_extractf128_ps(p, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* ob_fold32 on four registers of 8 partials (register g lane l = partial 8g + l) */
static inline float fold32(__m256 p0, __m256 p1, __m256 p2, __m256 p3)
{
    __m256 q0 = _mm256_add_ps(p0, p2);        /* s = 16 */
    __m256 q1 = _mm256_add_ps(p1, p3);
    return fold8(_mm256_add_ps(q0, q1));      /* s = 8, then 4, 2, 1 */
}

/* 8 int32 sums, one per register: lane j of the result = sum of all lanes of v[j] */
static inline __m256i hsum8x8(const __m256i v[8])
{
    __m256i a = _mm256_hadd_epi32(v[0], v[1]);
    __m256i b = _mm256_hadd_epi32(v[2], v[3]);
    __m256i c = _mm256_hadd_epi32(v[4], v[5]);
    __m256i d = _mm256_hadd_epi32(v[6], v[7]);
    a = _mm256_hadd_epi32(a, b);              /* 128-bit lanes: v0 v1 v2 v3 partials */
    c = _mm256_hadd_epi32(c, d);
    __m256i lo = _mm256_permute2x128_si256(a, c, 0x20);
    __m256i hi = _mm256_permute2x128_si256(a, c, 0x31);
    return _mm256_add_epi32(lo, hi);
}

/* mask with lanes j < n set */
static inline __m256 lanes_below(int n)
{
    static const int32_t idx[8] = {0, 1, 2, 3, 4, 5, 6, 7};
    return _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32(n),
                                                   _mm256_loadu_si256((const __m256i *)idx)));
}

/* 32 nibbles of a Q4 block as bytes: values 0..15 = low nibbles, 16..31 = high nibbles */
static inline __m256i unpack_q4(const uint8_t *qs)
{
    __m128i x = _mm_loadu_si128((const __m128i *)qs);
    __m128i m = _mm_set1_epi8(15);
    return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(x, 4), m), _mm_and_si128(x, m));
}

/* bit j of the 32-bit qh as byte j: 16 if set, 0 if clear */
static inline __m256i unpack_q5h(const uint8_t *qh)
{
    uint32_t bits;
    memcpy(&bits, qh, 4);
    __m256i v = _mm256_set1_epi32((int)bits);
    const __m256i shuf = _mm256_set_epi64x(0x0303030303030303ll, 0x0202020202020202ll,
                                           0x0101010101010101ll, 0x0000000000000000ll);
    v = _mm256_shuffle_epi8(v, shuf);          /* byte j = byte j/8 of bits */
    const __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201ull);
    v = _mm256_cmpeq_epi8(_mm256_and_si256(v, bit), bit);
    return _mm256_and_si256(v, _mm256_set1_epi8(16));
}

static inline __m256i dot_u8s8(__m256i u, __m256i s)     /* 8 int32 of pair sums */
{
    return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
}

static inline __m256 fp16x8(const uint16_t *h, size_t stride_halfs)
{
    uint16_t t[8];
    for (int i = 0; i < 8; i++)
        t[i] = h[i * stride_halfs];
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)t));
}

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
static inline float float_tail(__m256 p0, __m256 p1, __m256 p2, __m256 p3, int i, int n,
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

static inline void rows_float(const void *w, const void *a, size_t as, int nr, int k, float *out,
                              int kind)
{
    for (int r = 0; r < nr; r++) {
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

/* ---- 32-value formats with A8 activations ------------------------------------------------- */

/*
 * The blocks of a row go 8 at a time: 8 int32 isums (lane j = block b0 + j), then the epilogue
 * lane-wise, added to the partials register (lane j = partial j). kind selects the format.
 */
enum { K_Q4_0, K_Q4_1, K_Q5_0, K_Q5_1, K_Q8_0 };

static inline size_t blk_bytes(int kind)
{
    switch (kind) {
    case K_Q4_0: return sizeof(struct ob_block_q4_0);
    case K_Q4_1: return sizeof(struct ob_block_q4_1);
    case K_Q5_0: return sizeof(struct ob_block_q5_0);
    case K_Q5_1: return sizeof(struct ob_block_q5_1);
    }
    return sizeof(struct ob_block_q8_0);
}

/* weight block as 32 bytes (unsigned values, or the |w| of Q8_0) and, for Q8_0, the signs */
static inline __m256i load_w32(const uint8_t *blk, int kind)
{
    switch (kind) {
    case K_Q4_0: return unpack_q4(((const struct ob_block_q4_0 *)blk)->qs);
    case K_Q4_1: return unpack_q4(((const struct ob_block_q4_1 *)blk)->qs);
    case K_Q5_0: {
        const struct ob_block_q5_0 *b = (const void *)blk;
        return _mm256_or_si256(unpack_q4(b->qs), unpack_q5h(b->qh));
    }
    case K_Q5_1: {
        const struct ob_block_q5_1 *b = (const void *)blk;
        return _mm256_or_si256(unpack_q4(b->qs), unpack_q5h(b->qh));
    }
    }
    return _mm256_loadu_si256((const __m256i *)((const struct ob_block_q8_0 *)blk)->qs);
}

static inline void rows_a8(const void *w, const void *a, size_t as, int nr, int k, float *out,
                           int kind)
{
    const int nb = k / 32;
    const size_t bb = blk_bytes(kind);
    const uint8_t *wb = w;
    __m256 part[OB_MAXR];
    for (int r = 0; r < nr; r++)
        part[r] = _mm256_setzero_ps();
    for (int b0 = 0; b0 < nb; b0 += 8) {
        int m = nb - b0 < 8 ? nb - b0 : 8;
        __m256i isum[OB_MAXR][8];
        for (int j = 0; j < 8; j++) {
            if (j >= m) {
                for (int r = 0; r < nr; r++)
                    isum[r][j] = _mm256_setzero_si256();
                continue;
            }
            __m256i wv = load_w32(wb + (size_t)(b0 + j) * bb, kind);
            __m256i wabs = kind == K_Q8_0 ? _mm256_sign_epi8(wv, wv) : wv;
            for (int r = 0; r < nr; r++) {
                const struct ob_act_a8 *ab = (const struct ob_act_a8 *)((const char *)a + r * as) + b0 + j;
                __m256i av = _mm256_loadu_si256((const __m256i *)ab->qs);
                if (kind == K_Q8_0)
                    av = _mm256_sign_epi8(av, wv);
                isum[r][j] = dot_u8s8(wabs, av);
            }
        }
        /* per-block scales of the weights, lane j = block b0 + j */
        __m256 dw, mw = _mm256_setzero_ps();
        {
            float d[8] = {0}, mm[8] = {0};
            for (int j = 0; j < m; j++) {
                const uint8_t *blk = wb + (size_t)(b0 + j) * bb;
                uint16_t h[2];
                memcpy(h, blk, 4);               /* d, and m for the _1 formats */
                d[j] = ob_fp16_to_f32(h[0]);
                mm[j] = (kind == K_Q4_1 || kind == K_Q5_1) ? ob_fp16_to_f32(h[1]) : 0.0f;
            }
            dw = _mm256_loadu_ps(d);
            mw = _mm256_loadu_ps(mm);
        }
        __m256 valid = lanes_below(m);
        for (int r = 0; r < nr; r++) {
            const struct ob_act_a8 *ab = (const struct ob_act_a8 *)((const char *)a + r * as) + b0;
            float da[8] = {0};
            int32_t sa[8] = {0};
            for (int j = 0; j < m; j++) {
                da[j] = ab[j].d;
                sa[j] = ab[j].sum;
            }
            __m256 dav = _mm256_loadu_ps(da);
            __m256i is = hsum8x8(isum[r]);
            if (kind == K_Q4_0 || kind == K_Q5_0)     /* sum (q - off) a = sum q a - off sum a */
                is = _mm256_sub_epi32(is, _mm256_mullo_epi32(_mm256_loadu_si256((const __m256i *)sa),
                                                             _mm256_set1_epi32(kind == K_Q4_0 ? 8 : 16)));
            /* (d_w * d_a) * (float)isum [+ (m_w * d_a) * (float)sum_a] */
            __m256 v = _mm256_mul_ps(_mm256_mul_ps(dw, dav), _mm256_cvtepi32_ps(is));
            if (kind == K_Q4_1 || kind == K_Q5_1)
                v = _mm256_add_ps(v, _mm256_mul_ps(_mm256_mul_ps(mw, dav),
                                                   _mm256_cvtepi32_ps(_mm256_loadu_si256((const __m256i *)sa))));
            part[r] = _mm256_blendv_ps(part[r], _mm256_add_ps(part[r], v), valid);
        }
    }
    for (int r = 0; r < nr; r++)
        out[r] = fold8(part[r]);
}

static void rows_q4_0(const void *w, const void *a, size_t as, int nr, int k, float *out)
{
    rows_a8(w, a, as, nr, k, out, K_Q4_0);
}

static void rows_q4_1(const void *w, const void *a, size_t as, int nr, int k, float *out)
{
    rows_a8(w, a, as, nr, k, out, K_Q4_1);
}

static void rows_q5_0(const void *w, const void *a, size_t as, int nr, int k, float *out)
{
    rows_a8(w, a, as, nr, k, out, K_Q5_0);
}

static void rows_q5_1(const void *w, const void *a, size_t as, int nr, int k, float *out)
{
    rows_a8(w, a, as, nr, k, out, K_Q5_1);
}

static void rows_q8_0(const void *w, const void *a, size_t as, int nr, int k, float *out)
{
    rows_a8(w, a, as, nr, k, out, K_Q8_0);
}

/* ---- K-quants with Q8_K activations ---------------------------------------------------------- */

static inline const struct ob_block_q8_k *act_k(const void *a, size_t as, int r, int b)
{
    return (const struct ob_block_q8_k *)((const char *)a + r * as) + b;
}

static void rows_q4_k(const void *w, const void *a, size_t as, int nr, int k, float *out)
{
    const struct ob_block_q4_k *wb = w;
    const int nb = k / 256;
    float p[OB_MAXR][8] = {{0}};
    const __m256i m4 = _mm256_set1_epi8(15);
    for (int b = 0; b < nb; b++) {
        uint8_t sc[8], mn[8];
        for (int j = 0; j < 8; j++)
            ob_k4_scale_min(j, wb[b].scales, &sc[j], &mn[j]);
        __m256i q[8];                 /* sub-block j as 32 bytes */
        for (int c = 0; c < 4; c++) {
            __m256i x = _mm256_loadu_si256((const __m256i *)(wb[b].qs + 32 * c));
            q[2 * c] = _mm256_and_si256(x, m4);
            q[2 * c + 1] = _mm256_and_si256(_mm256_srli_epi16(x, 4), m4);
        }
        float d = ob_fp16_to_f32(wb[b].d), dmin = ob_fp16_to_f32(wb[b].dmin);
        __m256i msc = _mm256_setr_epi16(mn[0], mn[0], mn[1], mn[1], mn[2], mn[2], mn[3], mn[3],
                                        mn[4], mn[4], mn[5], mn[5], mn[6], mn[6], mn[7], mn[7]);
        for (int r = 0; r < nr; r++) {
            const struct ob_block_q8_k *ab = act_k(a, as, r, b);
            __m256i acc = _mm256_setzero_si256();
            for (int j = 0; j < 8; j++) {
                __m256i pr = _mm256_maddubs_epi16(q[j], _mm256_loadu_si256((const __m256i *)(ab->qs + 32 * j)));
                acc = _mm256_add_epi32(acc, _mm256_madd_epi16(pr, _mm256_set1_epi16(sc[j])));
            }
            int isum = hsum_i32(acc);
            int msum = hsum_i32(_mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)ab->bsums), msc));
            float v = (d * ab->d) * (float)isum - (dmin * ab->d) * (float)msum;
            p[r][b & 7] = p[r][b & 7] + v;
        }
    }
    for (int r = 0; r < nr; r++)
        out[r] = ob_fold8(p[r]);
}

static void rows_q5_k(const void *w, const void *a, size_t as, int nr, int k, float *out)
{
    const struct ob_block_q5_k *wb = w;
    const int nb = k / 256;
    float p[OB_MAXR][8] = {{0}};
    const __m256i m4 = _mm256_set1_epi8(15), one = _mm256_set1_epi8(1);
    for (int b = 0; b < nb; b++) {
        uint8_t sc[8], mn[8];
        for (int j = 0; j < 8; j++)
            ob_k4_scale_min(j, wb[b].scales, &sc[j], &mn[j]);
        __m256i qh = _mm256_loadu_si256((const __m256i *)wb[b].qh);
        __m256i q[8];
        for (int c = 0; c < 4; c++) {
            __m256i x = _mm256_loadu_si256((const __m256i *)(wb[b].qs + 32 * c));
            __m256i h0 = _mm256_and_si256(_mm256_srli_epi16(qh, 2 * c), one);
            __m256i h1 = _mm256_and_si256(_mm256_srli_epi16(qh, 2 * c + 1), one);
            q[2 * c] = _mm256_or_si256(_mm256_and_si256(x, m4), _mm256_slli_epi16(h0, 4));
            q[2 * c + 1] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(x, 4), m4),
                                           _mm256_slli_epi16(h1, 4));
        }
        float d = ob_fp16_to_f32(wb[b].d), dmin = ob_fp16_to_f32(wb[b].dmin);
        __m256i msc = _mm256_setr_epi16(mn[0], mn[0], mn[1], mn[1], mn[2], mn[2], mn[3], mn[3],
                                        mn[4], mn[4], mn[5], mn[5], mn[6], mn[6], mn[7], mn[7]);
        for (int r = 0; r < nr; r++) {
            const struct ob_block_q8_k *ab = act_k(a, as, r, b);
            __m256i acc = _mm256_setzero_si256();
            for (int j = 0; j < 8; j++) {
                __m256i pr = _mm256_maddubs_epi16(q[j], _mm256_loadu_si256((const __m256i *)(ab->qs + 32 * j)));
                acc = _mm256_add_epi32(acc, _mm256_madd_epi16(pr, _mm256_set1_epi16(sc[j])));
            }
            int isum = hsum_i32(acc);
            int msum = hsum_i32(_mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)ab->bsums), msc));
            float v = (d * ab->d) * (float)isum - (dmin * ab->d) * (float)msum;
            p[r][b & 7] = p[r][b & 7] + v;
        }
    }
    for (int r = 0; r < nr; r++)
        out[r] = ob_fold8(p[r]);
}

static void rows_q6_k(const void *w, const void *a, size_t as, int nr, int k, float *out)
{
    const struct ob_block_q6_k *wb = w;
    const int nb = k / 256;
    float p[OB_MAXR][8] = {{0}};
    const __m256i m4 = _mm256_set1_epi8(15), m2 = _mm256_set1_epi8(3);
    for (int b = 0; b < nb; b++) {
        __m256i q[8];                 /* 32 values each: f = 32 g + l, q in 0..63 */
        for (int h = 0; h < 2; h++) {
            __m256i l0 = _mm256_loadu_si256((const __m256i *)(wb[b].ql + 64 * h));
            __m256i l1 = _mm256_loadu_si256((const __m256i *)(wb[b].ql + 64 * h + 32));
            __m256i hb = _mm256_loadu_si256((const __m256i *)(wb[b].qh + 32 * h));
            __m256i lo[4] = {_mm256_and_si256(l0, m4), _mm256_and_si256(l1, m4),
                             _mm256_and_si256(_mm256_srli_epi16(l0, 4), m4),
                             _mm256_and_si256(_mm256_srli_epi16(l1, 4), m4)};
            for (int s = 0; s < 4; s++) {
                __m256i hi = _mm256_and_si256(_mm256_srli_epi16(hb, 2 * s), m2);
                q[4 * h + s] = _mm256_or_si256(lo[s], _mm256_slli_epi16(hi, 4));
            }
        }
        const int8_t *sc = wb[b].scales;
        __m256i scv[8];               /* low 128 bits: scale of sub-block 2g, high: 2g+1 */
        for (int g = 0; g < 8; g++)
            scv[g] = _mm256_set_m128i(_mm_set1_epi16(sc[2 * g + 1]), _mm_set1_epi16(sc[2 * g]));
        __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)sc));
        float d = ob_fp16_to_f32(wb[b].d);
        for (int r = 0; r < nr; r++) {
            const struct ob_block_q8_k *ab = act_k(a, as, r, b);
            __m256i acc = _mm256_setzero_si256();
            for (int g = 0; g < 8; g++) {
                __m256i pr = _mm256_maddubs_epi16(q[g], _mm256_loadu_si256((const __m256i *)(ab->qs + 32 * g)));
                acc = _mm256_add_epi32(acc, _mm256_madd_epi16(pr, scv[g]));
            }
            /* sum (q - 32) a = sum q a - 32 sum a, per sub-block, weighted by its scale */
            __m256i off = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)ab->bsums), sc16);
            int isum = hsum_i32(acc) - 32 * hsum_i32(off);
            float v = (d * ab->d) * (float)isum;
            p[r][b & 7] = p[r][b & 7] + v;
        }
    }
    for (int r = 0; r < nr; r++)
        out[r] = ob_fold8(p[r]);
}

static void rows_q3_k(const void *w, const void *a, size_t as, int nr, int k, float *out)
{
    const struct ob_block_q3_k *wb = w;
    const int nb = k / 256;
    float p[OB_MAXR][8] = {{0}};
    const __m256i m2 = _mm256_set1_epi8(3), one = _mm256_set1_epi8(1);
    for (int b = 0; b < nb; b++) {
        /* q + 4 in 0..7 (unsigned for maddubs); the 4 * sum a comes off with the bsums */
        __m256i hm = _mm256_loadu_si256((const __m256i *)wb[b].hmask);
        __m256i q[8];
        for (int h = 0; h < 2; h++) {
            __m256i x = _mm256_loadu_si256((const __m256i *)(wb[b].qs + 32 * h));
            for (int s = 0; s < 4; s++) {
                int g = 4 * h + s;
                __m256i lo = _mm256_and_si256(_mm256_srli_epi16(x, 2 * s), m2);
                __m256i hb = _mm256_and_si256(_mm256_srli_epi16(hm, g), one);
                q[g] = _mm256_or_si256(lo, _mm256_slli_epi16(hb, 2));   /* low + 4 * set */
            }
        }
        int16_t sc[16];
        for (int i = 0; i < 16; i++)
            sc[i] = (int16_t)ob_q3k_scale(i, wb[b].scales);
        __m256i scv[8];
        for (int g = 0; g < 8; g++)
            scv[g] = _mm256_set_m128i(_mm_set1_epi16(sc[2 * g + 1]), _mm_set1_epi16(sc[2 * g]));
        __m256i sc16 = _mm256_loadu_si256((const __m256i *)sc);
        float d = ob_fp16_to_f32(wb[b].d);
        for (int r = 0; r < nr; r++) {
            const struct ob_block_q8_k *ab = act_k(a, as, r, b);
            __m256i acc = _mm256_setzero_si256();
            for (int g = 0; g < 8; g++) {
                __m256i pr = _mm256_maddubs_epi16(q[g], _mm256_loadu_si256((const __m256i *)(ab->qs + 32 * g)));
                acc = _mm256_add_epi32(acc, _mm256_madd_epi16(pr, scv[g]));
            }
            __m256i off = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)ab->bsums), sc16);
            int isum = hsum_i32(acc) - 4 * hsum_i32(off);
            float v = (d * ab->d) * (float)isum;
            p[r][b & 7] = p[r][b & 7] + v;
        }
    }
    for (int r = 0; r < nr; r++)
        out[r] = ob_fold8(p[r]);
}

static void rows_q2_k(const void *w, const void *a, size_t as, int nr, int k, float *out)
{
    const struct ob_block_q2_k *wb = w;
    const int nb = k / 256;
    float p[OB_MAXR][8] = {{0}};
    const __m256i m2 = _mm256_set1_epi8(3);
    for (int b = 0; b < nb; b++) {
        __m256i q[8];
        for (int h = 0; h < 2; h++) {
            __m256i x = _mm256_loadu_si256((const __m256i *)(wb[b].qs + 32 * h));
            for (int s = 0; s < 4; s++)
                q[4 * h + s] = _mm256_and_si256(_mm256_srli_epi16(x, 2 * s), m2);
        }
        int16_t sc[16], mn[16];
        for (int i = 0; i < 16; i++) {
            sc[i] = wb[b].scales[i] & 15;
            mn[i] = wb[b].scales[i] >> 4;
        }
        __m256i scv[8];
        for (int g = 0; g < 8; g++)
            scv[g] = _mm256_set_m128i(_mm_set1_epi16(sc[2 * g + 1]), _mm_set1_epi16(sc[2 * g]));
        __m256i mn16 = _mm256_loadu_si256((const __m256i *)mn);
        float d = ob_fp16_to_f32(wb[b].d), dmin = ob_fp16_to_f32(wb[b].dmin);
        for (int r = 0; r < nr; r++) {
            const struct ob_block_q8_k *ab = act_k(a, as, r, b);
            __m256i acc = _mm256_setzero_si256();
            for (int g = 0; g < 8; g++) {
                __m256i pr = _mm256_maddubs_epi16(q[g], _mm256_loadu_si256((const __m256i *)(ab->qs + 32 * g)));
                acc = _mm256_add_epi32(acc, _mm256_madd_epi16(pr, scv[g]));
            }
            int isum = hsum_i32(acc);
            int msum = hsum_i32(_mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)ab->bsums), mn16));
            float v = (d * ab->d) * (float)isum - (dmin * ab->d) * (float)msum;
            p[r][b & 7] = p[r][b & 7] + v;
        }
    }
    for (int r = 0; r < nr; r++)
        out[r] = ob_fold8(p[r]);
}

void ob_kernels_avx2(struct ob_kernel_table *t)
{
    t->dot[OB_F32] = rows_f32;
    t->dot[OB_F16] = rows_f16;
    t->dot[OB_BF16] = rows_bf16;
    t->dot[OB_Q4_0] = rows_q4_0;
    t->dot[OB_Q4_1] = rows_q4_1;
    t->dot[OB_Q5_0] = rows_q5_0;
    t->dot[OB_Q5_1] = rows_q5_1;
    t->dot[OB_Q8_0] = rows_q8_0;
    t->dot[OB_Q2_K] = rows_q2_k;
    t->dot[OB_Q3_K] = rows_q3_k;
    t->dot[OB_Q4_K] = rows_q4_k;
    t->dot[OB_Q5_K] = rows_q5_k;
    t->dot[OB_Q6_K] = rows_q6_k;
    t->actq[OB_ACT_F32] = actq_f32;
    t->actq[OB_ACT_Q8K] = actq_q8k;
    t->actq[OB_ACT_A8] = actq_a8;
}
