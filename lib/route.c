/*
 * route.c — the route registry: the list of every route 1b knows. Each route's row (its
 * probe, the models it supports, its memory sizes) lives in its own folder (cpu/route-cpu.c,
 * ...); this file lists them, finds one by name and checks a model against it, with the
 * helpers the rows share. ob_ctx_new (ctx.c) goes through here; nothing else names a route. To
 * add one, see the top of backend.h.
 *
 * A route that is not built in keeps its row (ops NULL) so that asking for it says how to get
 * it; a route never falls back to another.
 */
#include <stdio.h>
#include <string.h>
#include <sys/sysinfo.h>

#include "backend.h"
#include "quant.h"
#include "host/simd.h"

extern const struct ob_route ob_route_cpu, ob_route_ref, ob_route_hrx, ob_route_hrx_sim,
    ob_route_npu, ob_route_npu_sim;

/* ---- what the rows share --------------------------------------------------------------------- */

int ob_route_host_memory(const struct ob_device_opts *d, struct ob_device_info *info)
{
    if (d->index != 0)
        return ob_seterr(OB_EDEVICE, "device %d: host routes have one device, 0", d->index);
    struct sysinfo si;
    uint64_t ram = sysinfo(&si) == 0 ? (uint64_t)si.totalram * si.mem_unit : 0;
    info->mem_bytes = d->mem_limit && (!ram || d->mem_limit < ram) ? d->mem_limit : ram;
    return 0;
}

/* a route that cannot multiply a weight type: what it runs instead */
static int no_kernels(const char *route, uint32_t t)
{
    if (t == OB_Q4NX)
        return ob_seterr(OB_EUNSUPP, "route %s has no kernels for Q4NX weights: the model is a "
                         "Q4NX pack, which -d npu-sim (or npu) runs", route);
    if (strncmp(route, "npu", 3) == 0)
        return ob_seterr(OB_EUNSUPP, "route %s runs Q4NX packs, and this model has %s weights "
                         "(1b-requant --type q4nx makes a pack of it)", route, ob_type_name(t));
    return ob_seterr(OB_EUNSUPP, "route %s has no kernels for %s weights", route,
                     ob_type_name(t));
}

int ob_route_each_matrix(const struct ob_model *m, bool (*ok)(uint32_t), const char *route)
{
    const struct ob_matrix *w[2] = {&m->tok_embd, &m->output};
    for (int i = 0; i < 2; i++)
        if (!ok(w[i]->type))
            return no_kernels(route, w[i]->type);
    for (uint32_t l = 0; l < m->hp.n_layer; l++)
        for (int r = OB_W_Q; r <= OB_W_DOWN; r++) {
            const struct ob_matrix *x = ob_layer_matrix(m, (int)l, r);
            if (!ok(x->type))
                return no_kernels(route, x->type);
        }
    return 0;
}

int ob_route_host_simd(const struct ob_device_opts *d, struct ob_device_info *info,
                       const char *prefix)
{
    int isa, e;
    if ((e = ob_isa_select(&isa)))               /* OB_SIMD names a level this CPU lacks */
        return e;
    snprintf(info->name, sizeof info->name, "%s%s", prefix, ob_isa_name(isa));
    return ob_route_host_memory(d, info);
}

uint64_t ob_route_no_device_weights(const struct ob_model *m) { return 0; }

uint64_t ob_route_kv_fp16(const struct ob_model *m, int n_slots, int n_ctx)
{
    return (uint64_t)n_slots * ob_hparams_kv_bytes(&m->hp, (uint64_t)n_ctx);
}

/* ---- the table ------------------------------------------------------------------------------ */

static const struct ob_route *const routes[] = {
    &ob_route_cpu, &ob_route_ref, &ob_route_hrx, &ob_route_hrx_sim, &ob_route_npu,
    &ob_route_npu_sim,
};

#define N_ROUTES (int)(sizeof routes / sizeof routes[0])

/* is the route in this binary? */
static bool built(const struct ob_route *r)
{
    return r->ops && (!r->linked || r->linked());
}

int ob_route_find(const char *name, const struct ob_route **out)
{
    if (!name)
        name = "cpu";
    for (int i = 0; i < N_ROUTES; i++) {
        if (strcmp(routes[i]->name, name) != 0)
            continue;
        if (!built(routes[i]))
            return ob_seterr(OB_EDEVICE, "route '%s' is not built into this binary: %s", name,
                             routes[i]->build);
        *out = routes[i];
        return 0;
    }
    char have[128] = "", lack[128] = "";
    for (int i = 0; i < N_ROUTES; i++) {
        char *b = built(routes[i]) ? have : lack;
        size_t len = strlen(b);
        snprintf(b + len, 128 - len, "%s%s", len ? ", " : "", routes[i]->name);
    }
    return ob_seterr(OB_EUSAGE, "unknown route '%s' (this build has %s; not built: %s)", name,
                     have, lack);
}

int ob_route_probe(const char *name, const struct ob_device_opts *d, bool *is_built,
                   char device[64], uint64_t *mem_bytes)
{
    const struct ob_route *r;
    struct ob_device_info info = {0};
    *is_built = false;
    int e = ob_route_find(name, &r);
    if (e)
        return e;                  /* not built in (the message says how), or unknown */
    *is_built = true;
    if ((e = r->probe(d, &info)))
        return e;
    snprintf(device, 64, "%s", info.name);
    *mem_bytes = info.mem_bytes;
    return 0;
}

int ob_route_fit(struct ob_model *m, const char *route, const struct ob_device_opts *d,
                 int n_slots, int n_ctx, struct ob_route_fit *out)
{
    const struct ob_route *r;
    struct ob_device_info info = {0};
    int e;
    memset(out, 0, sizeof *out);
    if ((e = ob_route_find(route, &r)) || (e = r->probe(d, &info)) ||
        (e = ob_route_supports(r, m)))
        return e;
    snprintf(out->device, sizeof out->device, "%s", info.name);
    out->mem_bytes = info.mem_bytes;
    out->weight_bytes = r->weight_bytes(m);
    out->kv_bytes = r->kv_bytes(m, n_slots, n_ctx);
    /* ob_ctx_new's budget (ctx.c): weights and caches within 80% of the memory */
    out->fits = !info.mem_bytes || out->weight_bytes + out->kv_bytes <= info.mem_bytes / 10 * 8;
    return 0;
}

int ob_route_supports(const struct ob_route *r, const struct ob_model *m)
{
    if (!(r->archs & OB_ARCH_BIT(m->hp.arch_id)))
        return ob_seterr(OB_EUNSUPP, "route %s has no %s forward pass", r->name,
                         ob_arch_name(m->hp.arch_id));
    return r->supports(m);
}
