/*
 * a8-avx2.c — AVX2 dot products of the 32-value formats (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0) with
 * A8 activations. Reference: ob_dot_q4_0 .. ob_dot_q8_0 in dot.h.
 *
 * Why the results are equal:
 *  - a block's integer sum is exact in any order. Weights enter _mm256_maddubs_epi16 as
 *    unsigned bytes (Q4 0..15, Q5 0..31, Q8_0 |w| <= 128 with the sign moved onto the
 *    activation), activations are in [-127, 127], so a pair sum is at most 2 * 15 * 127 = 3810
 *    (Q4), 7874 (Q5), 32512 (Q8_0): no int16 saturation. The GEMM adds the int16 pair sums
 *    of several dwords before widening: 8 for Q4 (30480), 4 for Q5 (31496); it splits Q8_0
 *    into two nibble streams (0..15 each, 8 dwords: 30480), see below.
 *  - Q4_0 / Q5_0 take the offset off in int32: sum (q - o) a = sum q a - o * sum a (exact);
 *    the GEMM's Q8_0 likewise (w = 16 (h + 8) + l - 128).
 *  - the float epilogue is the reference's, operation by operation. Dot: done lane-wise on 8
 *    consecutive blocks b0 .. b0 + 7 (b0 a multiple of 8), so lane j is block b0 + j and adds
 *    into partial j, the reference's partial b mod 8; a group of fewer than 8 blocks (read in
 *    place, nothing past it) blends the untouched lanes back. The fold is ob_fold8's (4, 2, 1).
 *  - fp16 scales are converted with F16C (exact; a signalling NaN comes out quiet, and the
 *    first multiplication quietens the reference's too, so the product bits agree).
 *  - GEMM: lane n of a register is weight row n of an 8-row panel, one register per
 *    activation row; block b adds into partial b mod 8 (8 registers per activation row, kept in
 *    memory), and they fold lane-wise in ob_fold8's order.
 *
 * Entry points per format: dot (one weight row against 1..4 raw activation rows), for the
 * nibble formats a GEMV (few rows, activations laid out once per call to match the packed
 * weights: decode and small batches), and a GEMM (many rows, see kernels.h) that prepares the
 * activations and decodes weight rows into panels once per call.
 */
#include <stddef.h>

#include "cpu/kernels/avx2.h"
#include "cpu/kernels/blockinfo.h"
#include "cpu/kernels/a8p.h"

/* 32 nibbles: values 0..15 = low nibbles of qs[0..15], 16..31 = high nibbles */
AI __m256i unpack_q4(const uint8_t *qs)
{
    __m256i x = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)qs));
    x = _mm256_srlv_epi64(x, _mm256_setr_epi64x(0, 0, 4, 4));
    return _mm256_and_si256(x, _mm256_set1_epi8(15));
}

/* bit j of the little-endian 32-bit qh as byte j: 16 if set, 0 if clear */
AI __m256i unpack_q5h(const uint8_t *qh)
{
    __m256i v = _mm256_set1_epi32((int)ld32(qh));
    const __m256i shuf = _mm256_setr_epi64x(0x0000000000000000ll, 0x0101010101010101ll,
                                            0x0202020202020202ll, 0x0303030303030303ll);
    v = _mm256_shuffle_epi8(v, shuf);          /* byte j = byte j/8 of qh */
    const __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201ull);
    v = _mm256_cmpeq_epi8(_mm256_and_si256(v, bit), bit);
    return _mm256_and_si256(v, _mm256_set1_epi8(16));
}

/* a weight block's 32 values as bytes: unsigned q (Q4, Q5), or the signed w of Q8_0 */
AI __m256i a8_w(const uint8_t *blk, int kind)
{
    switch (kind) {
    case K_Q4_0: return unpack_q4(blk + offsetof(struct ob_block_q4_0, qs));
    case K_Q4_1: return unpack_q4(blk + offsetof(struct ob_block_q4_1, qs));
    case K_Q5_0:
        return _mm256_or_si256(unpack_q4(blk + offsetof(struct ob_block_q5_0, qs)),
                               unpack_q5h(blk + offsetof(struct ob_block_q5_0, qh)));
    case K_Q5_1:
        return _mm256_or_si256(unpack_q4(blk + offsetof(struct ob_block_q5_1, qs)),
                               unpack_q5h(blk + offsetof(struct ob_block_q5_1, qh)));
    }
    return ld(blk + offsetof(struct ob_block_q8_0, qs));
}

/* 8 int32 whose sum is sum_i w_i a_i (Q8_0: sign moved onto the activation) */
AI __m256i a8_dot(__m256i wv, __m256i av, int kind)
{
    if (kind == K_Q8_0)
        return dot_u8s8(_mm256_abs_epi8(wv), _mm256_sign_epi8(av, wv));
    return dot_u8s8(wv, av);
}

