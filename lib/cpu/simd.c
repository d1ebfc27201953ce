/*
 * simd.c — which instruction-set level the cpu route runs: the best the CPU has, or the one
 * forced with OB_SIMD=scalar|avx2|avx512 (for tests and benchmarks). Every level computes the
 * same bits; the choice only changes speed.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "1b.h"
#include "cpu/simd.h"

static const char *const names[OB_ISA_COUNT] = {"scalar", "avx2", "avx512"};

const char *ob_isa_name(int isa)
{
    return isa >= 0 && isa < OB_ISA_COUNT ? names[isa] : "?";
}

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>

/* XCR0: which register states the OS saves on a context switch */
static uint64_t xgetbv0(void)
{
    uint32_t lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return (uint64_t)hi << 32 | lo;
}
#endif

/* Straight from CPUID (compilers disagree on which names __builtin_cpu_supports knows), with
 * the OS's consent to the wider registers (XCR0) checked too. */
int ob_isa_best(void)
{
#if defined(__x86_64__) || defined(__i386__)
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d))
        return OB_ISA_SCALAR;
    bool fma = c & (1u << 12), osxsave = c & (1u << 27), avx = c & (1u << 28),
         f16c = c & (1u << 29);
    if (!osxsave || !avx)
        return OB_ISA_SCALAR;
    uint64_t xcr0 = xgetbv0();
    if ((xcr0 & 6) != 6)                       /* SSE and AVX state */
        return OB_ISA_SCALAR;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d))
        return OB_ISA_SCALAR;
    bool avx2 = b & (1u << 5), bmi2 = b & (1u << 8), avx512f = b & (1u << 16),
         avx512dq = b & (1u << 17), avx512bw = b & (1u << 30), avx512vl = b & (1u << 31),
         vnni = c & (1u << 11);
    bool base = avx2 && fma && f16c && bmi2;
    if (base && avx512f && avx512bw && avx512vl && avx512dq && vnni && (xcr0 & 0xe0) == 0xe0)
        return OB_ISA_AVX512;
    if (base)
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
