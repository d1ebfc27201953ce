/*
 * blocks.h — the weight formats GGUF files store: block layouts, the fp16/bf16 conversions and
 * the packed K-quant scale helpers. The per-block dequantisers are in dequant.h; the host's
 * quantisers and row dequantiser (ob_quant_row, ob_dequant_row) in lib/quant.h.
 *
 * The block structs are byte-for-byte ggml's layouts (little-endian, no padding; each size is
 * checked below). OB_FP16_SCALES_<name>(X) after a weight type's struct names its fp16 scale
 * fields, X(name, field) each: lib/check.c counts the non-finite ones. fp16 and bf16 fields
 * are stored as uint16_t bit patterns and converted with the helpers below, never through a
 * compiler's half type.
 *
 * Every function is OB_INLINE and shared verbatim with GPU code (hipcc, nvcc): only integer
 * bit operations and memcpy (no intrinsics, no libm, no union type punning), so every compiler
 * gives the same bits. Pure functions: no global state.
 */
#ifndef OB_BLOCKS_H
#define OB_BLOCKS_H

#include <stdint.h>
#include <string.h>                       /* memcpy: the one defined way to reinterpret bits */

#include "ob-inline.h"

/* ---- block layouts -------------------------------------------------------------------------- */

#define OB_QK4_0 32
#define OB_QK4_1 32
#define OB_QK5_0 32
#define OB_QK5_1 32
#define OB_QK8_0 32
#define OB_QK8_1 32
#define OB_QK_K 256         /* values in a K-quant super-block */
#define OB_K_SCALE_SIZE 12  /* bytes of packed 6-bit scales and mins in Q4_K / Q5_K */

/*
 * Q4_0: x = d * (q - 8), q in 0..15. Value j < 16 is the low nibble of qs[j], value j + 16 the
 * high nibble of qs[j].
 */
struct ob_block_q4_0 {
    uint16_t d;                       /* fp16 scale */
    uint8_t qs[OB_QK4_0 / 2];         /* nibbles */
};
OB_STATIC_ASSERT(sizeof(struct ob_block_q4_0) == 18, "q4_0 block size");
#define OB_FP16_SCALES_q4_0(X) X(q4_0, d)

/* Q4_1: x = d * q + m, q in 0..15; nibbles as Q4_0. */
struct ob_block_q4_1 {
    uint16_t d;                       /* fp16 scale */
    uint16_t m;                       /* fp16 offset (the block minimum) */
    uint8_t qs[OB_QK4_1 / 2];
};
OB_STATIC_ASSERT(sizeof(struct ob_block_q4_1) == 20, "q4_1 block size");
#define OB_FP16_SCALES_q4_1(X) X(q4_1, d) X(q4_1, m)

/*
 * Q5_0: x = d * (q - 16), q in 0..31. Low 4 bits as Q4_0's nibbles; bit 4 of value j is bit j
 * of qh read as a little-endian uint32.
 */
struct ob_block_q5_0 {
    uint16_t d;
    uint8_t qh[4];
    uint8_t qs[OB_QK5_0 / 2];
};
OB_STATIC_ASSERT(sizeof(struct ob_block_q5_0) == 22, "q5_0 block size");
#define OB_FP16_SCALES_q5_0(X) X(q5_0, d)

/* Q5_1: x = d * q + m, q in 0..31; bits as Q5_0. */
struct ob_block_q5_1 {
    uint16_t d;
    uint16_t m;
    uint8_t qh[4];
    uint8_t qs[OB_QK5_1 / 2];
};
OB_STATIC_ASSERT(sizeof(struct ob_block_q5_1) == 24, "q5_1 block size");
#define OB_FP16_SCALES_q5_1(X) X(q5_1, d) X(q5_1, m)

/* Q8_0: x = d * q, q in -128..127 (the quantiser uses -127..127). */
struct ob_block_q8_0 {
    uint16_t d;
    int8_t qs[OB_QK8_0];
};
OB_STATIC_ASSERT(sizeof(struct ob_block_q8_0) == 34, "q8_0 block size");
#define OB_FP16_SCALES_q8_0(X) X(q8_0, d)

