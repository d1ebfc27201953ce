/*
 * q4nx-avx2.c — AVX2 dot products of Q4NX tiles with A8 activations (compiled with the AVX2
 * set of the Makefile's per-file ISA rule). Reference: ob_dot_q4nx in lib/arith/q4nx.h; the
 * results are equal bit for bit (tests/unit/q4nx.c):
 *  - a tile's integer sum is exact in any order: the nibbles (0..15) enter
 *    _mm256_maddubs_epi16 as unsigned bytes against activations in [-127, 127], so a pair sum
 *    is at most 2 * 15 * 127 = 3810 (no int16 saturation), then int32 sums;
 *  - the float epilogue is the reference's, operation by operation, done lane-wise on 8
 *    consecutive tiles b0 .. b0 + 7 (b0 a multiple of 8): lane j is tile b0 + j and adds into
 *    partial j, the reference's partial b mod 8; a group of fewer than 8 tiles leaves the
 *    other lanes untouched (a blend, never p + 0.0, which would turn -0.0 into +0.0);
 *  - bf16 fields widen to float by a 16-bit shift, as ob_bf16_to_f32 does (NaN payloads kept);
 *  - the 8 partials fold as ob_fold8 does: (l + l+4), (l + l+2), then lanes 0 + 1.
 */
#include <immintrin.h>
#include <stddef.h>
#include <string.h>

#include "npu/npu.h"

#define AI static inline __attribute__((always_inline))
#define UNROLL _Pragma("GCC unroll 16")
#define TB ((size_t)sizeof(struct ob_block_q4nx))      /* 20 */
#define AB ((size_t)sizeof(struct ob_act_a8))          /* 40 */

AI __m256i ld(const void *p)
{
    return _mm256_loadu_si256((const __m256i *)p);
}

/* the 32 nibbles of a tile as bytes: values 0..15 the low nibbles of qs, 16..31 the high */
AI __m256i nibbles(const uint8_t *qs)
{
    __m256i x = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)qs));
    x = _mm256_srlv_epi64(x, _mm256_setr_epi64x(0, 0, 4, 4));
    return _mm256_and_si256(x, _mm256_set1_epi8(15));
}

/* 8 int32 whose sum is sum_i u_i s_i (u unsigned bytes <= 15, s signed) */
AI __m256i dot_u8s8(__m256i u, __m256i s)
{
    return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
}

/* lane j = the sum of the 8 lanes of v[j] (int32 adds: exact) */
AI __m256i hsum8(const __m256i *v)
{
    __m256i a01 = _mm256_add_epi32(_mm256_unpacklo_epi32(v[0], v[1]), _mm256_unpackhi_epi32(v[0], v[1]));
    __m256i a23 = _mm256_add_epi32(_mm256_unpacklo_epi32(v[2], v[3]), _mm256_unpackhi_epi32(v[2], v[3]));
    __m256i a45 = _mm256_add_epi32(_mm256_unpacklo_epi32(v[4], v[5]), _mm256_unpackhi_epi32(v[4], v[5]));
    __m256i a67 = _mm256_add_epi32(_mm256_unpacklo_epi32(v[6], v[7]), _mm256_unpackhi_epi32(v[6], v[7]));
    __m256i a = _mm256_add_epi32(_mm256_unpacklo_epi64(a01, a23), _mm256_unpackhi_epi64(a01, a23));
    __m256i b = _mm256_add_epi32(_mm256_unpacklo_epi64(a45, a67), _mm256_unpackhi_epi64(a45, a67));
    return _mm256_add_epi32(_mm256_permute2x128_si256(a, b, 0x20),
                            _mm256_permute2x128_si256(a, b, 0x31));
}

/* 8 bf16 values, one every `stride` bytes from p, as floats (exact) */
AI __m256 bf16x8(const uint8_t *p, size_t stride)
{
    uint16_t h[8];
    UNROLL
    for (int j = 0; j < 8; j++)
        memcpy(&h[j], p + (size_t)j * stride, 2);
    __m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)h));
    return _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
}

AI __m256 f32x8(const uint8_t *p, size_t stride)
{
    float f[8];
    UNROLL
    for (int j = 0; j < 8; j++)
        memcpy(&f[j], p + (size_t)j * stride, 4);
    return _mm256_loadu_ps(f);
}

