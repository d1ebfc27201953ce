/*
 * dot-avx512.c — the AVX-512 level (F, BW, VL, DQ, VNNI): activation quantisers, float-weight
 * dot products, and the table that also takes the quantised kernels of a8-avx512.c (Q4_0 ..
 * Q8_0) and kq-avx512.c (Q2_K .. Q6_K). Reference: lib/arith/dot.h and lib/arith/arith.h; every
 * function must equal its reference bit for bit (tests/unit/kernels.c compares every entry of
 * this table wherever the CPU has the level); speed is the only freedom.
 *
 * Why the results here are equal:
 *  - float dots keep the 32 partials in two __m512 (lane l of register g = partial 16g + l),
 *    updated with fmadd in increasing element order; the last k mod 32 elements go in under a
 *    mask (masked-off lanes keep their partial untouched); the fold is ob_fold32's (16: the two
 *    registers added, 8: the two halves, then 4, 2, 1). Up to four activation rows share each
 *    weight load, each row with its own partials.
 *  - F16 weights are converted with vcvtph2ps (exact; a signalling NaN comes out quiet, which
 *    fmaf's own quietening of a NaN operand makes invisible), BF16 by a 16-bit shift (exact).
 *  - quantisers: _mm512_roundscale_ps(., nearest) is ob_rint for the |x| <= 128 it is used on;
 *    max is exact in any order and vmaxps keeps its second operand when the first is a NaN, as
 *    the reference's comparison does.
 */
#include "cpu/kernels/avx512.h"

/* ---- activation quantisers -------------------------------------------------------------------- */

AI __m512 abs512(__m512 x)
{
    return _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(x), _mm512_set1_epi32(0x7fffffff)));
}

/* amax over n floats (a multiple of 16) with the reference's semantics (NaN ignored) */
AI float amax512(const float *x, int n)
{
    __m512 m = _mm512_setzero_ps();
    for (int i = 0; i < n; i += 16)
        m = _mm512_max_ps(abs512(_mm512_loadu_ps(x + i)), m);
    __m256 h = _mm256_max_ps(_mm512_castps512_ps256(m), _mm512_extractf32x8_ps(m, 1));
    __m128 q = _mm_max_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
    q = _mm_max_ps(q, _mm_movehl_ps(q, q));
    q = _mm_max_ss(q, _mm_movehdup_ps(q));
    return _mm_cvtss_f32(q);
}

/* 16 quants as int32 lanes (reference: ob_act_q) */
AI __m512i quant16(__m512 x, __m512 is)
{
    __m512 v = _mm512_roundscale_ps(_mm512_mul_ps(x, is), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    v = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(v, v, _CMP_ORD_Q), v);        /* NaN -> 0 */
    v = _mm512_min_ps(_mm512_max_ps(v, _mm512_set1_ps(-127.0f)), _mm512_set1_ps(127.0f));
    return _mm512_cvtps_epi32(v);
}

AI int hsum512_i32(__m512i v)
{
    return hsum_i32(fold512_i32(v));
}

static void actq_q8k(const float *x, void *qv, int n)
{
    struct ob_block_q8_k *y = qv;
    for (int b = 0; b < n / 256; b++, x += 256, y++) {
        float amax = amax512(x, 256);
        float isf = amax > 0.0f ? 127.0f / amax : 0.0f;
        y->d = amax / 127.0f;
        __m512 is = _mm512_set1_ps(isf);
        for (int g = 0; g < 16; g++) {                /* 16 values, one bsum */
            __m512i q = quant16(_mm512_loadu_ps(x + 16 * g), is);
            _mm_storeu_si128((__m128i *)(y->qs + 16 * g), _mm512_cvtsepi32_epi8(q));
            y->bsums[g] = (int16_t)hsum512_i32(q);
        }
    }
    _mm256_zeroupper();
}

