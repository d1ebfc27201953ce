/*
 * route-cpu.c — the cpu route's row in the registry (route.c): the host's SIMD level and
 * memory, and the weight types the canonical kernels multiply.
 */
#include "backend.h"
#include "quant.h"

extern const struct ob_be_ops ob_be_cpu;

static int cpu_probe(const struct ob_device_opts *d, struct ob_device_info *info)
{
    return ob_route_host_simd(d, info, "");
}

static int cpu_supports(const struct ob_model *m)
{
    return ob_route_each_matrix(m, ob_type_supported, "cpu");
}

const struct ob_route ob_route_cpu = {
    .name = "cpu",
    .about = "canonical kernels on the host, scalar reference and AVX2/AVX-512 (the default)",
    .ops = &ob_be_cpu,
    .archs = OB_ARCHS_ALL,
    .probe = cpu_probe,
    .supports = cpu_supports,
    .weight_bytes = ob_route_no_device_weights,
    .kv_bytes = ob_route_kv_fp16,
};