/* ---- one weight row against 1..4 raw activation rows -------------------------------------- */

/*
 * Blocks b0 .. b0 + m - 1 (m <= 8) of one weight row against NR activation rows; P[r] lane j
 * accumulates block b0 + j. Nothing past block m - 1 is read: the last group of a row whose
 * block count is not a multiple of 8 (Gemma's K = 640: 20 blocks) runs in place.
 */
AI void a8_group(const uint8_t *w, const uint8_t *a, size_t as, __m256 *P, int m, int kind,
                 int NR)
{
    const size_t bb = a8_bb(kind);
    __m256i wv[8];
    UNROLL
    for (int j = 0; j < 8; j++)
        wv[j] = j < m ? a8_w(w + j * bb, kind) : _mm256_setzero_si256();
    __m256 dw = f16x8_n(w, bb, m);
    __m256 mw = a8_has_m(kind) ? f16x8_n(w + 2, bb, m) : _mm256_setzero_ps();
    UNROLL
    for (int r = 0; r < NR; r++) {
        const uint8_t *ar = a + r * as;
        __m256i v[8];
        UNROLL
        for (int j = 0; j < 8; j++)
            v[j] = j < m ? a8_dot(wv[j], ld(ar + j * AB + offsetof(struct ob_act_a8, qs)), kind)
                         : _mm256_setzero_si256();
        __m256i is = hsum8v(v);
        __m256 da = f32x8_n(ar, AB, m);
        __m256i sa = _mm256_setzero_si256();
        if (a8_off_shift(kind) || a8_has_m(kind))
            sa = i32x8_n(ar + offsetof(struct ob_act_a8, sum), AB, m);
        if (a8_off_shift(kind))
            is = _mm256_sub_epi32(is, _mm256_sll_epi32(sa, _mm_cvtsi32_si128(a8_off_shift(kind))));
        /* (d_w * d_a) * (float)isum [+ (m_w * d_a) * (float)sum_a] */
        __m256 v0 = _mm256_mul_ps(_mm256_mul_ps(dw, da), _mm256_cvtepi32_ps(is));
        if (a8_has_m(kind))
            v0 = _mm256_add_ps(v0, _mm256_mul_ps(_mm256_mul_ps(mw, da), _mm256_cvtepi32_ps(sa)));
        P[r] = add_lanes(P[r], v0, m);
    }
}

AI void a8_rows(const void *w, const void *a, size_t as, int k, float *out, int kind, int NR)
{
    const int nb = k / 32;
    const size_t bb = a8_bb(kind);
    const uint8_t *wb = w, *ab = a;
    __m256 P[OB_MAXR];
    UNROLL
    for (int r = 0; r < NR; r++)
        P[r] = _mm256_setzero_ps();
    int b0 = 0;
    for (; b0 + 8 <= nb; b0 += 8)
        a8_group(wb + b0 * bb, ab + b0 * AB, as, P, 8, kind, NR);
    if (b0 < nb)                         /* the last 1..7 blocks */
        a8_group(wb + b0 * bb, ab + b0 * AB, as, P, nb - b0, kind, NR);
    UNROLL
    for (int r = 0; r < NR; r++)
        out[r] = fold8(P[r]);
}

DOT_ROWS(a8, q4_0, K_Q4_0)
DOT_ROWS(a8, q4_1, K_Q4_1)
DOT_ROWS(a8, q5_0, K_Q5_0)
DOT_ROWS(a8, q5_1, K_Q5_1)
DOT_ROWS(a8, q8_0, K_Q8_0)

/* ---- few rows with prepared activations (decode): the nibble formats ------------------------ */

/*
 * Q4_0, Q4_1, Q5_0, Q5_1 below the GEMM's min_rows (kernels.h's gemv): the activation rows are
 * laid out once per ob_matmul call (a8v_prep) to match the weights' packed nibbles, so that a
 * weight row's blocks need no byte shuffles: register k of a group of eight blocks holds the
 * 16 bytes of nibble pairs of block k in its low 128 bits and of block k + 4 in its high ones;
 * the low nibbles (values 0..15) meet the activation's values 0..15 of the same blocks, the
 * high nibbles values 16..31. _mm256_maddubs_epi16 of both, added (int16: at most 2 * 3810
 * for Q4, 2 * 7874 for Q5) and widened by _mm256_madd_epi16, leave four int32 per block; two
 * rounds of _mm256_hadd_epi32 make lane j the sum of block j (exact). The activation's
 * scales and offsets are contiguous per eight blocks, and the epilogue is the dot's
 * (a8_group), lane-wise on the eight blocks.
 */
struct a8v {                       /* eight blocks of one activation row, prepared */
    int8_t lo[4][32];              /* [k]: values 0..15 of blocks k and k + 4 */
    int8_t hi[4][32];              /* values 16..31 */
    float d[8];                    /* d_a */
    int32_t s[8];                  /* the offset's share o * sum (Q4_0, Q5_0), else (float)sum */
};