/*
 * Q8_1: an activation format (never a stored weight type): x = d * q, s = d * sum(q). ggml's
 * current layout keeps d and s as fp16 (36 bytes, as ob_type_size says); gguf-py's
 * GGML_QUANT_SIZES still gives the old float layout (40 bytes).
 */
struct ob_block_q8_1 {
    uint16_t d;                       /* fp16 */
    uint16_t s;                       /* fp16 d * sum(qs) */
    int8_t qs[OB_QK8_1];
};
OB_STATIC_ASSERT(sizeof(struct ob_block_q8_1) == 36, "q8_1 block size");

/*
 * Q2_K: 16 sub-blocks of 16 values: x = (d * (scales[k] & 15)) * q - dmin * (scales[k] >> 4),
 * q in 0..3. Value f = h*128 + s*32 + l (h 0..1, s 0..3, l 0..31) is bits 2s..2s+1 of
 * qs[h*32 + l]; its sub-block is k = f / 16.
 */
struct ob_block_q2_k {
    uint8_t scales[OB_QK_K / 16];     /* low nibble: scale, high nibble: min */
    uint8_t qs[OB_QK_K / 4];
    uint16_t d;                       /* fp16 super-block scale of the scales */
    uint16_t dmin;                    /* fp16 super-block scale of the mins */
};
OB_STATIC_ASSERT(sizeof(struct ob_block_q2_k) == 84, "q2_k block size");
#define OB_FP16_SCALES_q2_k(X) X(q2_k, d) X(q2_k, dmin)

/*
 * Q3_K: 16 sub-blocks of 16 values: x = (d * (sc[k] - 32)) * q, q in -4..3, sc 6-bit
 * (ob_q3k_scale). Value f = h*128 + s*32 + l: low 2 bits are bits 2s..2s+1 of qs[h*32 + l];
 * bit (f / 32) of hmask[l] set means q = low bits, clear means q = low bits - 4.
 */
struct ob_block_q3_k {
    uint8_t hmask[OB_QK_K / 8];
    uint8_t qs[OB_QK_K / 4];
    uint8_t scales[12];               /* 16 x 6 bits, see ob_q3k_scale */
    uint16_t d;                       /* fp16 */
};
OB_STATIC_ASSERT(sizeof(struct ob_block_q3_k) == 110, "q3_k block size");
#define OB_FP16_SCALES_q3_k(X) X(q3_k, d)

/*
 * Q4_K: 8 sub-blocks of 32 values: x = (d * sc[j]) * q - dmin * m[j], q in 0..15, sc and m
 * 6-bit (ob_k4_scale_min). Value f = c*64 + s*32 + l (c 0..3, s 0..1, l 0..31) is nibble s of
 * qs[c*32 + l]; its sub-block is j = f / 32.
 */
struct ob_block_q4_k {
    uint16_t d;                       /* fp16 scale of the scales */
    uint16_t dmin;                    /* fp16 scale of the mins */
    uint8_t scales[OB_K_SCALE_SIZE];
    uint8_t qs[OB_QK_K / 2];
};
OB_STATIC_ASSERT(sizeof(struct ob_block_q4_k) == 144, "q4_k block size");
#define OB_FP16_SCALES_q4_k(X) X(q4_k, d) X(q4_k, dmin)

/*
 * Q5_K: as Q4_K with q in 0..31: the low 4 bits as Q4_K; bit 4 of value f is bit (f / 32) of
 * qh[f % 32].
 */
struct ob_block_q5_k {
    uint16_t d;
    uint16_t dmin;
    uint8_t scales[OB_K_SCALE_SIZE];
    uint8_t qh[OB_QK_K / 8];
    uint8_t qs[OB_QK_K / 2];
};
OB_STATIC_ASSERT(sizeof(struct ob_block_q5_k) == 176, "q5_k block size");
#define OB_FP16_SCALES_q5_k(X) X(q5_k, d) X(q5_k, dmin)

