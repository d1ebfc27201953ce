/*
 * q4nx.h — the Q4NX tile, the weight format of the npu route's packs (1b-requant --type q4nx),
 * and what one NPU tile computes: the scalar reference that npu-sim runs on the CPU (its SIMD
 * kernels, lib/npu/, are bitwise equal to it) and that an NPU kernel must reproduce.
 *
 * A tile is 32 consecutive values of one weight row (a matrix of n rows of k values is n * k/32
 * tiles, row-major: tile b of row i at byte (i * k/32 + b) * 20 of the tensor):
 *     x_j = s * q_j + z          q_j in 0..15, s and z bfloat16
 * s is the step and z the value of q = 0: a q4_1-style tile (Q4_1 stores fp16 d and m; Q4_K
 * stores d*sc and subtracts dmin*m: its z is -(dmin * m)). s * q_j is exact in float32 (8
 * significant bits times 4), so a value is the one rounding of the final addition.
 *
 * One tile against one A8 activation block (arith.h: 32 int8 a_i, float d_a, sum_a = sum a_i):
 *     isum = sum_j q_j * a_j                      exact in int32 (|isum| <= 32*15*127 = 60960),
 *                                                 in any order: u4 x s8 multiply-accumulates
 *     r    = (s * d_a) * (float)isum + (z * d_a) * (float)sum_a
 * the float epilogue one rounding per operation, in that order ((float) the round-to-nearest
 * conversion of an int32, exact here: |isum| < 2^24). A row's value is the sum of its tiles'
 * r_b in the fixed 8-partial shape of arith.h (r_b into partial b mod 8, in increasing b, then
 * ob_fold8), never in an order that depends on how many rows, columns or cores share the work:
 * an NPU that gives column tiles to several cores must keep 8 partials per output and fold
 * them as ob_fold8 does.
 *
 * Every function is OB_INLINE so that GPU and NPU host code compiles this file unchanged.
 */
#ifndef OB_Q4NX_H
#define OB_Q4NX_H

#include <stdint.h>

#include "arith.h"
#include "blocks.h"
#include "dot.h"
#include "ob-inline.h"

#define OB_QK4NX 32                       /* values in a tile */

struct ob_block_q4nx {
    uint16_t s;                           /* bfloat16 step */
    uint16_t z;                           /* bfloat16 value of q = 0 */
    uint8_t qs[OB_QK4NX / 2];             /* nibbles in Q4_0's order (ob_q4_nib) */
};
OB_STATIC_ASSERT(sizeof(struct ob_block_q4nx) == 20, "q4nx tile size");

/* the 32 values of a tile: y_j = s * (float)q_j + z (the product exact, the sum rounded once) */
OB_INLINE void ob_dequant_q4nx(const struct ob_block_q4nx *b, float *y)
{
    float s = ob_bf16_to_f32(b->s), z = ob_bf16_to_f32(b->z);
    for (int j = 0; j < 32; j++)
        y[j] = s * (float)ob_q4_nib(b->qs, j) + z;
}

/* one tile against one A8 block: the integer sum, then the epilogue above */
OB_INLINE float ob_blk_q4nx(const struct ob_block_q4nx *w, const struct ob_act_a8 *a)
{
    int isum = 0;
    for (int j = 0; j < 32; j++)
        isum += ob_q4_nib(w->qs, j) * a->qs[j];
    return (ob_bf16_to_f32(w->s) * a->d) * (float)isum + (ob_bf16_to_f32(w->z) * a->d) * (float)a->sum;
}

/* a row of nb tiles against nb A8 blocks: tile b's value into partial b mod 8, then ob_fold8 */
OB_INLINE float ob_dot_q4nx(const struct ob_block_q4nx *w, const struct ob_act_a8 *a, int nb)
{
    float p[OB_NBPART] = {0};
    for (int b = 0; b < nb; b++)
        p[b & 7] = p[b & 7] + ob_blk_q4nx(&w[b], &a[b]);
    return ob_fold8(p);
}

#endif