static size_t a8v_prep_bytes(int k, int nr)
{
    return (size_t)nr * (size_t)((k / 32 + 7) / 8) * sizeof(struct a8v);
}

/* groups of eight blocks per row; the last group's missing blocks are zeros */
AI void a8v_prep(const void *x, size_t xs, int nr, int k, void *pv, int kind)
{
    const int nb = k / 32;
    struct a8v *g = pv;
    for (int r = 0; r < nr; r++) {
        const struct ob_act_a8 *a = (const struct ob_act_a8 *)((const char *)x + r * xs);
        for (int b0 = 0; b0 < nb; b0 += 8, g++) {
            memset(g, 0, sizeof *g);
            for (int j = 0; j < 8 && b0 + j < nb; j++) {
                const struct ob_act_a8 *ab = &a[b0 + j];
                memcpy(&g->lo[j % 4][16 * (j / 4)], ab->qs, 16);
                memcpy(&g->hi[j % 4][16 * (j / 4)], ab->qs + 16, 16);
                g->d[j] = ab->d;
                if (a8_has_m(kind)) {
                    float f = (float)ab->sum;
                    memcpy(&g->s[j], &f, 4);
                } else {
                    g->s[j] = (int32_t)((uint32_t)ab->sum << a8_off_shift(kind));
                }
            }
        }
    }
}

static size_t a8v_scratch_bytes(int k)
{
    (void)k;
    return 0;
}

/* the 16 bytes at p (k < m) and at p + 4 bb (k + 4 < m) as the two halves of a register */
AI __m256i ld2x16(const uint8_t *p, size_t bb, int k, int m)
{
    __m128i lo = k < m ? _mm_loadu_si128((const __m128i *)p) : _mm_setzero_si128();
    if (k + 4 >= m)
        return _mm256_castsi128_si256(lo);   /* upper half: zeros (vmovdqu xmm clears it) */
    return _mm256_inserti128_si256(_mm256_castsi128_si256(lo),
                                   _mm_loadu_si128((const __m128i *)(p + 4 * bb)), 1);
}

/* Q5: the high bits of blocks k and k + 4 as 16 (set) or 0 (clear) bytes, values 0..15 (*lo)
 * and 16..31 (*hi) */
AI void q5v_hbits(const uint8_t *qh, size_t bb, int k, int m, __m256i *lo, __m256i *hi)
{
    __m128i a = k < m ? _mm_set1_epi32((int)ld32(qh)) : _mm_setzero_si128();
    __m128i b = k + 4 < m ? _mm_set1_epi32((int)ld32(qh + 4 * bb)) : _mm_setzero_si128();
    __m256i v = _mm256_setr_m128i(a, b);
    const __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201ull);
    const __m256i s0 = _mm256_setr_epi64x(0x0000000000000000ll, 0x0101010101010101ll,
                                          0x0000000000000000ll, 0x0101010101010101ll);
    const __m256i s1 = _mm256_add_epi8(s0, _mm256_set1_epi8(2));
    const __m256i b4 = _mm256_set1_epi8(16);
    __m256i x = _mm256_and_si256(_mm256_shuffle_epi8(v, s0), bit);
    __m256i y = _mm256_and_si256(_mm256_shuffle_epi8(v, s1), bit);
    *lo = _mm256_and_si256(_mm256_cmpeq_epi8(x, bit), b4);
    *hi = _mm256_and_si256(_mm256_cmpeq_epi8(y, bit), b4);
}

/*
 * Blocks b0 .. b0 + m - 1 (m <= 8; nothing past them is read) of one weight row against NR
 * prepared activation groups (g, gs groups apart); P[r] lane j accumulates block b0 + j.
 */
