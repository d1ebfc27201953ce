/*
 * avx512.h — helpers shared by the AVX-512 kernel files (lib/cpu/kernels/NAME-avx512.c,
 * compiled with -mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx512vnni -mfma -mf16c -mbmi2,
 * and for GCC 12 -fno-tree-loop-vectorize: see the Makefile). Include it from those files only.
 *
 * It takes avx2.h's helpers too (the 256-bit reductions, folds, fp16 gathers and the table
 * macros: they compile to EVEX/VEX code here just the same). Every helper is exact: integer
 * sums, lane moves, and the fixed float folds of arith.h.
 *
 * Rule for these files (the VNNI guard): no plain scalar loop over int8 values that the
 * compiler could vectorise on its own. GCC 12.2 miscompiles such loops under these flags (it
 * emits an unsigned x signed vpdpbusd for a signed x signed product); every int8 product here
 * is written with intrinsics, and scalar tails take the reference (dot.h) only through the
 * scalar table (ob_kernels(OB_ISA_SCALAR)), compiled without VNNI.
 */
#ifndef OB_KERNELS_AVX512_H
#define OB_KERNELS_AVX512_H

#include "cpu/kernels/avx2.h"

/* the kernel families' tables (a8-avx512.c, kq-avx512.c, fl-avx512.c) */
void ob_kernels_avx512_a8(struct ob_kernel_table *t);
void ob_kernels_avx512_kq(struct ob_kernel_table *t);

/*
 * Every function the tables point to ends with vzeroupper (_mm256_zeroupper) written out: GCC
 * emits none by itself in a function that uses zmm16..31, and the SSE code of the callers (the
 * driver, the forward pass) then runs several times slower (an SSE/AVX transition on each
 * instruction: measured 4x on a whole matmul). These wrappers do it for the dot and GEMM entries.
 */
#define DOT_ROWS512(fam, name, kind)                                                           \
    static void rows_##name(const void *w, const void *a, size_t as, int nr, int k, float *out) \
    {                                                                                          \
        switch (nr) {                                                                          \
        case 1: fam##_rows(w, a, as, k, out, kind, 1); break;                                  \
        case 2: fam##_rows(w, a, as, k, out, kind, 2); break;                                  \
        case 3: fam##_rows(w, a, as, k, out, kind, 3); break;                                  \
        default: fam##_rows(w, a, as, k, out, kind, 4); break;                                 \
        }                                                                                      \
        _mm256_zeroupper();                                                                    \
    }

#define GEMM_ENTRIES512(fam, name, kind)                                                        \
    static void prep_##name(const void *x, size_t xs, int nr, int k, void *p)                   \
    {                                                                                           \
        fam##_prep(x, xs, nr, k, p, kind);                                                      \
        _mm256_zeroupper();                                                                     \
    }                                                                                           \
    static void run_##name(const void *w, size_t rb, int n0, int n1, int k, const void *p,      \
                           int nr, float *y, size_t ldy, void *scratch)                         \
    {                                                                                           \
        fam##_run(w, rb, n0, n1, k, p, nr, y, ldy, scratch, kind);                              \
        _mm256_zeroupper();                                                                     \
    }

AI __m512i ld512(const void *p)
{
    return _mm512_loadu_si512(p);
}

AI void st512(void *p, __m512i v)
{
    _mm512_storeu_si512(p, v);
}

/* 32 bytes at p in both 256-bit halves */
AI __m512i bcast256(const void *p)
{
    return _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)p));
}

/* 16 bytes at p in all four 128-bit lanes */
AI __m512i bcast128_512(const void *p)
{
    return _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)p));
}

/* the two 256-bit halves added: 8 int32 whose sum is the sum of v's 16 */
AI __m256i fold512_i32(__m512i v)
{
    return _mm256_add_epi32(_mm512_castsi512_si256(v), _mm512_extracti64x4_epi64(v, 1));
}

