/*
 * dot-avx512.c — the AVX-512 level of the dot products.
 *
 * The machines 1b is developed and tested on have no AVX-512, and a kernel that cannot be run
 * against its reference is not shipped: this level therefore keeps the AVX2 kernels it
 * inherits (ob_kernels in matmul.c fills each level from the one below). OB_SIMD=avx512 on an
 * AVX-512 CPU runs them, with the same bits as every other level.
 */
#include "cpu/kernels/kernels.h"

void ob_kernels_avx512(struct ob_kernel_table *t)
{
    (void)t;
}