AI void a8v_group(const uint8_t *w, const struct a8v *g, size_t gs, __m256 *P, int m, int kind,
                  int NR)
{
    const size_t bb = a8_bb(kind);
    const size_t qs = kind == K_Q4_0 ? offsetof(struct ob_block_q4_0, qs)
                    : kind == K_Q4_1 ? offsetof(struct ob_block_q4_1, qs)
                    : kind == K_Q5_0 ? offsetof(struct ob_block_q5_0, qs)
                                     : offsetof(struct ob_block_q5_1, qs);
    const __m256i m4 = _mm256_set1_epi8(15), one = _mm256_set1_epi16(1);
    __m256i L[4], H[4];
    UNROLL
    for (int k = 0; k < 4; k++) {
        __m256i x = ld2x16(w + k * bb + qs, bb, k, m);
        L[k] = _mm256_and_si256(x, m4);
        H[k] = _mm256_and_si256(_mm256_srli_epi16(x, 4), m4);
        if (kind == K_Q5_0 || kind == K_Q5_1) {
            size_t qh = kind == K_Q5_0 ? offsetof(struct ob_block_q5_0, qh)
                                       : offsetof(struct ob_block_q5_1, qh);
            __m256i hl, hh;
            q5v_hbits(w + k * bb + qh, bb, k, m, &hl, &hh);
            L[k] = _mm256_or_si256(L[k], hl);
            H[k] = _mm256_or_si256(H[k], hh);
        }
    }
    __m256 dw = f16x8_n(w, bb, m);
    __m256 mw = a8_has_m(kind) ? f16x8_n(w + 2, bb, m) : _mm256_setzero_ps();
    UNROLL
    for (int r = 0; r < NR; r++) {
        const struct a8v *a = g + r * gs;
        __m256i s[4];
        UNROLL
        for (int k = 0; k < 4; k++)
            s[k] = _mm256_madd_epi16(_mm256_add_epi16(mubs(L[k], ld(a->lo[k])), mubs(H[k], ld(a->hi[k]))), one);
        /* lane j: block j (halves: blocks 0..3, 4..7) */
        __m256i is = _mm256_hadd_epi32(_mm256_hadd_epi32(s[0], s[1]), _mm256_hadd_epi32(s[2], s[3]));
        if (a8_off_shift(kind))
            is = _mm256_sub_epi32(is, ld(a->s));
        __m256 da = _mm256_loadu_ps(a->d);
        /* (d_w * d_a) * (float)isum [+ (m_w * d_a) * (float)sum_a] */
        __m256 v0 = _mm256_mul_ps(_mm256_mul_ps(dw, da), _mm256_cvtepi32_ps(is));
        if (a8_has_m(kind))
            v0 = _mm256_add_ps(v0, _mm256_mul_ps(_mm256_mul_ps(mw, da), _mm256_loadu_ps((const float *)a->s)));
        P[r] = add_lanes(P[r], v0, m);
    }
}

#include "cpu/kernels/a8v-rows.h"

GEMM_ENTRIES(a8v, v_q4_0, K_Q4_0)
GEMM_ENTRIES(a8v, v_q4_1, K_Q4_1)
GEMM_ENTRIES(a8v, v_q5_0, K_Q5_0)
GEMM_ENTRIES(a8v, v_q5_1, K_Q5_1)

/* ---- many rows: GEMM --------------------------------------------------------------------------- */

/*
 * Weight rows are decoded in panels of 8, one row per int32 lane (as in kq-avx2.c); activation
 * rows stay in the A8 layout (a copy made by prep) and enter _mm256_maddubs_epi16 as 4 bytes
 * broadcast to every lane, so every result is a lane and the epilogue runs 8 dot products at
 * once. The int16 pair sums of a block's 8 dwords are added before widening for Q4 (8 * 3810
 * = 30480), 4 at a time for Q5 (31496). Q8_0 is split into two nibble streams: w = 16 h + l
 * with l = w & 15 and h + 8 = (w >> 4) + 8 both in 0..15, so that
 *     sum w a = sum l a + 16 sum (h + 8) a - 128 sum a
 * (exact in int32) runs as two Q4-like streams.
 */
#define PW 8                       /* weight rows of a panel */
#define RT 6                       /* activation rows of a tile */

/*
 * One block of an 8-row panel: dword t (values 4t .. 4t + 3) of row n in lane n, as unsigned
 * bytes: q (Q8_0: l), then for Q8_0 h + 8; then d and m of each row as floats.
 */
AI size_t a8d_qbytes(int kind)
{
    return kind == K_Q8_0 ? 512 : 256;
}

AI size_t a8d_size(int kind)
{
    return a8d_qbytes(kind) + 64;
}

static size_t a8_prep_bytes(int k, int nr)
{
    return (size_t)nr * (size_t)(k / 32) * AB;
}

/* the shift of the offset the GEMM takes off (Q8_0: the 128 of its split) */
AI int a8_gsh(int kind)
{
    return kind == K_Q8_0 ? 7 : a8_off_shift(kind);
}

/*
 * The activation rows in the A8 layout, each block's sum replaced by what the tile adds: the
 * offset's share o * sum as an int32 (Q4_0, Q5_0, Q8_0), or (float)sum (Q4_1, Q5_1), so that
 * the tile broadcasts it from memory.
 */
AI void a8_prep(const void *x, size_t xs, int nr, int k, void *pv, int kind)
{
    const int nb = k / 32;
    for (int r = 0; r < nr; r++) {
        const struct ob_act_a8 *a = (const struct ob_act_a8 *)((const char *)x + r * xs);
        struct ob_act_a8 *p = (struct ob_act_a8 *)pv + (size_t)r * nb;
        memcpy(p, a, (size_t)nb * AB);
        for (int b = 0; b < nb; b++) {
            if (a8_has_m(kind)) {
                float f = (float)a[b].sum;
                memcpy(&p[b].sum, &f, 4);
            } else {
                p[b].sum = (int32_t)((uint32_t)a[b].sum << a8_gsh(kind));
            }
        }
    }
}