/* a mask of the lanes j < m of 8 (m 0..8) */
AI __mmask8 mask8(int m)
{
    return (__mmask8)((1u << m) - 1u);
}

/* p + v in lanes j < m, p elsewhere (never p + 0.0: that would turn -0.0 into +0.0) */
AI __m256 add_lanes_k(__m256 p, __m256 v, int m)
{
    return m >= 8 ? _mm256_add_ps(p, v) : _mm256_mask_add_ps(p, mask8(m), p, v);
}

/* *acc += the int16 pairs of p times those of s, summed in pairs into int32 (VNNI) */
AI __m512i dpwssd(__m512i acc, __m512i p, __m512i s)
{
    return _mm512_dpwssd_epi32(acc, p, s);
}

/* acc + sum of 4 products u8 (u) x s8 (s) per int32 lane (VNNI; never saturates) */
AI __m512i dpbusd(__m512i acc, __m512i u, __m512i s)
{
    return _mm512_dpbusd_epi32(acc, u, s);
}

AI __m256i dpbusd256(__m256i acc, __m256i u, __m256i s)
{
    return _mm256_dpbusd_epi32(acc, u, s);
}

/*
 * 16 x 16 int32: afterwards r[t] lane j = (before) r[j] lane t. Four stages of 16 lane moves:
 * pairs of 32-bit, then 64-bit elements within 128-bit lanes, then 128-bit lanes twice.
 */
AI void tr16x16_32(__m512i *r)
{
    __m512i t[16], u[16];
    UNROLL
    for (int i = 0; i < 8; i++) {
        t[2 * i] = _mm512_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
    }
    UNROLL
    for (int i = 0; i < 4; i++) {          /* 128-bit lane L of u[4i + k]: r[4i..4i+3] element 4L + k */
        u[4 * i] = _mm512_unpacklo_epi64(t[4 * i], t[4 * i + 2]);
        u[4 * i + 1] = _mm512_unpackhi_epi64(t[4 * i], t[4 * i + 2]);
        u[4 * i + 2] = _mm512_unpacklo_epi64(t[4 * i + 1], t[4 * i + 3]);
        u[4 * i + 3] = _mm512_unpackhi_epi64(t[4 * i + 1], t[4 * i + 3]);
    }
    UNROLL
    for (int k = 0; k < 4; k++) {
        __m512i x0 = _mm512_shuffle_i32x4(u[k], u[4 + k], 0x88);
        __m512i y0 = _mm512_shuffle_i32x4(u[k], u[4 + k], 0xdd);
        __m512i x1 = _mm512_shuffle_i32x4(u[8 + k], u[12 + k], 0x88);
        __m512i y1 = _mm512_shuffle_i32x4(u[8 + k], u[12 + k], 0xdd);
        r[k] = _mm512_shuffle_i32x4(x0, x1, 0x88);
        r[8 + k] = _mm512_shuffle_i32x4(x0, x1, 0xdd);
        r[4 + k] = _mm512_shuffle_i32x4(y0, y1, 0x88);
        r[12 + k] = _mm512_shuffle_i32x4(y0, y1, 0xdd);
    }
}

/* ob_fold8 done lane-wise on 8 registers of partials (p[c] = partial c of every lane) */
AI __m512 fold8x16(const __m512 *p)
{
    __m512 q0 = _mm512_add_ps(p[0], p[4]), q1 = _mm512_add_ps(p[1], p[5]);
    __m512 q2 = _mm512_add_ps(p[2], p[6]), q3 = _mm512_add_ps(p[3], p[7]);
    q0 = _mm512_add_ps(q0, q2);
    q1 = _mm512_add_ps(q1, q3);
    return _mm512_add_ps(q0, q1);
}

/* 4 bytes at p in every int32 lane (an embedded {1to16} broadcast operand) */
AI __m512i bcast32(const void *p)
{
    return _mm512_set1_epi32((int)ld32(p));
}

#endif
