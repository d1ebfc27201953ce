/*
 * route-ref.c — the ref route's row in the registry (route.c): float64 on the host, every
 * weight type it can dequantise.
 */
#include <stdio.h>

#include "backend.h"
#include "quant.h"

extern const struct ob_be_ops ob_be_ref;

static int ref_probe(const struct ob_device_opts *d, struct ob_device_info *info)
{
    const char *core;
    int threads;
    ob_blas_info(&core, &threads);
    snprintf(info->name, sizeof info->name, "float64 openblas %s", core ? core : "?");
    return ob_route_host_memory(d, info);
}

/* the ref route dequantises every matrix it multiplies: Q4NX tiles too (a pack's oracle) */
static bool dequantisable(uint32_t t)
{
    return ob_type_supported(t) || ob_type_is_float(t) || ob_dequant_supported(t);
}

static int ref_supports(const struct ob_model *m)
{
    return ob_route_each_matrix(m, dequantisable, "ref");
}

/* float64 keys and values: four times fp16 */
static uint64_t kv_f64(const struct ob_model *m, int n_slots, int n_ctx)
{
    return 4 * ob_route_kv_fp16(m, n_slots, n_ctx);
}

const struct ob_route ob_route_ref = {
    .name = "ref",
    .about = "float64 activations and OpenBLAS: an oracle of exact arithmetic",
    .ops = &ob_be_ref,
    .archs = OB_ARCHS_ALL,
    .probe = ref_probe,
    .supports = ref_supports,
    .weight_bytes = ob_route_no_device_weights,
    .kv_bytes = kv_f64,
};
