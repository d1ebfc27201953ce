/*
 * dot-avx512.c — the AVX-512 level of the dot products.
 *
 * This level has no kernels of its own yet: it keeps the AVX2 kernels it inherits (ob_kernels
 * in matmul.c fills each level from the one below), so OB_SIMD=avx512 (or an AVX-512 CPU's
 * default) computes with them, the same bits as every other level. Some of the machines 1b is
 * tested on do have AVX-512 (F/BW/VL/DQ/VNNI, e.g. AMD EPYC): there tests/unit/kernels.c and
 * tests/unit/ops.c compare this level with the scalar reference like the others, and a kernel
 * added here is compared the same way wherever the CPU has it.
 */
#include "cpu/kernels/kernels.h"

void ob_kernels_avx512(struct ob_kernel_table *t)
{
    (void)t;
}
