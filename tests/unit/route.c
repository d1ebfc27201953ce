/*
 * route.c — the route registry and the context around it (lib/route.c, lib/ctx.c), TAP:
 *   - names: cpu, ref and the default are found; a route that is not built in is OB_EDEVICE
 *     and says so; an unknown one is OB_EUSAGE and lists the routes;
 *   - device options: a device index the route lacks is OB_EDEVICE; a memory limit below what
 *     the KV cache needs is OB_ENOMEM, one above it opens;
 *   - ob_ctx_device names what the route runs on;
 *   - a backend's optional whole-layer op (backend.h `layer`) replaces the per-op sequence
 *     and gives the same bits;
 *   - hrx-sim is in every build and runs on the host; hrx without a GPU build is not built in;
 *     ob_route_fit reports a route's device and whether a context fits it.
 * Usage: route MODEL
 */
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "cpu/simd.h"
#include "hrx/hrx.h"
#include "tap.h"

extern const struct ob_be_ops ob_be_cpu;

/* a copy of the cpu route whose layer op counts its calls and runs the per-op sequence */
static int n_layer_calls;
static struct ob_be_ops fused;

static int fused_layer(struct ob_be *be, int l)
{
    const struct ob_be_ops *o = &ob_be_cpu;
    n_layer_calls++;
    int e;
    if ((e = o->rmsnorm(be, l, OB_W_ATTN_NORM, OB_BX, OB_BXN)) ||
        (e = o->matmul(be, l, OB_W_Q, OB_BXN, OB_BQ)) ||
        (e = o->matmul(be, l, OB_W_K, OB_BXN, OB_BK)) ||
        (e = o->matmul(be, l, OB_W_V, OB_BXN, OB_BV)) || (e = o->qk_rope(be, l)) ||
        (e = o->kv_store(be, l)) || (e = o->attention(be, l)) ||
        (e = o->matmul(be, l, OB_W_O, OB_BATT, OB_BOUT)) || (e = o->add(be, OB_BX, OB_BOUT)) ||
        (e = o->rmsnorm(be, l, OB_W_FFN_NORM, OB_BX, OB_BXN)) ||
        (e = o->matmul(be, l, OB_W_GATE, OB_BXN, OB_BGATE)) ||
        (e = o->matmul(be, l, OB_W_UP, OB_BXN, OB_BUP)) || (e = o->swiglu(be)) ||
        (e = o->matmul(be, l, OB_W_DOWN, OB_BGATE, OB_BOUT)) || (e = o->add(be, OB_BX, OB_BOUT)))
        return e;
    return 0;
}

