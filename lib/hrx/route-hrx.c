/*
 * route-hrx.c — the rows of hrx (GPU kernels through CUDA or HIP) and hrx-sim (the same
 * kernels run on the host) in the registry (route.c).
 */
#include "backend.h"
#include "hrx/hrx.h"

extern const struct ob_be_ops ob_be_hrx, ob_be_hrx_sim;

static int hrx_probe(const struct ob_device_opts *d, struct ob_device_info *info)
{
    return ob_hrx_probe(false, d, info);
}

static int hrx_sim_probe(const struct ob_device_opts *d, struct ob_device_info *info)
{
    return ob_hrx_probe(true, d, info);
}

static int hrx_supports(const struct ob_model *m)
{
    return ob_route_each_matrix(m, ob_hrx_type_supported, "hrx");
}

/* the host side is always built; the GPU runtime only with make CUDA=1 or HIP=1 */
const struct ob_route ob_route_hrx = {
    .name = "hrx",
    .about = "GPU kernels through CUDA or HIP, bitwise equal to cpu",
    .ops = &ob_be_hrx,
    .linked = ob_hrx_gpu_linked,
    .build = "build it with make CUDA=1 or make HIP=1",
    .archs = OB_ARCHS_ALL,
    .probe = hrx_probe,
    .supports = hrx_supports,
    .weight_bytes = ob_hrx_weight_bytes,
    .kv_bytes = ob_route_kv_fp16,
};

const struct ob_route ob_route_hrx_sim = {
    .name = "hrx-sim",
    .about = "the hrx kernels executed on the host, thread by thread, bitwise equal to cpu",
    .ops = &ob_be_hrx_sim,
    .archs = OB_ARCHS_ALL,
    .probe = hrx_sim_probe,
    .supports = hrx_supports,
    .weight_bytes = ob_route_no_device_weights,
    .kv_bytes = ob_route_kv_fp16,
};
