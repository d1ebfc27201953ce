/*
 * ops.c — scalar versions of the elementwise and attention kernels (thin loops over arith.h)
 * and the per-ISA tables.
 */
#include <pthread.h>

#include "arith/arith.h"
#include "cpu/kernels/kernels.h"
#include "cpu/kernels/ops.h"

static void f16_put_ref(uint16_t *h, const float *x, size_t n)
{
    ob_kv_put(h, x, (int)n);
}

static void swiglu_ref(float *g, const float *u, size_t n)
{
    for (size_t i = 0; i < n; i++)
        g[i] = ob_silu(g[i]) * u[i];
}

static void geglu_ref(float *g, const float *u, size_t n)
{
    ob_geglu(g, u, n);
}

static void attn_group_ref(const float *q, int nq, const uint16_t *k, const uint16_t *v,
                           long kv_stride, int n, int hd, float scale, float *s, float *oc,
                           float *out)
{
    for (int h = 0; h < nq; h++)
        ob_attn_head(q + (size_t)h * hd, k, v, kv_stride, n, hd, scale, s + (size_t)h * n, oc,
                     out + (size_t)h * hd);
}

static struct ob_ops tables[OB_ISA_COUNT];
static pthread_once_t once = PTHREAD_ONCE_INIT;

#if !defined(__x86_64__)
void ob_ops_avx2(struct ob_ops *t) { (void)t; }
void ob_ops_avx512(struct ob_ops *t) { (void)t; }
#endif

static void init(void)
{
    tables[OB_ISA_SCALAR] = (struct ob_ops){.f16_put = f16_put_ref, .swiglu = swiglu_ref,
                                            .geglu = geglu_ref, .attn_group = attn_group_ref};
    int best = ob_isa_best();      /* a level's entries where the CPU runs it (simd.h) */
    tables[OB_ISA_AVX2] = tables[OB_ISA_SCALAR];
    if (best >= OB_ISA_AVX2)
        ob_ops_avx2(&tables[OB_ISA_AVX2]);
    tables[OB_ISA_AVX512] = tables[OB_ISA_AVX2];
    if (best >= OB_ISA_AVX512)
        ob_ops_avx512(&tables[OB_ISA_AVX512]);
}

const struct ob_ops *ob_ops(int isa)
{
    pthread_once(&once, init);
    return &tables[isa < 0 || isa >= OB_ISA_COUNT ? OB_ISA_SCALAR : isa];
}