/*
 * Q6_K: 16 sub-blocks of 16 values: x = (d * scales[k]) * (q - 32), q in 0..63. Value
 * f = h*128 + r (h 0..1, r 0..127): low 4 bits are nibble (r / 64) of ql[h*64 + r % 64], high
 * 2 bits are bits 2*(r / 32)..+1 of qh[h*32 + r % 32]; its sub-block is k = f / 16.
 */
struct ob_block_q6_k {
    uint8_t ql[OB_QK_K / 2];
    uint8_t qh[OB_QK_K / 4];
    int8_t scales[OB_QK_K / 16];
    uint16_t d;                       /* fp16 */
};
OB_STATIC_ASSERT(sizeof(struct ob_block_q6_k) == 210, "q6_k block size");
#define OB_FP16_SCALES_q6_k(X) X(q6_k, d)

/* Q8_K: activation format of the K-quant dot products: x = d * q; bsums[i] = sum of the 16
 * quants qs[16*i .. 16*i+15]. */
struct ob_block_q8_k {
    float d;                          /* float32, not fp16 */
    int8_t qs[OB_QK_K];
    int16_t bsums[OB_QK_K / 16];
};
OB_STATIC_ASSERT(sizeof(struct ob_block_q8_k) == 292, "q8_k block size");

/* ---- fp16 / bf16 ---------------------------------------------------------------------------- */

OB_INLINE float ob_f32_from_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

OB_INLINE uint32_t ob_f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

/*
 * IEEE binary16 -> binary32, exact. Subnormals are normalised; Inf stays Inf; a NaN keeps its
 * sign and payload (shifted up 13 bits) and is not quietened, as numpy's conversion does.
 */
OB_INLINE float ob_fp16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t man = h & 0x3ffu;
    uint32_t bits;

    if (exp == 0x1f) {
        bits = sign | 0x7f800000u | (man << 13);
    } else if (exp != 0) {
        bits = sign | ((exp + 112) << 23) | (man << 13);      /* rebias 15 -> 127 */
    } else if (man == 0) {
        bits = sign;
    } else {
        /* subnormal: man * 2^-24; shift the leading 1 up to bit 10 */
        uint32_t e = 113;                                      /* biased exponent of 2^-14 */
        while (!(man & 0x400u)) {
            man <<= 1;
            e--;
        }
        bits = sign | (e << 23) | ((man & 0x3ffu) << 13);
    }
    return ob_f32_from_bits(bits);
}

/*
 * IEEE binary32 -> binary16, round to nearest, ties to even. Values from 65520 up round to Inf;
 * results below 2^-14 are subnormal (correctly rounded, not flushed). A NaN stays a NaN: sign
 * and the top 10 payload bits are kept, and a payload that would vanish becomes 1 (numpy's
 * rule, so F16 tensors match numpy's astype(float16) bit for bit).
 */
OB_INLINE uint16_t ob_f32_to_fp16(float f)
{
    uint32_t x = ob_f32_bits(f);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    uint32_t ax = x & 0x7fffffffu;

    if (ax >= 0x7f800000u) {                                   /* Inf or NaN */
        uint16_t m = (uint16_t)((ax & 0x7fffffu) >> 13);
        if (ax != 0x7f800000u && m == 0)
            m = 1;
        return (uint16_t)(sign | 0x7c00u | m);
    }
    if (ax >= 0x477ff000u)                                     /* >= 65520: rounds to Inf */
        return (uint16_t)(sign | 0x7c00u);
    if (ax >= 0x38800000u) {                                   /* normal half: >= 2^-14 */
        uint32_t r = ax - (112u << 23);                        /* rebias 127 -> 15 */
        uint32_t h = r >> 13, rem = r & 0x1fffu;
        if (rem > 0x1000u || (rem == 0x1000u && (h & 1u)))
            h++;                                               /* a carry into the exponent is right */
        return (uint16_t)(sign | h);
    }
    {
        /* subnormal half (or zero): value = m * 2^(e-150), half unit 2^-24 -> m >> (126-e) */
        uint32_t e = ax >> 23;
        if (e < 102)                                           /* below 2^-25: rounds to 0 */
            return sign;
        uint32_t m = (ax & 0x7fffffu) | 0x800000u;
        uint32_t shift = 126 - e;                              /* 14..24 */
        uint32_t q = m >> shift, rem = m & ((1u << shift) - 1u), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (q & 1u)))
            q++;                                               /* may become the smallest normal */
        return (uint16_t)(sign | q);
    }
}