static void actq_a8(const float *x, void *qv, int n)
{
    struct ob_act_a8 *y = qv;
    for (int b = 0; b < n / 32; b++, x += 32, y++) {
        float amax = amax512(x, 32);
        float isf = amax > 0.0f ? 127.0f / amax : 0.0f;
        y->d = amax / 127.0f;
        __m512 is = _mm512_set1_ps(isf);
        __m512i q0 = quant16(_mm512_loadu_ps(x), is), q1 = quant16(_mm512_loadu_ps(x + 16), is);
        _mm_storeu_si128((__m128i *)y->qs, _mm512_cvtsepi32_epi8(q0));
        _mm_storeu_si128((__m128i *)(y->qs + 16), _mm512_cvtsepi32_epi8(q1));
        y->sum = hsum512_i32(_mm512_add_epi32(q0, q1));
    }
    _mm256_zeroupper();
}

/* ---- float weights ---------------------------------------------------------------------------- */

/* 16 weights from element i as floats, lanes from m on zero (kind: 0 f32, 1 f16, 2 bf16) */
AI __m512 load_w16(const void *w, int i, int kind, __mmask16 m)
{
    if (kind == 0)
        return _mm512_maskz_loadu_ps(m, (const float *)w + i);
    __m256i h = _mm256_maskz_loadu_epi16(m, (const uint16_t *)w + i);
    if (kind == 1)
        return _mm512_cvtph_ps(h);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

/* ob_fold32 on two registers of 16 partials (register g lane l = partial 16g + l) */
AI float fold32x2(__m512 p0, __m512 p1)
{
    __m512 q = _mm512_add_ps(p0, p1);                                        /* s = 16 */
    return fold8(_mm256_add_ps(_mm512_castps512_ps256(q), _mm512_extractf32x8_ps(q, 1)));   /* 8, 4, 2, 1 */
}

/* NR rows (1..4) sharing the weight loads, each with the reference's 32 partials */
AI void float_rows(const void *w, const void *a, size_t as, int k, float *out, int kind, int NR)
{
    __m512 p[OB_MAXR][2];
    UNROLL
    for (int r = 0; r < NR; r++)
        p[r][0] = p[r][1] = _mm512_setzero_ps();
    int i = 0;
    for (; i + 32 <= k; i += 32) {
        __m512 w0 = load_w16(w, i, kind, 0xffff), w1 = load_w16(w, i + 16, kind, 0xffff);
        UNROLL
        for (int r = 0; r < NR; r++) {
            const float *x = (const float *)((const char *)a + r * as);
            p[r][0] = _mm512_fmadd_ps(w0, _mm512_loadu_ps(x + i), p[r][0]);
            p[r][1] = _mm512_fmadd_ps(w1, _mm512_loadu_ps(x + i + 16), p[r][1]);
        }
    }
    if (i < k) {                                  /* elements i .. k-1 into partials 0 .. */
        int m = k - i;
        __mmask16 m0 = (__mmask16)(m >= 16 ? 0xffffu : (1u << m) - 1u);
        __mmask16 m1 = (__mmask16)(m <= 16 ? 0u : (1u << (m - 16)) - 1u);
        __m512 w0 = load_w16(w, i, kind, m0), w1 = load_w16(w, i + 16, kind, m1);
        UNROLL
        for (int r = 0; r < NR; r++) {
            const float *x = (const float *)((const char *)a + r * as);
            p[r][0] = _mm512_mask3_fmadd_ps(w0, _mm512_maskz_loadu_ps(m0, x + i), p[r][0], m0);
            p[r][1] = _mm512_mask3_fmadd_ps(w1, _mm512_maskz_loadu_ps(m1, x + i + 16), p[r][1], m1);
        }
    }
    UNROLL
    for (int r = 0; r < NR; r++)
        out[r] = fold32x2(p[r][0], p[r][1]);
}

AI void fl_rows(const void *w, const void *a, size_t as, int k, float *out, int kind, int NR)
{
    float_rows(w, a, as, k, out, kind, NR);
}

DOT_ROWS512(fl, f32, 0)
DOT_ROWS512(fl, f16, 1)
DOT_ROWS512(fl, bf16, 2)

void ob_kernels_avx512(struct ob_kernel_table *t)
{
    t->dot[OB_F32] = rows_f32;
    t->dot[OB_F16] = rows_f16;
    t->dot[OB_BF16] = rows_bf16;
    ob_kernels_avx512_a8(t);
    ob_kernels_avx512_kq(t);
    t->actq[OB_ACT_Q8K] = actq_q8k;
    t->actq[OB_ACT_A8] = actq_a8;
}