static size_t a8_scratch_bytes_q(int k)
{
    return (size_t)(k / 32) * a8d_size(K_Q4_0);
}

static size_t a8_scratch_bytes_q8(int k)
{
    return (size_t)(k / 32) * a8d_size(K_Q8_0);
}

/* rows [0, rows) of a panel (row n at w + n * rb; the rest zeros) into nb blocks */
AI void a8_decode8(const uint8_t *w, size_t rb, int rows, int nb, uint8_t *dst, int kind)
{
    const size_t bb = a8_bb(kind), ds = a8d_size(kind), qb = a8d_qbytes(kind);
    const __m256i m4 = _mm256_set1_epi8(15);
    for (int b = 0; b < nb; b++, dst += ds) {
        const uint8_t *blk = w + (size_t)b * bb;
        __m256i P[8];
        switch (kind) {
        case K_Q4_0:
        case K_Q4_1:                                 /* packed bytes first, then lane-wise */
            tr8x4_ld(blk + (kind == K_Q4_0 ? offsetof(struct ob_block_q4_0, qs)
                                            : offsetof(struct ob_block_q4_1, qs)), rb, rows, P);
            UNROLL
            for (int i = 0; i < 4; i++) {            /* qs dword i: values 4i .., 16 + 4i .. */
                st(dst + 32 * i, _mm256_and_si256(P[i], m4));
                st(dst + 32 * (4 + i), _mm256_and_si256(_mm256_srli_epi16(P[i], 4), m4));
            }
            break;
        case K_Q8_0:
            tr8x8_ld(blk + offsetof(struct ob_block_q8_0, qs), rb, rows, P);
            UNROLL
            for (int i = 0; i < 8; i++) {
                __m256i l, h8;
                a8p_q8_split(P[i], &l, &h8);
                st(dst + 32 * i, l);
                st(dst + 256 + 32 * i, h8);
            }
            break;
        default:                                     /* Q5_0, Q5_1: whole rows, transposed */
            UNROLL
            for (int n = 0; n < 8; n++)
                P[n] = n < rows ? a8_w(blk + n * rb, kind) : _mm256_setzero_si256();
            tr8x8_32(P);
            UNROLL
            for (int i = 0; i < 8; i++)
                st(dst + 32 * i, P[i]);
            break;
        }
        int m = rows < 8 ? rows : 8;
        _mm256_storeu_ps((float *)(dst + qb), m > 0 ? f16x8_n(blk, rb, m) : _mm256_setzero_ps());
        _mm256_storeu_ps((float *)(dst + qb + 32), a8_has_m(kind) && m > 0 ? f16x8_n(blk + 2, rb, m)
                                                                          : _mm256_setzero_ps());
    }
}

/*
 * A tile: the panel's 8 weight rows (W, nb blocks) against RA activation rows (a, ast bytes
 * apart); y[r * ldy + n] for the first nv rows n of the panel. Block b adds into partial b mod 8
 * (part[b & 7], in memory), which fold lane-wise in ob_fold8's order. pf, pfn: bytes of the
 * next panel to prefetch, a part per block.
 */
