/*
 * dot-avx512.c — the AVX-512 level (F, BW, VL, DQ, VNNI): its table takes the kernels of
 * kq-avx512.c (Q2_K .. Q6_K) and a8-avx512.c (Q4_0 .. Q8_0); entries it has no kernel of its own
 * for are the AVX2 level's (ob_kernels in matmul.c fills each level from the one below).
 * Reference: lib/arith/dot.h and lib/arith/arith.h; every function must equal its reference
 * bit for bit (tests/unit/kernels.c compares every entry of this table wherever the CPU has
 * the level); speed is the only freedom.
 */
#include "cpu/kernels/avx512.h"

void ob_kernels_avx512(struct ob_kernel_table *t)
{
    ob_kernels_avx512_a8(t);
    ob_kernels_avx512_kq(t);
}
