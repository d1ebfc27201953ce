/*
 * simd.h — which instruction-set level the cpu route runs (simd.c): the best the CPU has, or
 * the one forced with OB_SIMD=scalar|avx2|avx512. Every level computes the same bits; the
 * choice only changes speed. Internal to lib/.
 */
#ifndef OB_CPU_SIMD_H
#define OB_CPU_SIMD_H

enum ob_isa { OB_ISA_SCALAR = 0, OB_ISA_AVX2 = 1, OB_ISA_AVX512 = 2, OB_ISA_COUNT };

const char *ob_isa_name(int isa);
int ob_isa_best(void);                           /* the best level this CPU runs */
/* the level to use: best, or OB_SIMD if set (OB_EDEVICE if the CPU lacks it) */
int ob_isa_select(int *isa);

#endif
