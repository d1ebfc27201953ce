/*
 * avx2.h — helpers shared by the AVX2 kernel files (lib/cpu/kernels/NAME-avx2.c, compiled
 * with -mavx2 -mfma -mf16c -mbmi2). Include it from those files only. It takes the host's
 * (lib/host/avx2.h: AI, the folds fold8 and fold32, the lane masks, exp8), which the host's
 * row kernels share (host/softmax-avx2.c).
 *
 * Every helper here is exact: integer sums (associative), lane moves, and the fixed float
 * folds of arith.h. None of them rounds a float on its own.
 */
#ifndef OB_KERNELS_AVX2_H
#define OB_KERNELS_AVX2_H

#include <immintrin.h>
#include <string.h>

#include "cpu/kernels/kernels.h"
#include "host/avx2.h"

/* fully unroll a loop with a constant trip count (register arrays stay in registers) */
#define UNROLL _Pragma("GCC unroll 16")

/* the kernel families' tables (a8-avx2.c, kq-avx2.c) */
void ob_kernels_avx2_a8(struct ob_kernel_table *t);
void ob_kernels_avx2_kq(struct ob_kernel_table *t);

/* ---- integer reductions --------------------------------------------------------------------- */

AI int hsum_i32(__m256i v)
{
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(1, 0, 3, 2)));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(2, 3, 0, 1)));
    return _mm_cvtsi128_si32(s);
}

/* two vectors a, b -> per 128-bit half [a0+a2, b0+b2, a1+a3, b1+b3] (a sum stage of hsum8) */
AI __m256i hsum_pair(__m256i a, __m256i b)
{
    return _mm256_add_epi32(_mm256_unpacklo_epi32(a, b), _mm256_unpackhi_epi32(a, b));
}

/* four stage-1 results -> per 128-bit half [sum a, sum b, sum c, sum d] of that half */
AI __m256i hsum_quad(__m256i ab, __m256i cd)
{
    return _mm256_add_epi32(_mm256_unpacklo_epi64(ab, cd), _mm256_unpackhi_epi64(ab, cd));
}

/* lane j of the result = sum of all lanes of v_j (exact: int32 adds) */
AI __m256i hsum8(__m256i v0, __m256i v1, __m256i v2, __m256i v3, __m256i v4, __m256i v5,
                 __m256i v6, __m256i v7)
{
    __m256i a = hsum_quad(hsum_pair(v0, v1), hsum_pair(v2, v3));
    __m256i b = hsum_quad(hsum_pair(v4, v5), hsum_pair(v6, v7));
    return _mm256_add_epi32(_mm256_permute2x128_si256(a, b, 0x20),
                            _mm256_permute2x128_si256(a, b, 0x31));
}

AI __m256i hsum8v(const __m256i *v)
{
    return hsum8(v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7]);
}

/* ---- float folds (arith.h's fixed shapes; fold8, fold32: host/avx2.h) -------------------------- */

/* ob_fold8 done lane-wise on 8 vectors of partials: lane l of the result = fold of lane l */
AI __m256 fold8v(const __m256 *p)
{
    __m256 q0 = _mm256_add_ps(p[0], p[4]), q1 = _mm256_add_ps(p[1], p[5]);
    __m256 q2 = _mm256_add_ps(p[2], p[6]), q3 = _mm256_add_ps(p[3], p[7]);
    q0 = _mm256_add_ps(q0, q2);
    q1 = _mm256_add_ps(q1, q3);
    return _mm256_add_ps(q0, q1);
}

/* ---- loads ------------------------------------------------------------------------------------- */

AI __m256i ld(const void *p)
{
    return _mm256_loadu_si256((const __m256i *)p);
}

AI void st(void *p, __m256i v)
{
    _mm256_storeu_si256((__m256i *)p, v);
}

AI uint16_t ld16(const void *p)
{
    uint16_t v;
    memcpy(&v, p, 2);
    return v;
}