AI void a8_tile(const uint8_t *W, const uint8_t *a, size_t ast, int nb, float *y, size_t ldy,
                int nv, const char *pf, size_t pfn, int kind, int RA)
{
    const size_t ds = a8d_size(kind), qb = a8d_qbytes(kind);
    const int sh = a8_gsh(kind);
    const __m256i ones = _mm256_set1_epi16(1), x16 = _mm256_set1_epi16(16);
    __m256 part[8][RT];
    clear_parts((__m256 *)part, RT, RA);
#pragma GCC unroll 1
    for (int b = 0; b < nb; b++) {
        const uint8_t *wb = W + (size_t)b * ds;
        const uint8_t *ab = a + (size_t)b * AB + offsetof(struct ob_act_a8, qs);
        prefetch_span(pf + pfn * b / nb, pf + pfn * (b + 1) / nb);
        __m256i I[RT];
        if (kind == K_Q8_0) {
            __m256i C[RT], H[RT];
            UNROLL
            for (int r = 0; r < RA; r++)
                C[r] = H[r] = _mm256_setzero_si256();
            UNROLL
            for (int t = 0; t < 8; t++) {
                __m256i wl = ld(wb + 32 * t), wh = ld(wb + 256 + 32 * t);
                UNROLL
                for (int r = 0; r < RA; r++)
                    mubs2_add_b32(&C[r], &H[r], wl, wh, ab + r * ast + 4 * t);
            }
            UNROLL
            for (int r = 0; r < RA; r++)
                I[r] = _mm256_add_epi32(_mm256_madd_epi16(C[r], ones), _mm256_madd_epi16(H[r], x16));
        } else {
            const int ph = kind == K_Q4_0 || kind == K_Q4_1 ? 8 : 4;   /* dwords per int16 sum */
            UNROLL
            for (int h = 0; h < 8; h += ph) {
                __m256i C[RT];
                UNROLL
                for (int t = h; t < h + ph; t++) {
                    __m256i wv = ld(wb + 32 * t);
                    UNROLL
                    for (int r = 0; r < RA; r++) {
                        if (t == h)
                            C[r] = mubs(wv, _mm256_set1_epi32((int)ld32(ab + r * ast + 4 * t)));
                        else
                            mubs_add_b32(&C[r], wv, ab + r * ast + 4 * t);
                    }
                }
                UNROLL
                for (int r = 0; r < RA; r++) {
                    __m256i x = _mm256_madd_epi16(C[r], ones);
                    I[r] = h == 0 ? x : _mm256_add_epi32(I[r], x);
                }
            }
        }
        __m256 dw = _mm256_loadu_ps((const float *)(wb + qb));
        UNROLL
        for (int r = 0; r < RA; r++) {
            const uint8_t *ar = a + (size_t)b * AB + r * ast;
            __m256 da = _mm256_set1_ps(ldf(ar));
            const uint8_t *as = ar + offsetof(struct ob_act_a8, sum);   /* prepared */
            __m256i is = I[r];
            if (sh)                                  /* sum (q - o) a = sum q a - o sum a */
                is = _mm256_sub_epi32(is, _mm256_set1_epi32((int32_t)ld32(as)));
            /* (d_w * d_a) * (float)isum [+ (m_w * d_a) * (float)sum_a] */
            __m256 v = _mm256_mul_ps(_mm256_mul_ps(dw, da), _mm256_cvtepi32_ps(is));
            if (a8_has_m(kind)) {
                __m256 mw = _mm256_loadu_ps((const float *)(wb + qb + 32));
                v = _mm256_add_ps(v, _mm256_mul_ps(_mm256_mul_ps(mw, da), _mm256_set1_ps(ldf(as))));
            }
            part[b & 7][r] = _mm256_add_ps(part[b & 7][r], v);
        }
    }
    fold_store_rows((const __m256 *)part, RT, RA, y, ldy, nv);
}

/* ---- Q4_0, Q4_1, Q5_0 and Q8_0 in panels (matrix.h OB_LAYOUT_P8) -------------------------- */

/* a8_decode8 from panels: nb panel blocks (the panel at w) into the tile's blocks */
AI void a8p_decode8(const uint8_t *w, int nb, uint8_t *dst, int kind)
{
    const size_t pb = PW * a8_bb(kind), ds = a8d_size(kind), qb = a8d_qbytes(kind);
    for (int b = 0; b < nb; b++, dst += ds) {
        const uint8_t *wb = w + (size_t)b * pb;
        if (kind == K_Q8_0) {                        /* l, then h + 8 */
            UNROLL
            for (int d = 0; d < 8; d++) {
                __m256i l, h8;
                a8p_q8_split(ld(wb + 32 * d), &l, &h8);
                st(dst + 32 * d, l);
                st(dst + 256 + 32 * d, h8);
            }
        } else {
            UNROLL
            for (int d = 0; d < 4; d++) {
                __m256i lo, hi;
                a8p_vals(wb, d, kind, &lo, &hi);
                st(dst + 32 * d, lo);
                st(dst + 32 * (4 + d), hi);
            }
        }
        _mm256_storeu_ps((float *)(dst + qb), a8p_scale(wb, kind, 0));
        _mm256_storeu_ps((float *)(dst + qb + 32),
                         kind == K_Q4_1 ? a8p_scale(wb, kind, 1) : _mm256_setzero_ps());
    }
}

/*
 * NR (1 to 3) activation rows (prepared by a8_prep: the offset's share as an int32, or Q4_1's
 * (float)sum; ast bytes apart) against a panel of 8 rows read as they lie: the tile's
 * arithmetic (lane n is row n; the int16 pair sums of 8 dwords (Q4: 8 * 3810 = 30480) or 4
 * (Q5: 4 * 7874 = 31496) added before widening, Q8_0 split into l and h + 8; the offset off
 * in int32; block b into partial b mod 8, folded lane-wise), the quants unpacked in registers.
 * Prefetched ob_pf_panel ahead, as q4k_panel_rows (kq-avx2.c) is.
 */
