/*
 * simd.c — which instruction-set level the host routes run: the best the CPU has, or the one
 * forced with OB_SIMD=scalar|avx2|avx512 (for tests and benchmarks). Every level computes the
 * same bits; the choice only changes speed.
 *
 * OB_CPU_LACKS=avx2|avx512 takes that level and those above it away from what the CPU is taken
 * to have (every extension of theirs reads as absent), so that a machine with AVX-512 runs the
 * tests' and the tools' AVX2-only path as a CPU without it would: the same levels, the same
 * refusals of OB_SIMD, the same "cpu lacks LEVEL" skips.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "1b.h"
#include "host/simd.h"

static const char *const names[OB_ISA_COUNT] = {"scalar", "avx2", "avx512"};

const char *ob_isa_name(int isa)
{
    return isa >= 0 && isa < OB_ISA_COUNT ? names[isa] : "?";
}

int ob_cpu_lacks(int *level)
{
    const char *env = getenv("OB_CPU_LACKS");
    *level = OB_ISA_COUNT;
    if (!env || !*env)
        return 0;
    for (int i = OB_ISA_SCALAR + 1; i < OB_ISA_COUNT; i++)
        if (strcmp(env, names[i]) == 0) {
            *level = i;
            return 0;
        }
    return ob_seterr(OB_EUSAGE, "OB_CPU_LACKS=%s: expected avx2 or avx512", env);
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

/* The extensions the SIMD levels' flags (the Makefile's OB_ISA_*) enable, as the compilers name
 * them (-mNAME, __NAME__ upper-cased): where CPUID reports each (leaf, subleaf 0, register
 * 0..3 = eax..edx, bit), and the register state the OS must save for it (XCR0: 0x6 SSE and AVX,
 * 0xe0 the AVX-512 opmask and upper zmm registers). */
static const struct feature {
    const char *name;
    int level;                     /* the level whose kernels are compiled with it */
    unsigned leaf, reg, bit;
    uint64_t xcr0;
} features[] = {
    {"avx", OB_ISA_AVX2, 1, 2, 28, 0x6},
    {"fma", OB_ISA_AVX2, 1, 2, 12, 0x6},
    {"f16c", OB_ISA_AVX2, 1, 2, 29, 0x6},
    {"avx2", OB_ISA_AVX2, 7, 1, 5, 0x6},
    {"bmi", OB_ISA_AVX2, 7, 1, 3, 0},
    {"bmi2", OB_ISA_AVX2, 7, 1, 8, 0},
    {"avx512f", OB_ISA_AVX512, 7, 1, 16, 0xe6},
    {"avx512dq", OB_ISA_AVX512, 7, 1, 17, 0xe6},
    {"avx512bw", OB_ISA_AVX512, 7, 1, 30, 0xe6},
    {"avx512vl", OB_ISA_AVX512, 7, 1, 31, 0xe6},
    {"avx512vnni", OB_ISA_AVX512, 7, 2, 11, 0xe6},
};

static bool cpu_reports(const struct feature *f)
{
    unsigned r[4];
    if (f->xcr0) {                 /* the OS's consent to the wider registers: OSXSAVE, XCR0 */
        if (!__get_cpuid(1, &r[0], &r[1], &r[2], &r[3]) || !(r[2] & (1u << 27)) ||
            (xgetbv0() & f->xcr0) != f->xcr0)
            return false;
    }
    if (!__get_cpuid_count(f->leaf, 0, &r[0], &r[1], &r[2], &r[3]))
        return false;
    return r[f->reg] >> f->bit & 1;
}
#endif

int ob_cpu_has(const char *name, int *level)
{
#if defined(__x86_64__) || defined(__i386__)
    for (size_t i = 0; i < sizeof features / sizeof features[0]; i++) {
        const struct feature *f = &features[i];
        if (strcmp(name, f->name) != 0)
            continue;
        int lacks;
        if (level)
            *level = f->level;
        if (ob_cpu_lacks(&lacks))
            lacks = OB_ISA_SCALAR + 1;     /* an override that cannot be read grants nothing */
        return f->level < lacks && cpu_reports(f);
    }
#else
    (void)name;
    (void)level;
#endif
    return -1;
}

/* Straight from CPUID (compilers disagree on which names __builtin_cpu_supports knows), with
 * the OS's consent to the wider registers (XCR0) checked too: a level is there when every
 * extension its kernels are compiled with is. */
int ob_isa_best(void)
{
    static const char *const need[OB_ISA_COUNT][6] = {
        [OB_ISA_AVX2] = {"avx", "avx2", "fma", "f16c", "bmi2"},
        [OB_ISA_AVX512] = {"avx512f", "avx512bw", "avx512vl", "avx512dq", "avx512vnni"},
    };
    int best = OB_ISA_SCALAR;
    for (int l = OB_ISA_SCALAR + 1; l < OB_ISA_COUNT; l++) {
        for (int i = 0; need[l][i]; i++)
            if (ob_cpu_has(need[l][i], NULL) != 1)
                return best;
        best = l;
    }
    return best;
}

int ob_isa_select(int *isa)
{
    int lacks, e;
    if ((e = ob_cpu_lacks(&lacks)))
        return e;
    int best = ob_isa_best();
    const char *env = getenv("OB_SIMD");
    if (!env || !*env) {
        *isa = best;
        return 0;
    }
    for (int i = 0; i < OB_ISA_COUNT; i++)
        if (strcmp(env, names[i]) == 0) {
            if (i > best)
                return ob_seterr(OB_EDEVICE, "OB_SIMD=%s, but this CPU supports only %s%s%s%s",
                                 env, names[best], lacks < OB_ISA_COUNT ? " (OB_CPU_LACKS=" : "",
                                 lacks < OB_ISA_COUNT ? names[lacks] : "",
                                 lacks < OB_ISA_COUNT ? ")" : "");
            *isa = i;
            return 0;
        }
    return ob_seterr(OB_EUSAGE, "OB_SIMD=%s: expected scalar, avx2 or avx512", env);
}