AI __m256i i32x8(const uint8_t *p, size_t stride)
{
    int32_t v[8];
    UNROLL
    for (int j = 0; j < 8; j++)
        memcpy(&v[j], p + (size_t)j * stride, 4);
    return _mm256_loadu_si256((const __m256i *)v);
}

/* p + v in lanes j < m, p elsewhere */
AI __m256 add_lanes(__m256 p, __m256 v, int m)
{
    __m256 s = _mm256_add_ps(p, v);
    if (m >= 8)
        return s;
    __m256 mask = _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32(m),
                                                         _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)));
    return _mm256_blendv_ps(p, s, mask);
}

AI float fold8(__m256 p)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(p), _mm256_extractf128_ps(p, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* 8 tiles (m real: the rest zero tiles of a padded copy) against NR activation rows; lane j
 * of P[r] accumulates tile j */
AI void group(const uint8_t *w, const uint8_t *a, size_t as, __m256 *P, int m, int NR)
{
    __m256i wv[8];
    UNROLL
    for (int j = 0; j < 8; j++)
        wv[j] = nibbles(w + j * TB + offsetof(struct ob_block_q4nx, qs));
    __m256 s = bf16x8(w + offsetof(struct ob_block_q4nx, s), TB);
    __m256 z = bf16x8(w + offsetof(struct ob_block_q4nx, z), TB);
    UNROLL
    for (int r = 0; r < NR; r++) {
        const uint8_t *ar = a + r * as;
        __m256i v[8];
        UNROLL
        for (int j = 0; j < 8; j++)
            v[j] = dot_u8s8(wv[j], ld(ar + j * AB + offsetof(struct ob_act_a8, qs)));
        __m256i is = hsum8(v);
        __m256 da = f32x8(ar + offsetof(struct ob_act_a8, d), AB);
        __m256i sa = i32x8(ar + offsetof(struct ob_act_a8, sum), AB);
        /* (s * d_a) * (float)isum + (z * d_a) * (float)sum_a */
        __m256 t0 = _mm256_mul_ps(_mm256_mul_ps(s, da), _mm256_cvtepi32_ps(is));
        __m256 t1 = _mm256_mul_ps(_mm256_mul_ps(z, da), _mm256_cvtepi32_ps(sa));
        P[r] = add_lanes(P[r], _mm256_add_ps(t0, t1), m);
    }
}

AI void rows(const void *w, const void *a, size_t as, int k, float *out, int NR)
{
    const int nb = k / OB_QK4NX;
    const uint8_t *wb = w, *ab = a;
    __m256 P[OB_Q4NX_MAXR];
    UNROLL
    for (int r = 0; r < NR; r++)
        P[r] = _mm256_setzero_ps();
    int b0 = 0;
    for (; b0 + 8 <= nb; b0 += 8)
        group(wb + b0 * TB, ab + b0 * AB, as, P, 8, NR);
    if (b0 < nb) {                 /* the last 1..7 tiles, from zero-padded copies */
        int m = nb - b0;
        uint8_t wt[8 * TB] = {0};
        uint8_t at[OB_Q4NX_MAXR][8 * AB];
        memcpy(wt, wb + b0 * TB, (size_t)m * TB);
        UNROLL
        for (int r = 0; r < NR; r++) {
            memset(at[r], 0, sizeof at[r]);
            memcpy(at[r], ab + r * as + b0 * AB, (size_t)m * AB);
        }
        group(wt, at[0], sizeof at[0], P, m, NR);
    }
    UNROLL
    for (int r = 0; r < NR; r++)
        out[r] = fold8(P[r]);
}

static void rows_avx2(const void *w, const void *a, size_t as, int nr, int k, float *out)
{
    switch (nr) {
    case 1: rows(w, a, as, k, out, 1); return;
    case 2: rows(w, a, as, k, out, 2); return;
    case 3: rows(w, a, as, k, out, 3); return;
    default: rows(w, a, as, k, out, 4); return;
    }
}

ob_q4nx_rows_fn ob_q4nx_rows_avx2(void)
{
    return rows_avx2;
}
