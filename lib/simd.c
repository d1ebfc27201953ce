/*
 * simd.c — which instruction-set level the cpu route runs: the best the CPU has, or the one
 * forced with OB_SIMD=scalar|avx2|avx512 (for tests and benchmarks). Every level computes the
 * same bits; the choice only changes speed.
 */
#include <stdlib.h>
#include <string.h>

#include "1b.h"
#include "kernels/kernels.h"

static const char *const names[OB_ISA_COUNT] = {"scalar", "avx2", "avx512"};

const char *ob_isa_name(int isa)
{
    return isa >= 0 && isa < OB_ISA_COUNT ? names[isa] : "?";
}

int ob_isa_best(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
        __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("fma") &&
        __builtin_cpu_supports("f16c") && __builtin_cpu_supports("bmi2"))
        return OB_ISA_AVX512;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
        __builtin_cpu_supports("f16c") && __builtin_cpu_supports("bmi2"))
        return OB_ISA_AVX2;
#endif
    return OB_ISA_SCALAR;
}

int ob_isa_select(int *isa)
{
    int best = ob_isa_best();
    const char *env = getenv("OB_SIMD");
    if (!env || !*env) {
        *isa = best;
        return 0;
    }
    for (int i = 0; i < OB_ISA_COUNT; i++)
        if (strcmp(env, names[i]) == 0) {
            if (i > best)
                return ob_seterr(OB_EDEVICE, "OB_SIMD=%s, but this CPU supports only %s", env,
                                 names[best]);
            *isa = i;
            return 0;
        }
    return ob_seterr(OB_EUSAGE, "OB_SIMD=%s: expected scalar, avx2 or avx512", env);
}
