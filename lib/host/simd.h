/*
 * simd.h — which instruction-set level the host routes run (simd.c): the best the CPU has, or
 * the one forced with OB_SIMD=scalar|avx2|avx512. Every level computes the same bits; the
 * choice only changes speed. OB_CPU_LACKS=avx2|avx512 makes the CPU read as lacking that level
 * and those above it (for tests of the paths a smaller CPU takes). Internal to lib/.
 */
#ifndef OB_HOST_SIMD_H
#define OB_HOST_SIMD_H

enum ob_isa { OB_ISA_SCALAR = 0, OB_ISA_AVX2 = 1, OB_ISA_AVX512 = 2, OB_ISA_COUNT };

const char *ob_isa_name(int isa);
int ob_isa_best(void);                           /* the best level this CPU runs */
/*
 * The per-level tables (cpu/kernels ob_kernels and ob_ops, host/softmax.h): a level's filler is
 * code compiled with that level's flags (GCC stores its pointers with vector moves: a CPU
 * without AVX died there), so it runs only where ob_isa_best() reaches the level. A level
 * above it keeps the entries of the best one, and ob_isa_select never picks it.
 */
/* the level to use: best, or OB_SIMD if set (OB_EDEVICE if the CPU lacks it; OB_EUSAGE for an
 * OB_SIMD or OB_CPU_LACKS that names no level) */
int ob_isa_select(int *isa);
/* *level: the lowest level OB_CPU_LACKS takes away, OB_ISA_COUNT when unset; OB_EUSAGE when it
 * names no level but avx2 or avx512 */
int ob_cpu_lacks(int *level);
/* whether this CPU, as OB_CPU_LACKS leaves it, runs code that uses the x86 extension NAME (as
 * the compilers spell it: "avx2", "f16c", "avx512vnni", -mNAME): 1 yes, 0 no, -1 a name that
 * no level's flags enable (then unknown here). *level (when not NULL): the level that needs it.
 * An OB_CPU_LACKS that cannot be read leaves the CPU no level above scalar. */
int ob_cpu_has(const char *name, int *level);

#endif