/* bfloat16 -> float32: exact. */
OB_INLINE float ob_bf16_to_f32(uint16_t h)
{
    return ob_f32_from_bits((uint32_t)h << 16);
}

/*
 * float32 -> bfloat16, round to nearest, ties to even (overflow goes to Inf). A NaN becomes a
 * quiet NaN with its sign and top payload bits (ggml's and gguf-py's rule).
 */
OB_INLINE uint16_t ob_f32_to_bf16(float f)
{
    uint32_t x = ob_f32_bits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((x >> 16) | 0x40u);
    return (uint16_t)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

/* ---- packed K-quant scales ------------------------------------------------------------------- */

/*
 * Q4_K / Q5_K: 8 scales and 8 mins of 6 bits in 12 bytes. For j < 4: scales[j] low 6 bits = sc[j],
 * scales[j+4] low 6 bits = m[j]. For j >= 4 the low 4 bits sit in scales[j+4] (sc low nibble,
 * m high nibble) and the top 2 bits in bits 6..7 of scales[j-4] (sc) and scales[j] (m).
 */
OB_INLINE void ob_k4_scale_min(int j, const uint8_t *q, uint8_t *sc, uint8_t *m)
{
    if (j < 4) {
        *sc = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *sc = (uint8_t)((q[j + 4] & 0x0f) | ((q[j - 4] >> 6) << 4));
        *m = (uint8_t)((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
    }
}

/* The inverse of ob_k4_scale_min: pack sc[0..7], m[0..7] (each 0..63) into q[0..11]. */
OB_INLINE void ob_k4_pack_scales(const uint8_t *sc, const uint8_t *m, uint8_t *q)
{
    for (int j = 0; j < 4; j++) {
        q[j] = (uint8_t)((sc[j] & 63) | ((sc[j + 4] >> 4) << 6));
        q[j + 4] = (uint8_t)((m[j] & 63) | ((m[j + 4] >> 4) << 6));
        q[j + 8] = (uint8_t)((sc[j + 4] & 15) | ((m[j + 4] & 15) << 4));
    }
}

/*
 * Q3_K: 16 scales of 6 bits in 12 bytes, returned as the signed scale (-32..31). Low 4 bits of
 * scale k: the low nibble of scales[k] (k < 8) or the high nibble of scales[k-8] (k >= 8); high
 * 2 bits: bits 2*(k/4)..+1 of scales[8 + k%4].
 */
OB_INLINE int ob_q3k_scale(int k, const uint8_t *q)
{
    int lo = k < 8 ? (q[k] & 15) : (q[k - 8] >> 4);
    int hi = (q[8 + (k & 3)] >> (2 * (k >> 2))) & 3;
    return (lo | (hi << 4)) - 32;
}

/* The inverse of ob_q3k_scale: pack sc[0..15] (each -32..31) into q[0..11]. */
OB_INLINE void ob_q3k_pack_scales(const int8_t *sc, uint8_t *q)
{
    for (int i = 0; i < 12; i++)
        q[i] = 0;
    for (int k = 0; k < 16; k++) {
        int v = (sc[k] + 32) & 63;
        if (k < 8)
            q[k] |= (uint8_t)(v & 15);
        else
            q[k - 8] |= (uint8_t)((v & 15) << 4);
        q[8 + (k & 3)] |= (uint8_t)((v >> 4) << (2 * (k >> 2)));
    }
}

#endif
