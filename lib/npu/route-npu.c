/*
 * route-npu.c — the rows of npu (Q4NX packs on an NPU through XRT; built with make XRT=1)
 * and npu-sim (the same arithmetic on the host) in the registry (route.c). Both run the
 * llama-style models (no Gemma 3 ops).
 */
#include "backend.h"
#include "npu/npu.h"

extern const struct ob_be_ops ob_be_npu_sim;
#ifdef OB_HAVE_XRT
extern const struct ob_be_ops ob_be_npu;
#endif

#define NPU_ARCHS (OB_ARCH_BIT(OB_ARCH_LLAMA) | OB_ARCH_BIT(OB_ARCH_QWEN2) | \
                   OB_ARCH_BIT(OB_ARCH_QWEN3))

static bool is_q4nx(uint32_t t) { return t == OB_Q4NX; }

/* npu-sim computes on the host, its device name says at which SIMD level */
static int npu_sim_probe(const struct ob_device_opts *d, struct ob_device_info *info)
{
    return ob_route_host_simd(d, info, "npu-sim ");
}

static int npu_sim_supports(const struct ob_model *m)
{
    return ob_route_each_matrix(m, is_q4nx, "npu-sim");
}

const struct ob_route ob_route_npu_sim = {
    .name = "npu-sim",
    .about = "the npu route's Q4NX arithmetic on the CPU (runs Q4NX packs)",
    .ops = &ob_be_npu_sim,
    .archs = NPU_ARCHS,
    .probe = npu_sim_probe,
    .supports = npu_sim_supports,
    .weight_bytes = ob_route_no_device_weights,
    .kv_bytes = ob_route_kv_fp16,
};

#ifdef OB_HAVE_XRT
static int npu_supports(const struct ob_model *m)
{
    return ob_route_each_matrix(m, is_q4nx, "npu");
}

/* the tiles go to the device's memory */
static uint64_t npu_weight_bytes(const struct ob_model *m)
{
    uint64_t b = (uint64_t)m->tok_embd.row_bytes * (uint64_t)m->tok_embd.n;
    if (m->output.data != m->tok_embd.data)
        b += (uint64_t)m->output.row_bytes * (uint64_t)m->output.n;
    for (uint32_t l = 0; l < m->hp.n_layer; l++)
        for (int r = OB_W_Q; r <= OB_W_DOWN; r++) {
            const struct ob_matrix *x = ob_layer_matrix(m, (int)l, r);
            b += (uint64_t)x->row_bytes * (uint64_t)x->n;
        }
    return b;
}

const struct ob_route ob_route_npu = {
    .name = "npu",
    .about = "Q4NX packs on an NPU through XRT, bitwise equal to npu-sim",
    .ops = &ob_be_npu,
    .archs = NPU_ARCHS,
    .probe = ob_npu_xrt_probe,
    .supports = npu_supports,
    .weight_bytes = npu_weight_bytes,
    .kv_bytes = ob_route_kv_fp16,
};
#else
/* not built in: the row says how to get it */
const struct ob_route ob_route_npu = {
    .name = "npu",
    .about = "Q4NX packs on an NPU through XRT, bitwise equal to npu-sim",
    .build = "build with make XRT=1 (libxrt-dev)",
};
#endif