AI uint32_t ld32(const void *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

AI float ldf(const void *p)
{
    float v;
    memcpy(&v, p, 4);
    return v;
}

/*
 * 8 fp16 values, one every `stride` bytes from p, as floats. vcvtph2ps is exact for every
 * finite half (subnormals included) and for Inf; a signalling NaN comes out quiet (quiet bit
 * set), where ob_fp16_to_f32 keeps it signalling. Every use below feeds the value straight
 * into a multiplication, which quietens a signalling NaN operand anyway, so the product's bits
 * are the reference's (tests/unit/kernels.c checks NaN scales).
 */
AI __m256 f16x8(const uint8_t *p, size_t stride)
{
    __m128i h = _mm_cvtsi32_si128(ld16(p));
    h = _mm_insert_epi16(h, ld16(p + stride), 1);
    h = _mm_insert_epi16(h, ld16(p + 2 * stride), 2);
    h = _mm_insert_epi16(h, ld16(p + 3 * stride), 3);
    h = _mm_insert_epi16(h, ld16(p + 4 * stride), 4);
    h = _mm_insert_epi16(h, ld16(p + 5 * stride), 5);
    h = _mm_insert_epi16(h, ld16(p + 6 * stride), 6);
    h = _mm_insert_epi16(h, ld16(p + 7 * stride), 7);
    return _mm256_cvtph_ps(h);
}

/* 8 floats (int32s), one every `stride` bytes */
AI __m256 f32x8(const uint8_t *p, size_t stride)
{
    return _mm256_setr_ps(ldf(p), ldf(p + stride), ldf(p + 2 * stride), ldf(p + 3 * stride),
                          ldf(p + 4 * stride), ldf(p + 5 * stride), ldf(p + 6 * stride),
                          ldf(p + 7 * stride));
}

AI __m256i i32x8(const uint8_t *p, size_t stride)
{
    return _mm256_setr_epi32((int)ld32(p), (int)ld32(p + stride), (int)ld32(p + 2 * stride),
                             (int)ld32(p + 3 * stride), (int)ld32(p + 4 * stride),
                             (int)ld32(p + 5 * stride), (int)ld32(p + 6 * stride),
                             (int)ld32(p + 7 * stride));
}

/* the same for the first m values only (zeros beyond; nothing beyond is read): built in
 * registers, not through a stack array (a narrow store then a wide load stalls) */
AI __m256 f16x8_n(const uint8_t *p, size_t stride, int m)
{
    if (m >= 8)
        return f16x8(p, stride);
    __m128i h = _mm_setzero_si128();
    h = _mm_insert_epi16(h, ld16(p), 0);
    if (m > 1) h = _mm_insert_epi16(h, ld16(p + stride), 1);
    if (m > 2) h = _mm_insert_epi16(h, ld16(p + 2 * stride), 2);
    if (m > 3) h = _mm_insert_epi16(h, ld16(p + 3 * stride), 3);
    if (m > 4) h = _mm_insert_epi16(h, ld16(p + 4 * stride), 4);
    if (m > 5) h = _mm_insert_epi16(h, ld16(p + 5 * stride), 5);
    if (m > 6) h = _mm_insert_epi16(h, ld16(p + 6 * stride), 6);
    return _mm256_cvtph_ps(h);
}

AI __m256i i32x8_n(const uint8_t *p, size_t stride, int m)
{
    if (m >= 8)
        return i32x8(p, stride);
    __m128i lo = _mm_cvtsi32_si128((int)ld32(p)), hi = _mm_setzero_si128();
    if (m > 1) lo = _mm_insert_epi32(lo, (int)ld32(p + stride), 1);
    if (m > 2) lo = _mm_insert_epi32(lo, (int)ld32(p + 2 * stride), 2);
    if (m > 3) lo = _mm_insert_epi32(lo, (int)ld32(p + 3 * stride), 3);
    if (m > 4) hi = _mm_cvtsi32_si128((int)ld32(p + 4 * stride));
    if (m > 5) hi = _mm_insert_epi32(hi, (int)ld32(p + 5 * stride), 1);
    if (m > 6) hi = _mm_insert_epi32(hi, (int)ld32(p + 6 * stride), 2);
    return _mm256_setr_m128i(lo, hi);
}

AI __m256 f32x8_n(const uint8_t *p, size_t stride, int m)
{
    return _mm256_castsi256_ps(i32x8_n(p, stride, m));
}

/* 4-lane versions for m <= 4 */
AI __m128 f16x4_n(const uint8_t *p, size_t stride, int m)
{
    __m128i h = _mm_cvtsi32_si128(ld16(p));
    if (m > 1) h = _mm_insert_epi16(h, ld16(p + stride), 1);
    if (m > 2) h = _mm_insert_epi16(h, ld16(p + 2 * stride), 2);
    if (m > 3) h = _mm_insert_epi16(h, ld16(p + 3 * stride), 3);
    return _mm_cvtph_ps(h);
}

AI __m128i i32x4_n(const uint8_t *p, size_t stride, int m)
{
    __m128i v = _mm_cvtsi32_si128((int)ld32(p));
    if (m > 1) v = _mm_insert_epi32(v, (int)ld32(p + stride), 1);
    if (m > 2) v = _mm_insert_epi32(v, (int)ld32(p + 2 * stride), 2);
    if (m > 3) v = _mm_insert_epi32(v, (int)ld32(p + 3 * stride), 3);
    return v;
}

/* lane j of the result = sum of all lanes of v_j, j < 4 */
AI __m128i hsum4(__m256i v0, __m256i v1, __m256i v2, __m256i v3)
{
    __m256i a = hsum_quad(hsum_pair(v0, v1), hsum_pair(v2, v3));
    return _mm_add_epi32(_mm256_castsi256_si128(a), _mm256_extracti128_si256(a, 1));
}

/* p + v in lanes j < m (m <= 4: lanes 0..3 only), p elsewhere */
AI __m256 add_lanes4(__m256 p, __m128 v, int m)
{
    __m128 lo = _mm256_castps256_ps128(p);
    __m128 s = _mm_add_ps(lo, v);
    if (m < 4)
        s = _mm_blendv_ps(lo, s, _mm_castsi128_ps(_mm_cmpgt_epi32(_mm_set1_epi32(m),
                                                                  _mm_setr_epi32(0, 1, 2, 3))));
    return _mm256_blend_ps(p, _mm256_castps128_ps256(s), 0x0f);
}

/* ---- transposes -------------------------------------------------------------------------------- */

/* 8 x 8 int32: afterwards r[t] lane j = (before) r[j] lane t */
AI void tr8x8_32(__m256i *r)
{
    __m256i t0 = _mm256_unpacklo_epi32(r[0], r[1]), t1 = _mm256_unpackhi_epi32(r[0], r[1]);
    __m256i t2 = _mm256_unpacklo_epi32(r[2], r[3]), t3 = _mm256_unpackhi_epi32(r[2], r[3]);
    __m256i t4 = _mm256_unpacklo_epi32(r[4], r[5]), t5 = _mm256_unpackhi_epi32(r[4], r[5]);
    __m256i t6 = _mm256_unpacklo_epi32(r[6], r[7]), t7 = _mm256_unpackhi_epi32(r[6], r[7]);
    __m256i u0 = _mm256_unpacklo_epi64(t0, t2), u1 = _mm256_unpackhi_epi64(t0, t2);
    __m256i u2 = _mm256_unpacklo_epi64(t1, t3), u3 = _mm256_unpackhi_epi64(t1, t3);
    __m256i u4 = _mm256_unpacklo_epi64(t4, t6), u5 = _mm256_unpackhi_epi64(t4, t6);
    __m256i u6 = _mm256_unpacklo_epi64(t5, t7), u7 = _mm256_unpackhi_epi64(t5, t7);
    r[0] = _mm256_permute2x128_si256(u0, u4, 0x20);
    r[1] = _mm256_permute2x128_si256(u1, u5, 0x20);
    r[2] = _mm256_permute2x128_si256(u2, u6, 0x20);
    r[3] = _mm256_permute2x128_si256(u3, u7, 0x20);
    r[4] = _mm256_permute2x128_si256(u0, u4, 0x31);
    r[5] = _mm256_permute2x128_si256(u1, u5, 0x31);
    r[6] = _mm256_permute2x128_si256(u2, u6, 0x31);
    r[7] = _mm256_permute2x128_si256(u3, u7, 0x31);
}

/* 8 x 8 int16 within each 128-bit half: afterwards, in each half, r[t] word i = (before)
 * r[i] word t */
AI void tr8x8_16(__m256i *r)
{
    __m256i a0 = _mm256_unpacklo_epi16(r[0], r[1]), a1 = _mm256_unpackhi_epi16(r[0], r[1]);
    __m256i a2 = _mm256_unpacklo_epi16(r[2], r[3]), a3 = _mm256_unpackhi_epi16(r[2], r[3]);
    __m256i a4 = _mm256_unpacklo_epi16(r[4], r[5]), a5 = _mm256_unpackhi_epi16(r[4], r[5]);
    __m256i a6 = _mm256_unpacklo_epi16(r[6], r[7]), a7 = _mm256_unpackhi_epi16(r[6], r[7]);
    __m256i b0 = _mm256_unpacklo_epi32(a0, a2), b1 = _mm256_unpackhi_epi32(a0, a2);
    __m256i b2 = _mm256_unpacklo_epi32(a1, a3), b3 = _mm256_unpackhi_epi32(a1, a3);
    __m256i b4 = _mm256_unpacklo_epi32(a4, a6), b5 = _mm256_unpackhi_epi32(a4, a6);
    __m256i b6 = _mm256_unpacklo_epi32(a5, a7), b7 = _mm256_unpackhi_epi32(a5, a7);
    r[0] = _mm256_unpacklo_epi64(b0, b4);
    r[1] = _mm256_unpackhi_epi64(b0, b4);
    r[2] = _mm256_unpacklo_epi64(b1, b5);
    r[3] = _mm256_unpackhi_epi64(b1, b5);
    r[4] = _mm256_unpacklo_epi64(b2, b6);
    r[5] = _mm256_unpackhi_epi64(b2, b6);
    r[6] = _mm256_unpacklo_epi64(b3, b7);
    r[7] = _mm256_unpackhi_epi64(b3, b7);
}

/* the GEMMs' weight panels, one row per int32 lane: 16 bytes at p + n * stride (n < rows, else zeros) as 4 registers: r[k] lane n = dword k */
AI void tr8x4_ld(const uint8_t *p, size_t stride, int rows, __m256i *r)
{
    __m256i z[4];
    UNROLL
    for (int g = 0; g < 4; g++) {              /* z[g]: row g, row g + 4 */
        __m128i lo = g < rows ? _mm_loadu_si128((const __m128i *)(p + g * stride)) : _mm_setzero_si128();
        __m128i hi = g + 4 < rows ? _mm_loadu_si128((const __m128i *)(p + (g + 4) * stride)) : _mm_setzero_si128();
        z[g] = _mm256_setr_m128i(lo, hi);
    }
    __m256i a = _mm256_unpacklo_epi32(z[0], z[1]), b = _mm256_unpackhi_epi32(z[0], z[1]);
    __m256i c = _mm256_unpacklo_epi32(z[2], z[3]), d = _mm256_unpackhi_epi32(z[2], z[3]);
    r[0] = _mm256_unpacklo_epi64(a, c);
    r[1] = _mm256_unpackhi_epi64(a, c);
    r[2] = _mm256_unpacklo_epi64(b, d);
    r[3] = _mm256_unpackhi_epi64(b, d);
}

/* 32 bytes at p + n * stride (n < rows, else zeros), transposed: r[d] lane n = dword d */
AI void tr8x8_ld(const uint8_t *p, size_t stride, int rows, __m256i *r)
{
    UNROLL
    for (int n = 0; n < 8; n++)
        r[n] = n < rows ? ld(p + n * stride) : _mm256_setzero_si256();
    tr8x8_32(r);
}

/* the fp16 in the low (hi = 0) or high half of every lane, as floats */
AI __m256 f16_lanes8(__m256i h, int hi)
{
    __m256i x = hi ? _mm256_srli_epi32(h, 16) : _mm256_and_si256(h, _mm256_set1_epi32(0xffff));
    x = _mm256_permute4x64_epi64(_mm256_packus_epi32(x, x), 0x08);   /* no value saturates */
    return _mm256_cvtph_ps(_mm256_castsi256_si128(x));
}

/* ---- unsigned x signed byte products --------------------------------------------------------- */

AI __m256i mubs(__m256i u, __m256i s)           /* 16 int16 pair sums; see each caller's bound */
{
    return _mm256_maddubs_epi16(u, s);
}

/*
 * *c += maddubs(u, *s) (int16, wrapping add; callers keep the sums in range). Written as one
 * asm statement so that the accumulator stays in its register: compilers otherwise tend to
 * copy it to another register every iteration of a rolled loop.
 */
AI void mubs_add(__m256i *c, __m256i u, const void *s)
{
    __m256i t;
    __asm__("vpmaddubsw %[s], %[u], %[t]\n\tvpaddw %[t], %[c], %[c]"
            : [c] "+x"(*c), [t] "=&x"(t)
            : [u] "x"(u), [s] "m"(*(const __m256i *)s));
}

/*
 * *c += maddubs(u, the 4 bytes at s broadcast to every dword) (int16, wrapping add; callers
 * keep the sums in range): mubs_add for kernels whose signed operand is a broadcast. One asm
 * statement, so that the compiler neither moves the products away from their sums nor copies
 * the accumulator.
 */
AI void mubs_add_b32(__m256i *c, __m256i u, const void *s)
{
    __m256i t;
    __asm__("vpbroadcastd %[s], %[t]\n\tvpmaddubsw %[t], %[u], %[t]\n\tvpaddw %[t], %[c], %[c]"
            : [c] "+x"(*c), [t] "=&x"(t)
            : [u] "x"(u), [s] "m"(*(const int32_t *)s));
}

/* the same with one broadcast against two unsigned operands: *c += maddubs(u, s4), *e +=
 * maddubs(v, s4) */
AI void mubs2_add_b32(__m256i *c, __m256i *e, __m256i u, __m256i v, const void *s)
{
    __m256i t, x;
    __asm__("vpbroadcastd %[s], %[t]\n\tvpmaddubsw %[t], %[u], %[x]\n\tvpaddw %[x], %[c], %[c]\n\t"
            "vpmaddubsw %[t], %[v], %[t]\n\tvpaddw %[t], %[e], %[e]"
            : [c] "+x"(*c), [e] "+x"(*e), [t] "=&x"(t), [x] "=&x"(x)
            : [u] "x"(u), [v] "x"(v), [s] "m"(*(const int32_t *)s));
}

AI __m256i dot_u8s8(__m256i u, __m256i s)       /* 8 int32 of 4-byte sums */
{
    return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
}

/* ---- the table entries ------------------------------------------------------------------------ */

/* The dot kernel rows_NAME of one weight type of a family FAM whose FAM_rows takes the type
 * (KIND) and the row count (1 to 4, a constant in each instance) as its last arguments. */
#define DOT_ROWS(fam, name, kind)                                                              \
    static void rows_##name(const void *w, const void *a, size_t as, int nr, int k, float *out) \
    {                                                                                          \
        switch (nr) {                                                                          \
        case 1: fam##_rows(w, a, as, k, out, kind, 1); break;                                  \
        case 2: fam##_rows(w, a, as, k, out, kind, 2); break;                                  \
        case 3: fam##_rows(w, a, as, k, out, kind, 3); break;                                  \
        default: fam##_rows(w, a, as, k, out, kind, 4); break;                                 \
        }                                                                                      \
    }

/* The ob_gemm entries of one weight type of a kernel family FAM, whose FAM_prep, FAM_run,
 * FAM_prep_bytes and FAM_scratch_bytes take the type (KIND) as their last argument, and the
 * table rows for it (with the family's dot kernel rows_NAME). */
#define GEMM_ENTRIES(fam, name, kind)                                                           \
    static void prep_##name(const void *x, size_t xs, int nr, int k, void *p)                   \
    {                                                                                           \
        fam##_prep(x, xs, nr, k, p, kind);                                                      \
    }                                                                                           \
    static void run_##name(const void *w, size_t rb, int n0, int n1, int k, const void *p,      \
                           int nr, float *y, size_t ldy, void *scratch)                         \
    {                                                                                           \
        fam##_run(w, rb, n0, n1, k, p, nr, y, ldy, scratch, kind);                              \
    }
