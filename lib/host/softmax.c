/*
 * softmax.c — the scalar versions of the row kernels (thin loops over arith.h) and the per-ISA
 * tables (softmax.h).
 */
#include <pthread.h>

#include "arith/arith.h"
#include "host/simd.h"
#include "host/softmax.h"

static void exp_ref(const float *x, float *y, size_t n)
{
    for (size_t i = 0; i < n; i++)
        y[i] = ob_expf(x[i]);
}

static float expsum_ref(const float *z, size_t n, float m)
{
    return ob_lse_sum(z, n, m);
}

static float row_max_ref(const float *z, size_t n, int *bad)
{
    int b = 0;
    for (size_t i = 0; i < n; i++)
        b |= z[i] != z[i] || z[i] == ob_inf();
    *bad = b;
    return ob_max_f32(z, (int)n);
}

static void scale_ref(const float *z, size_t n, float m, float T, float *y)
{
    for (size_t i = 0; i < n; i++)
        y[i] = (z[i] - m) / T;
}

static struct ob_softmax tables[OB_ISA_COUNT];
static pthread_once_t once = PTHREAD_ONCE_INIT;

#if !defined(__x86_64__)
void ob_softmax_avx2(struct ob_softmax *t) { (void)t; }
void ob_softmax_avx512(struct ob_softmax *t) { (void)t; }
#endif

static void init(void)
{
    tables[OB_ISA_SCALAR] = (struct ob_softmax){.exp = exp_ref, .expsum = expsum_ref,
                                                .row_max = row_max_ref, .scale = scale_ref};
    int best = ob_isa_best();      /* a level's entries where the CPU runs it (simd.h) */
    tables[OB_ISA_AVX2] = tables[OB_ISA_SCALAR];
    if (best >= OB_ISA_AVX2)
        ob_softmax_avx2(&tables[OB_ISA_AVX2]);
    tables[OB_ISA_AVX512] = tables[OB_ISA_AVX2];
    if (best >= OB_ISA_AVX512)
        ob_softmax_avx512(&tables[OB_ISA_AVX512]);
}

const struct ob_softmax *ob_softmax(int isa)
{
    pthread_once(&once, init);
    return &tables[isa < 0 || isa >= OB_ISA_COUNT ? OB_ISA_SCALAR : isa];
}
