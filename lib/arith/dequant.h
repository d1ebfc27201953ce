/*
 * dequant.h — the canonical dequantisers: one block of a weight format (blocks.h) to floats.
 * lib/quant.c's ob_dequant_row loops over them (it feeds the embeddings of every route and the
 * ref route's weights); a GPU route calls them per block.
 *
 * Bit for bit equal to the dequantisers of the `gguf` Python package (gguf.quants.dequantize,
 * numpy float32; tests/t1300-quant.sh compares them). Each value is computed as that code does:
 *   Q4_0, Q5_0       d * (float)(q - off)
 *   Q8_0             (float)q * d
 *   Q4_1, Q5_1       d * (float)q + m
 *   Q2_K             (d * (float)(sc & 15)) * (float)q - dmin * (float)(sc >> 4)
 *   Q3_K             (d * (float)(sc - 32)) * (float)q
 *   Q4_K, Q5_K       (d * (float)sc) * (float)q - dmin * (float)m
 *   Q6_K             (d * (float)sc) * (float)(q - 32)
 *   Q8_K             d * (float)q        (float32 d; gguf-py has no Q8_K dequantiser)
 *   F16, BF16        the exact conversion (blocks.h); F32 a copy of the bits
 * with d, m, dmin the exact float32 values of the fp16 fields. Every product above is exact in
 * float32: an fp16 has 11 significant bits and the integer factors at most 7+5 (Q6_K), so no
 * product needs more than 23 bits, and none is below 2^-24 unless it is 0. Only the final + or -
 * (Q4_1, Q5_1, Q2_K, Q4_K, Q5_K) rounds, so each output is the correctly rounded value of the
 * exact expression, whatever the association order, even when that last step is fused (fmaf),
 * and even with subnormals flushed (every nonzero result is a multiple of 2^-24, a normal
 * float32). Q8_K's single product rounds once.
 *
 * y receives the block's values in order: 32 (Q4_0 .. Q8_0), 256 (K-quants), 1 (F32, F16, BF16).
 */
#ifndef OB_DEQUANT_H
#define OB_DEQUANT_H

#include <stdint.h>
#include <string.h>

#include "blocks.h"
#include "ob-inline.h"

OB_INLINE void ob_dequant_f32(const float *x, float *y)
{
    memcpy(y, x, sizeof *y);                          /* the bits, NaN payloads included */
}

OB_INLINE void ob_dequant_f16(const uint16_t *x, float *y)
{
    y[0] = ob_fp16_to_f32(x[0]);
}

OB_INLINE void ob_dequant_bf16(const uint16_t *x, float *y)
{
    y[0] = ob_bf16_to_f32(x[0]);
}

OB_INLINE void ob_dequant_q4_0(const struct ob_block_q4_0 *b, float *y)
{
    float d = ob_fp16_to_f32(b->d);
    for (int j = 0; j < 16; j++) {
        y[j] = d * (float)((b->qs[j] & 15) - 8);
        y[j + 16] = d * (float)((b->qs[j] >> 4) - 8);
    }
}

OB_INLINE void ob_dequant_q4_1(const struct ob_block_q4_1 *b, float *y)
{
    float d = ob_fp16_to_f32(b->d), m = ob_fp16_to_f32(b->m);
    for (int j = 0; j < 16; j++) {
        y[j] = d * (float)(b->qs[j] & 15) + m;
        y[j + 16] = d * (float)(b->qs[j] >> 4) + m;
    }
}