#define GEMM_SET(t, type, fam, name, min_rows, panel)                                           \
    do {                                                                                        \
        (t)->dot[type] = rows_##name;                                                           \
        (t)->gemm[type] = (struct ob_gemm){min_rows, panel, fam##_prep_bytes, prep_##name,      \
                                           fam##_scratch_bytes, run_##name};                    \
    } while (0)

/* a type in panels (struct ob_kernel_table's pgemv, pgemm, panels): one entry both ways, from
 * one row and from 4 */
#define PANEL_SET(t, type, fam, name, panel)                                                    \
    do {                                                                                        \
        (t)->pgemv[type] = (struct ob_gemm){1, panel, fam##_prep_bytes, prep_##name,            \
                                            fam##_scratch_bytes, run_##name};                   \
        (t)->pgemm[type] = (struct ob_gemm){4, panel, fam##_prep_bytes, prep_##name,            \
                                            fam##_scratch_bytes, run_##name};                   \
        (t)->panels |= (uint64_t)1 << (type);                                                   \
    } while (0)

/* the few-row entry with prepared activations (struct ob_kernel_table's gemv) */
#define GEMV_SET(t, type, fam, name)                                                            \
    ((t)->gemv[type] = (struct ob_gemm){1, 1, fam##_prep_bytes, prep_##name,                    \
                                        fam##_scratch_bytes, run_##name})

/* prefetch the bytes [p, e) into every cache level, a line at a time: the GEMMs fetch their
 * next panel of weight rows while they compute on this one, a part per block (decoding a panel
 * from memory otherwise waits for its lines in turn) */
AI void prefetch_span(const char *p, const char *e)
{
    for (p -= (uintptr_t)p & 63; p < e; p += 64)
        _mm_prefetch(p, _MM_HINT_T0);
}

/* the first nv (<= 8) lanes of f to y */
AI void store_lanes(float *y, __m256 f, int nv)
{
    if (nv >= 8) {
        _mm256_storeu_ps(y, f);
        return;
    }
    float o[8];
    _mm256_storeu_ps(o, f);
    for (int n = 0; n < nv; n++)
        y[n] = o[n];
}

/* The panel kernels' start: activation row r's 8 partials, part[c * stride + r] (c < 8), to
 * zero, for r < NR */
AI void clear_parts(__m256 *part, int stride, int NR)
{
    UNROLL
    for (int c = 0; c < 8; c++)
        UNROLL
        for (int r = 0; r < NR; r++)
            part[c * stride + r] = _mm256_setzero_ps();
}

/*
 * The panel kernels' end: activation row r's 8 partials, part[c * stride + r] (c < 8, lane n
 * weight row n), folded lane-wise in ob_fold8's order (fold8v); the first nv lanes to
 * y + r * ldy, for r < NR.
 */
AI void fold_store_rows(const __m256 *part, int stride, int NR, float *y, size_t ldy, int nv)
{
    UNROLL
    for (int r = 0; r < NR; r++) {
        __m256 p[8];
        UNROLL
        for (int c = 0; c < 8; c++)
            p[c] = part[c * stride + r];
        store_lanes(y + (size_t)r * ldy, fold8v(p), nv);
    }
}

#endif
