/*
 * ops.h — the cpu route's elementwise and attention kernels (not matmuls), with their ISA
 * dispatch. References: ob_expf, ob_lse_sum, ob_max_f32, ob_kv_put, ob_silu, ob_gelu and
 * ob_attn_head in lib/arith/arith.h; every version here must equal them bit for bit
 * (tests/unit/ops.c). The row kernels sampling runs (exp, expsum, row_max) are the host's:
 * lib/host/softmax.h.
 */
#ifndef OB_OPS_H
#define OB_OPS_H

#include <stddef.h>
#include <stdint.h>

struct ob_ops {
    /* h[i] = ob_f32_to_fp16(x[i]) (ob_kv_put: the KV cache's stores) */
    void (*f16_put)(uint16_t *h, const float *x, size_t n);
    /* g[i] = ob_silu(g[i]) * u[i] */
    void (*swiglu)(float *g, const float *u, size_t n);
    /* g[i] = ob_gelu(g[i]) * u[i] (ob_geglu) */
    void (*geglu)(float *g, const float *u, size_t n);
    /* ob_attn_head for nq query heads that share one key/value head (grouped-query
     * attention): q and out hold nq heads of hd floats one after the other; s is scratch of
     * nq * n floats, oc of 2 * nq * hd */
    void (*attn_group)(const float *q, int nq, const uint16_t *k, const uint16_t *v,
                       long kv_stride, int n, int hd, float scale, float *s, float *oc,
                       float *out);
};

/* the table of an ISA level (enum ob_isa); levels without their own fall back to the one below */
const struct ob_ops *ob_ops(int isa);
void ob_ops_avx2(struct ob_ops *t);
void ob_ops_avx512(struct ob_ops *t);

#endif