/* qh[0..3] of a Q5 block as the little-endian uint32 whose bit j is bit 4 of value j */
OB_INLINE uint32_t ob_q5_qh(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

OB_INLINE void ob_dequant_q5_0(const struct ob_block_q5_0 *b, float *y)
{
    float d = ob_fp16_to_f32(b->d);
    uint32_t qh = ob_q5_qh(b->qh);
    for (int j = 0; j < 16; j++) {
        int q0 = (b->qs[j] & 15) | (int)((qh >> j) & 1) << 4;
        int q1 = (b->qs[j] >> 4) | (int)((qh >> (j + 16)) & 1) << 4;
        y[j] = d * (float)(q0 - 16);
        y[j + 16] = d * (float)(q1 - 16);
    }
}

OB_INLINE void ob_dequant_q5_1(const struct ob_block_q5_1 *b, float *y)
{
    float d = ob_fp16_to_f32(b->d), m = ob_fp16_to_f32(b->m);
    uint32_t qh = ob_q5_qh(b->qh);
    for (int j = 0; j < 16; j++) {
        int q0 = (b->qs[j] & 15) | (int)((qh >> j) & 1) << 4;
        int q1 = (b->qs[j] >> 4) | (int)((qh >> (j + 16)) & 1) << 4;
        y[j] = d * (float)q0 + m;
        y[j + 16] = d * (float)q1 + m;
    }
}

OB_INLINE void ob_dequant_q8_0(const struct ob_block_q8_0 *b, float *y)
{
    float d = ob_fp16_to_f32(b->d);
    for (int j = 0; j < 32; j++)
        y[j] = (float)b->qs[j] * d;
}

OB_INLINE void ob_dequant_q2_k(const struct ob_block_q2_k *b, float *y)
{
    float d = ob_fp16_to_f32(b->d), dmin = ob_fp16_to_f32(b->dmin);
    for (int h = 0; h < 2; h++)
        for (int s = 0; s < 4; s++)
            for (int l = 0; l < 32; l++) {
                int f = h * 128 + s * 32 + l;
                int sc = b->scales[f / 16];
                float dl = d * (float)(sc & 15), ml = dmin * (float)(sc >> 4);
                int q = (b->qs[h * 32 + l] >> (2 * s)) & 3;
                y[f] = dl * (float)q - ml;
            }
}

OB_INLINE void ob_dequant_q3_k(const struct ob_block_q3_k *b, float *y)
{
    float d = ob_fp16_to_f32(b->d);
    for (int h = 0; h < 2; h++)
        for (int s = 0; s < 4; s++)
            for (int l = 0; l < 32; l++) {
                int f = h * 128 + s * 32 + l;
                float dl = d * (float)ob_q3k_scale(f / 16, b->scales);
                int q = (b->qs[h * 32 + l] >> (2 * s)) & 3;
                if (!((b->hmask[l] >> (h * 4 + s)) & 1))
                    q -= 4;
                y[f] = dl * (float)q;
            }
}

OB_INLINE void ob_dequant_q4_k(const struct ob_block_q4_k *b, float *y)
{
    float d = ob_fp16_to_f32(b->d), dmin = ob_fp16_to_f32(b->dmin);
    for (int j = 0; j < 8; j++) {
        uint8_t sc, m;
        ob_k4_scale_min(j, b->scales, &sc, &m);
        float ds = d * (float)sc, dm = dmin * (float)m;
        const uint8_t *qs = b->qs + (j / 2) * 32;
        int shift = 4 * (j & 1);
        for (int l = 0; l < 32; l++)
            y[j * 32 + l] = ds * (float)((qs[l] >> shift) & 15) - dm;
    }
}

OB_INLINE void ob_dequant_q5_k(const struct ob_block_q5_k *b, float *y)
{
    float d = ob_fp16_to_f32(b->d), dmin = ob_fp16_to_f32(b->dmin);
    for (int j = 0; j < 8; j++) {
        uint8_t sc, m;
        ob_k4_scale_min(j, b->scales, &sc, &m);
        float ds = d * (float)sc, dm = dmin * (float)m;
        const uint8_t *qs = b->qs + (j / 2) * 32;
        int shift = 4 * (j & 1);
        for (int l = 0; l < 32; l++) {
            int q = ((qs[l] >> shift) & 15) | ((b->qh[l] >> j) & 1) << 4;
            y[j * 32 + l] = ds * (float)q - dm;
        }
    }
}

OB_INLINE void ob_dequant_q6_k(const struct ob_block_q6_k *b, float *y)
{
    float d = ob_fp16_to_f32(b->d);
    for (int h = 0; h < 2; h++)
        for (int r = 0; r < 128; r++) {
            int f = h * 128 + r;
            int lo = (b->ql[h * 64 + (r & 63)] >> (4 * (r >> 6))) & 15;
            int hi = (b->qh[h * 32 + (r & 31)] >> (2 * (r >> 5))) & 3;
            float ds = d * (float)b->scales[f / 16];
            y[f] = ds * (float)((lo | hi << 4) - 32);
        }
}

OB_INLINE void ob_dequant_q8_k(const struct ob_block_q8_k *b, float *y)
{
    for (int j = 0; j < OB_QK_K; j++)
        y[j] = b->d * (float)b->qs[j];
}

#endif
