/*
 * route.c — the route registry: every route 1b knows, whether this binary has it, how to find
 * its device, what it can run and how much memory it needs. ob_ctx_new (ctx.c) goes through
 * here; nothing else names a route. To add one, see the top of backend.h.
 *
 * A route that is not built in keeps its row (ops NULL) so that asking for it says how to get
 * it; a route never falls back to another.
 */
#include <stdio.h>
#include <string.h>
#include <sys/sysinfo.h>

#include "backend.h"
#include "cpu/simd.h"
#include "hrx/hrx.h"

extern const struct ob_be_ops ob_be_cpu;
extern const struct ob_be_ops ob_be_ref;
extern const struct ob_be_ops ob_be_hrx;
extern const struct ob_be_ops ob_be_hrx_sim;

/* ---- host routes: memory is the machine's ------------------------------------------------ */

static int host_memory(const struct ob_device_opts *d, struct ob_device_info *info)
{
    if (d->index != 0)
        return ob_seterr(OB_EDEVICE, "device %d: host routes have one device, 0", d->index);
    struct sysinfo si;
    uint64_t ram = sysinfo(&si) == 0 ? (uint64_t)si.totalram * si.mem_unit : 0;
    info->mem_bytes = d->mem_limit && (!ram || d->mem_limit < ram) ? d->mem_limit : ram;
    return 0;
}

static int cpu_probe(const struct ob_device_opts *d, struct ob_device_info *info)
{
    int isa, e;
    if ((e = ob_isa_select(&isa)))               /* OB_SIMD names a level this CPU lacks */
        return e;
    snprintf(info->name, sizeof info->name, "%s", ob_isa_name(isa));
    return host_memory(d, info);
}

static int ref_probe(const struct ob_device_opts *d, struct ob_device_info *info)
{
    const char *core;
    int threads;
    ob_blas_info(&core, &threads);
    snprintf(info->name, sizeof info->name, "float64 openblas %s", core ? core : "?");
    return host_memory(d, info);
}

/* every matrix of the model, for the type checks below */
static int each_matrix(const struct ob_model *m, bool (*ok)(uint32_t), const char *route)
{
    const struct ob_matrix *w[2] = {&m->tok_embd, &m->output};
    for (int i = 0; i < 2; i++)
        if (!ok(w[i]->type))
            return ob_seterr(OB_EUNSUPP, "route %s has no kernels for %s weights", route,
                             ob_type_name(w[i]->type));
    for (uint32_t l = 0; l < m->hp.n_layer; l++)
        for (int r = OB_W_Q; r <= OB_W_DOWN; r++) {
            const struct ob_matrix *x = ob_layer_matrix(m, (int)l, r);
            if (!ok(x->type))
                return ob_seterr(OB_EUNSUPP, "route %s has no kernels for %s weights", route,
                                 ob_type_name(x->type));
        }
    return 0;
}

static bool dequantisable(uint32_t t) { return ob_type_supported(t) || ob_type_is_float(t); }

static int cpu_supports(const struct ob_model *m) { return each_matrix(m, ob_type_supported, "cpu"); }
static int ref_supports(const struct ob_model *m) { return each_matrix(m, dequantisable, "ref"); }

static uint64_t no_device_weights(const struct ob_model *m) { return 0; }

/* ---- hrx: GPU kernels (lib/hrx/); hrx-sim runs them on the host ----------------------------- */

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
    return each_matrix(m, ob_hrx_type_supported, "hrx");
}

/* fp16 keys and values */
static uint64_t kv_fp16(const struct ob_model *m, int n_slots, int n_ctx)
{
    return (uint64_t)n_slots * ob_hparams_kv_bytes(&m->hp, (uint64_t)n_ctx);
}

/* float64 keys and values: four times fp16 */
static uint64_t kv_f64(const struct ob_model *m, int n_slots, int n_ctx)
{
    return 4 * kv_fp16(m, n_slots, n_ctx);
}

/* ---- the table ------------------------------------------------------------------------------ */

static const struct ob_route routes[] = {
    {"cpu", "canonical kernels on the host, scalar reference and AVX2/AVX-512 (the default)",
     &ob_be_cpu, NULL, cpu_probe, cpu_supports, no_device_weights, kv_fp16},
    {"ref", "float64 activations and OpenBLAS: an oracle of exact arithmetic",
     &ob_be_ref, NULL, ref_probe, ref_supports, no_device_weights, kv_f64},
    {"hrx", "GPU kernels through CUDA or HIP, bitwise equal to cpu",
     &ob_be_hrx, "build it with make CUDA=1 or make HIP=1", hrx_probe, hrx_supports,
     ob_hrx_weight_bytes, kv_fp16},
    {"hrx-sim", "the hrx kernels executed on the host, thread by thread, bitwise equal to cpu",
     &ob_be_hrx_sim, NULL, hrx_sim_probe, hrx_supports, no_device_weights, kv_fp16},
    {"npu", "Q4NX packs through XRT",
     NULL, "not part of this tree yet (XRT=1 will build it)"},
    {"npu-sim", "the Q4NX arithmetic emulated on the CPU",
     NULL, "not part of this tree yet"},
};

#define N_ROUTES (int)(sizeof routes / sizeof routes[0])

/* is the route in this binary? (hrx's host side always is; its GPU runtime only with
 * make CUDA=1 or HIP=1) */
static bool built(const struct ob_route *r)
{
    return r->ops && (r->ops != &ob_be_hrx || ob_hrx_gpu_linked());
}

int ob_route_find(const char *name, const struct ob_route **out)
{
    if (!name)
        name = "cpu";
    for (int i = 0; i < N_ROUTES; i++) {
        if (strcmp(routes[i].name, name) != 0)
            continue;
        if (!built(&routes[i]))
            return ob_seterr(OB_EDEVICE, "route '%s' is not built into this binary: %s", name,
                             routes[i].build);
        *out = &routes[i];
        return 0;
    }
    char have[128] = "", lack[128] = "";
    for (int i = 0; i < N_ROUTES; i++) {
        char *b = built(&routes[i]) ? have : lack;
        size_t len = strlen(b);
        snprintf(b + len, 128 - len, "%s%s", len ? ", " : "", routes[i].name);
    }
    return ob_seterr(OB_EUSAGE, "unknown route '%s' (this build has %s; not built: %s)", name,
                     have, lack);
}

int ob_route_fit(struct ob_model *m, const char *route, const struct ob_device_opts *d,
                 int n_slots, int n_ctx, struct ob_route_fit *out)
{
    const struct ob_route *r;
    struct ob_device_info info = {0};
    int e;
    memset(out, 0, sizeof *out);
    if ((e = ob_route_find(route, &r)) || (e = r->probe(d, &info)) || (e = r->supports(m)))
        return e;
    snprintf(out->device, sizeof out->device, "%s", info.name);
    out->mem_bytes = info.mem_bytes;
    out->weight_bytes = r->weight_bytes(m);
    out->kv_bytes = r->kv_bytes(m, n_slots, n_ctx);
    /* ob_ctx_new's budget (ctx.c): weights and caches within 80% of the memory */
    out->fits = !info.mem_bytes || out->weight_bytes + out->kv_bytes <= info.mem_bytes / 10 * 8;
    return 0;
}