AI void a8p_rows(const uint8_t *w, size_t at, size_t end, int nb, const uint8_t *a, size_t ast,
                 float *y, size_t ldy, int kind, int NR)
{
    const size_t pb = PW * a8_bb(kind), pf = ob_pf_panel(NR);
    const __m256i ones = _mm256_set1_epi16(1);
    const int q5 = kind == K_Q5_0;
    __m256 part[8][3];
    clear_parts((__m256 *)part, 3, NR);
#pragma GCC unroll 1
    for (int b = 0; b < nb; b++) {
        const uint8_t *wb = w + at + (size_t)b * pb, *ab = a + (size_t)b * AB;
        ob_pf_span(w, at + (size_t)b * pb + pf, pb, end);
        __m256i CL[3], CH[3];          /* Q4: CL alone sums all 8 dwords; Q8_0: l, h + 8 */
        if (kind == K_Q8_0)
            UNROLL
            for (int d = 0; d < 8; d++) {
                __m256i l, h;
                a8p_q8_split(ld(wb + 32 * d), &l, &h);
                UNROLL
                for (int r = 0; r < NR; r++) {
                    const uint8_t *s = ab + r * ast + offsetof(struct ob_act_a8, qs) + 4 * d;
                    if (d == 0) {
                        const __m256i x = _mm256_set1_epi32((int)ld32(s));
                        CL[r] = mubs(l, x);
                        CH[r] = mubs(h, x);
                    } else {
                        mubs2_add_b32(&CL[r], &CH[r], l, h, s);
                    }
                }
            }
        else
            UNROLL
            for (int d = 0; d < 4; d++) {
                __m256i lo, hi;
                a8p_vals(wb, d, kind, &lo, &hi);
                UNROLL
                for (int r = 0; r < NR; r++) {
                    const uint8_t *s = ab + r * ast + offsetof(struct ob_act_a8, qs) + 4 * d;
                    if (d == 0)
                        CL[r] = mubs(lo, _mm256_set1_epi32((int)ld32(s)));
                    else
                        mubs_add_b32(&CL[r], lo, s);
                    if (d == 0 && q5)
                        CH[r] = mubs(hi, _mm256_set1_epi32((int)ld32(s + 16)));
                    else
                        mubs_add_b32(q5 ? &CH[r] : &CL[r], hi, s + 16);
                }
            }
        const __m256 dw = a8p_scale(wb, kind, 0);
        UNROLL
        for (int r = 0; r < NR; r++) {
            const uint8_t *ar = ab + r * ast, *as = ar + offsetof(struct ob_act_a8, sum);
            const __m256 da = _mm256_set1_ps(ldf(ar));
            __m256i is = _mm256_madd_epi16(CL[r], ones);
            if (q5)
                is = _mm256_add_epi32(is, _mm256_madd_epi16(CH[r], ones));
            if (kind == K_Q8_0)                      /* l + 16 (h + 8) */
                is = _mm256_add_epi32(is, _mm256_madd_epi16(CH[r], _mm256_set1_epi16(16)));
            if (kind != K_Q4_1)                      /* sum (q - o) a = sum q a - o sum a */
                is = _mm256_sub_epi32(is, _mm256_set1_epi32((int32_t)ld32(as)));
            /* (d_w * d_a) * (float)isum [+ (m_w * d_a) * (float)sum_a] */
            __m256 v = _mm256_mul_ps(_mm256_mul_ps(dw, da), _mm256_cvtepi32_ps(is));
            if (kind == K_Q4_1)
                v = _mm256_add_ps(v, _mm256_mul_ps(_mm256_mul_ps(a8p_scale(wb, kind, 1), da),
                                                   _mm256_set1_ps(ldf(as))));
            part[b & 7][r] = _mm256_add_ps(part[b & 7][r], v);
        }
    }
    fold_store_rows((const __m256 *)part, 3, NR, y, ldy, PW);
}

AI void a8_run_l(const void *w, size_t rb, int n0, int n1, int k, const void *pv, int nr,
                 float *y, size_t ldy, void *scratch, int kind, int P8)
{
    const int nb = k / 32;
    const size_t ast = (size_t)nb * AB;
    uint8_t *dec = scratch;
    const uint8_t *p = pv;
    for (int n = n0; n < n1; n += PW) {
        int nv = n1 - n < PW ? n1 - n : PW;
        /* the next panel's rows, fetched while this one computes */
        int pn = n1 - n - PW < PW ? n1 - n - PW : PW;
        const char *pf = (const char *)w + (size_t)(n + PW) * rb;
        size_t pfn = pn > 0 ? (size_t)pn * rb : 0;
        if (P8)
            a8p_decode8((const uint8_t *)w + (size_t)n * rb, nb, dec, kind);
        else
            a8_decode8((const uint8_t *)w + (size_t)n * rb, rb, nv, nb, dec, kind);
        /* tiles of RT rows or as few fewer as balance the row count (8 rows: 4 + 4) */
        int nt = (nr + RT - 1) / RT;
        for (int i = 0, r = 0; i < nt; i++) {
            int m = nr / nt + (i < nr % nt);
            const uint8_t *a = p + r * ast;
            float *yr = y + (size_t)r * ldy + n;
            /* tile i fetches part i of the next panel */
            const char *tpf = pf + pfn * i / nt;
            size_t tpfn = pfn * (i + 1) / nt - pfn * i / nt;
            switch (m) {
            case 1: a8_tile(dec, a, ast, nb, yr, ldy, nv, tpf, tpfn, kind, 1); break;
            case 2: a8_tile(dec, a, ast, nb, yr, ldy, nv, tpf, tpfn, kind, 2); break;
            case 3: a8_tile(dec, a, ast, nb, yr, ldy, nv, tpf, tpfn, kind, 3); break;
            case 4: a8_tile(dec, a, ast, nb, yr, ldy, nv, tpf, tpfn, kind, 4); break;
            case 5: a8_tile(dec, a, ast, nb, yr, ldy, nv, tpf, tpfn, kind, 5); break;
            default: a8_tile(dec, a, ast, nb, yr, ldy, nv, tpf, tpfn, kind, 6); break;
            }
            r += m;
        }
    }
}