/* logits of the last of n rows of one sequence, through ops */
static int run(const struct ob_be_ops *ops, struct ob_model *m, float *out)
{
    struct ob_be_params p = {.n_slots = 1, .n_ctx = 64, .max_rows = 8, .n_threads = 2};
    struct ob_be *be;
    int e = ops->open(m, &p, &be);
    if (e)
        return e;
    int32_t tok[6] = {1, 5, 9, 17, 33, 65}, pos[6] = {0, 1, 2, 3, 4, 5}, seq[6] = {0};
    int32_t rows[1] = {5};
    struct ob_batch b = {6, tok, pos, seq};
    e = ob_forward(ops, be, m, &b, rows, 1, out, NULL);
    ops->close(be);
    return e;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: route MODEL\n");
        return 2;
    }
    const struct ob_route *r = NULL;
    ok(ob_route_find("cpu", &r) == 0 && strcmp(r->name, "cpu") == 0, "cpu is found");
    ok(ob_route_find("ref", &r) == 0 && strcmp(r->name, "ref") == 0, "ref is found");
    ok(ob_route_find(NULL, &r) == 0 && strcmp(r->name, "cpu") == 0, "no name means cpu");
    int e = ob_route_find("hrx", &r);
    if (ob_hrx_gpu_linked())
        ok(e == 0 && strcmp(r->name, "hrx") == 0, "hrx is built in (make CUDA=1 or HIP=1)");
    else
        ok(e == OB_EDEVICE && strstr(ob_errmsg(), "not built"), "hrx is not built in: %s",
           ob_errmsg());
    ok(ob_route_find("hrx-sim", &r) == 0 && strcmp(r->name, "hrx-sim") == 0,
       "hrx-sim is found (every build has it)");
    e = ob_route_find("nosuch", &r);
    ok(e == OB_EUSAGE && strstr(ob_errmsg(), "cpu, ref") && strstr(ob_errmsg(), "hrx"),
       "an unknown route lists the routes: %s", ob_errmsg());

    struct ob_model *m;
    if (ob_model_open(argv[1], &m)) {
        printf("not ok - open: %s\n", ob_errmsg());
        return tap_done() | 1;
    }
    struct ob_ctx *c = NULL;
    struct ob_ctx_params cp = {.route = "cpu", .n_threads = 1, .n_slots = 2, .n_ctx = 256,
                               .max_batch = 16, .dev = {.index = 1}};
    e = ob_ctx_new(m, &cp, &c);
    ok(e == OB_EDEVICE, "cpu, device 1: OB_EDEVICE (%s)", ob_errmsg());
    uint64_t kv = ob_ctx_kv_bytes(m, 2, 256);
    cp.dev = (struct ob_device_opts){.mem_limit = kv};      /* 80% of it does not fit */
    e = ob_ctx_new(m, &cp, &c);
    ok(e == OB_ENOMEM && strstr(ob_errmsg(), "80%"), "a memory limit below the KV cache: "
       "OB_ENOMEM (%s)", ob_errmsg());
    cp.dev.mem_limit = 2 * kv;
    e = ob_ctx_new(m, &cp, &c);
    ok(e == 0, "a memory limit that fits: the context opens (%s)", e ? ob_errmsg() : "");
    int isa = -1;
    ob_isa_select(&isa);
    ok(c && strcmp(ob_ctx_device(c), ob_isa_name(isa)) == 0, "cpu runs on %s",
       c ? ob_ctx_device(c) : "?");
    ob_ctx_free(c);
    cp.route = "ref";
    cp.dev.mem_limit = 0;
    c = NULL;
    e = ob_ctx_new(m, &cp, &c);
    ok(e == 0 && strncmp(ob_ctx_device(c), "float64 openblas", 16) == 0, "ref runs on %s",
       c ? ob_ctx_device(c) : ob_errmsg());
    ob_ctx_free(c);
    cp.route = "hrx-sim";
    c = NULL;
    e = ob_ctx_new(m, &cp, &c);
    ok(e == 0 && strncmp(ob_ctx_device(c), "hrx-sim", 7) == 0, "hrx-sim runs on %s",
       c ? ob_ctx_device(c) : ob_errmsg());
    ob_ctx_free(c);
    cp.dev.index = 1;
    e = ob_ctx_new(m, &cp, &c);
    ok(e == OB_EDEVICE && strstr(ob_errmsg(), "hrx-sim has one device"), "hrx-sim, device 1: "
       "OB_EDEVICE (%s)", ob_errmsg());

    struct ob_route_fit f;
    struct ob_device_opts d0 = {0}, tight = {.mem_limit = kv};
    e = ob_route_fit(m, "hrx-sim", &d0, 2, 256, &f);
    ok(e == 0 && f.fits && f.kv_bytes == kv && f.weight_bytes == 0 && f.mem_bytes > kv &&
       strstr(f.device, "host"), "ob_route_fit hrx-sim: %s, %llu bytes of KV, fits", f.device,
       (unsigned long long)f.kv_bytes);
    e = ob_route_fit(m, "cpu", &tight, 2, 256, &f);
    ok(e == 0 && !f.fits && f.mem_bytes == kv, "ob_route_fit under a memory limit below the KV "
       "cache: does not fit");
    e = ob_route_fit(m, "hrx", &d0, 1, 16, &f);
    ok(e == OB_EDEVICE || (e == 0 && f.weight_bytes > 0), "ob_route_fit hrx: %s",
       e ? ob_errmsg() : f.device);

    uint32_t V = ob_model_hparams(m)->n_vocab;
    float *a = malloc(V * sizeof *a), *b = malloc(V * sizeof *b);
    fused = ob_be_cpu;
    fused.layer = fused_layer;
    int ea = run(&ob_be_cpu, m, a), eb = run(&fused, m, b);
    ok(ea == 0 && eb == 0 && n_layer_calls == (int)ob_model_hparams(m)->n_layer &&
       memcmp(a, b, V * sizeof *a) == 0, "a whole-layer op is called once per layer (%d) and "
       "gives the same bits", n_layer_calls);
    free(a);
    free(b);
    ob_model_close(m);
    return tap_done();
}