AI void a8_run(const void *w, size_t rb, int n0, int n1, int k, const void *pv, int nr, float *y,
               size_t ldy, void *scratch, int kind)
{
    a8_run_l(w, rb, n0, n1, k, pv, nr, y, ldy, scratch, kind, 0);
}

/* the panel entries: up to 3 activation rows stream the panels (a8p_rows), more run the tiles
 * on panels decoded without the transposes */
AI void a8p_run(const void *w, size_t rb, int n0, int n1, int k, const void *pv, int nr,
                float *y, size_t ldy, void *scratch, int kind)
{
    if (nr > 3) {
        a8_run_l(w, rb, n0, n1, k, pv, nr, y, ldy, scratch, kind, 1);
        return;
    }
    const int nb = k / 32;
    const size_t ast = (size_t)nb * AB, end = (size_t)n1 * rb;
    ob_pf_task(w, rb, n0, n1);
    for (int n = n0; n < n1; n += PW)
        switch (nr) {
        case 1: a8p_rows(w, (size_t)n * rb, end, nb, pv, ast, y + n, ldy, kind, 1); break;
        case 2: a8p_rows(w, (size_t)n * rb, end, nb, pv, ast, y + n, ldy, kind, 2); break;
        default: a8p_rows(w, (size_t)n * rb, end, nb, pv, ast, y + n, ldy, kind, 3); break;
        }
}

#define a8p_prep a8_prep
GEMM_ENTRIES(a8p, p_q4_0, K_Q4_0)
GEMM_ENTRIES(a8p, p_q4_1, K_Q4_1)
GEMM_ENTRIES(a8p, p_q5_0, K_Q5_0)
GEMM_ENTRIES(a8p, p_q8_0, K_Q8_0)

GEMM_ENTRIES(a8, q4_0, K_Q4_0)
GEMM_ENTRIES(a8, q4_1, K_Q4_1)
GEMM_ENTRIES(a8, q5_0, K_Q5_0)
GEMM_ENTRIES(a8, q5_1, K_Q5_1)
GEMM_ENTRIES(a8, q8_0, K_Q8_0)

/* min_rows: where the GEMM overtakes the few-row kernels (the GEMV for the nibble formats, the
 * dot for Q8_0), weights from memory (bench/kernels on an AVX-512 Xeon held at avx2) */
void ob_kernels_avx2_a8(struct ob_kernel_table *t)
{
#define a8_scratch_bytes a8_scratch_bytes_q
    GEMM_SET(t, OB_Q4_0, a8, q4_0, 4, PW);
    GEMM_SET(t, OB_Q4_1, a8, q4_1, 4, PW);
    GEMM_SET(t, OB_Q5_0, a8, q5_0, 4, PW);
    GEMM_SET(t, OB_Q5_1, a8, q5_1, 4, PW);
#undef a8_scratch_bytes
#define a8_scratch_bytes a8_scratch_bytes_q8
    GEMM_SET(t, OB_Q8_0, a8, q8_0, 4, PW);
#undef a8_scratch_bytes
    GEMV_SET(t, OB_Q4_0, a8v, v_q4_0);
    GEMV_SET(t, OB_Q4_1, a8v, v_q4_1);
    GEMV_SET(t, OB_Q5_0, a8v, v_q5_0);
    GEMV_SET(t, OB_Q5_1, a8v, v_q5_1);
    /* Q4_0, Q4_1, Q5_0 and Q8_0 in panels (Q5_0's high bits rearranged for shifts) */
#define a8_scratch_bytes a8_scratch_bytes_q
    PANEL_SET(t, OB_Q4_0, a8, p_q4_0, PW);
    PANEL_SET(t, OB_Q4_1, a8, p_q4_1, PW);
    PANEL_SET(t, OB_Q5_0, a8, p_q5_0, PW);
#undef a8_scratch_bytes
#define a8_scratch_bytes a8_scratch_bytes_q8
    PANEL_SET(t, OB_Q8_0, a8, p_q8_0, PW);
#undef a8_scratch_bytes
}
