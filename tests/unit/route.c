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
 *     npu-sim is in every build, npu only with make XRT=1, and npu-sim refuses a GGUF;
 *     ob_route_fit reports a route's device and whether a context fits it.
 *   - the cpu route's copy of the weights (cpu/weights.h ob_model_weights): OB_WEIGHTS=copy makes one
 *     copy of the tensor data (the same bytes, each at its offset in its 4 KB page) shared by
 *     every call, map reads in place, both give the same logits as the default; another value
 *     is OB_EUSAGE, from every call and from the route's open; a copy asked for in panels
 *     holds the Q4_K and Q5_0 matrices so (each reads back as the file's rows, the rest is
 *     the file's bytes) and gives the logits of the model read in place at every level this
 *     CPU runs (on GEMMA3 and MORE when given, models with Q4_K or Q5_0 matrices; else on
 *     MODEL);
 *   - with GEMMA3 (a gemma3 model): a route whose row does not list gemma3 (as every route
 *     written before its ops, and npu-sim) is refused by ob_route_supports with OB_EUNSUPP
 *     instead of computing llama's graph; the cpu route's row takes it and its ops run it.
 * Usage: route MODEL [GEMMA3 [MORE...]]
 */
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "host/simd.h"
#include "cpu/weights.h"
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

/*
 * Matrix w in the copy v: if its type is one of `types` and it fits, in panels, each row read
 * back as the file's (*n_pan counts it, *bad_rows the rows that differ); else rows, the
 * file's bytes (*bad_other).
 */
static void check_copied(const struct ob_weights *v, const struct ob_matrix *w, uint64_t types,
                         size_t *n_pan, size_t *bad_rows, size_t *bad_other)
{
    static char rowbuf[1 << 16];
    const char *in = ob_weights_at(v, w->data);
    if (!((types >> w->type & 1) && ob_panel_fits(w))) {
        *bad_other += ob_weights_layout(v, w->data) != OB_LAYOUT_ROWS ||
                      memcmp(in, w->data, (size_t)w->n * w->row_bytes) != 0;
        return;
    }
    (*n_pan)++;
    struct ob_matrix pm = *w;
    pm.data = in;
    pm.layout = ob_weights_layout(v, w->data);
    *bad_rows += pm.layout != OB_LAYOUT_P8 || w->row_bytes > sizeof rowbuf;
    for (int i = 0; pm.layout == OB_LAYOUT_P8 && i < w->n; i++) {
        ob_panel_row(&pm, i, rowbuf);
        *bad_rows += memcmp(rowbuf, (const char *)w->data + (size_t)i * w->row_bytes,
                            w->row_bytes) != 0;
    }
}

/*
 * A copy holding the Q4_K, Q5_0 and Q6_K matrices in panels (what the AVX2 level asks for):
 * each such matrix in it reads back row by row as the file's, the output matrix too (and with
 * it the token embeddings where they are tied to it), everything else is the file's bytes;
 * every level this CPU runs (the scalar one copying the panels' rows back) gives the logits of
 * the model read in place, the embedding lookup reading rows back out of the panels.
 */
static void panel_copy(const char *path)
{
    struct ob_model *mp;
    setenv("OB_WEIGHTS", "map", 1);
    if (ob_model_open(path, &mp)) {
        printf("not ok - open %s: %s\n", path, ob_errmsg());
        return;
    }
    uint32_t V = ob_model_hparams(mp)->n_vocab;
    float *a = malloc(V * sizeof *a), *t = malloc(V * sizeof *t);
    int e = run(&ob_be_cpu, mp, a);
    ob_model_close(mp);
    setenv("OB_WEIGHTS", "copy", 1);
    if (e || ob_model_open(path, &mp)) {
        printf("not ok - %s: %s\n", path, ob_errmsg());
        free(a);
        free(t);
        return;
    }
    struct ob_weights v;
    const uint64_t types = (uint64_t)1 << OB_Q4_K | (uint64_t)1 << OB_Q5_0 | (uint64_t)1 << OB_Q6_K;
    e = ob_model_weights(mp, types, &v);
    size_t n_pan = 0, bad_rows = 0, bad_other = 0, covered = 0;
    for (uint32_t l = 0; e == 0 && l < mp->hp.n_layer; l++)
        for (int r = OB_W_Q; r <= OB_W_DOWN; r++) {
            const struct ob_matrix *w = ob_layer_matrix(mp, l, r);
            check_copied(&v, w, types, &n_pan, &bad_rows, &bad_other);
            covered += (size_t)w->n * w->row_bytes;
        }
    bool tied = mp->output.data == mp->tok_embd.data;
    size_t out_pan = 0;
    if (e == 0) {
        check_copied(&v, &mp->output, types, &out_pan, &bad_rows, &bad_other);
        if (!tied)
            check_copied(&v, &mp->tok_embd, 0, &n_pan, &bad_rows, &bad_other);
    }
    bool sorted = true;
    for (size_t i = 1; i < v.n_panels; i++)
        sorted &= v.panels[i - 1] < v.panels[i];
    ok(e == 0 && n_pan > 0 && v.n_panels == n_pan + out_pan && sorted && bad_rows == 0 &&
       bad_other == 0,
       "%s: a copy in panels: %zu Q4_K, Q5_0 and Q6_K layer matrices read back row by row, the "
       "output matrix%s %s, the other matrices are the file's bytes (%zu KB of layer matrices)",
       path, n_pan, tied ? " (tied to the token embeddings)" : "",
       out_pan ? "in panels too" : "rows", covered >> 10);
    for (int isa = 0; isa <= ob_isa_best(); isa++) {
        setenv("OB_SIMD", ob_isa_name(isa), 1);
        e = run(&ob_be_cpu, mp, t);
        ok(e == 0 && memcmp(t, a, V * sizeof *a) == 0, "%s: the copy in panels at the %s level: "
           "the logits of the model read in place%s", path, ob_isa_name(isa), e ? ob_errmsg() : "");
    }
    unsetenv("OB_SIMD");
    unsetenv("OB_WEIGHTS");
    ob_model_close(mp);
    free(a);
    free(t);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: route MODEL [GEMMA3 [MORE...]]\n");
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
    ok(ob_route_find("npu-sim", &r) == 0 && strcmp(r->name, "npu-sim") == 0,
       "npu-sim is found (every build has it)");
    e = ob_route_find("npu", &r);
#ifdef OB_HAVE_XRT
    ok(e == 0 && strcmp(r->name, "npu") == 0, "npu is built in (make XRT=1)");
#else
    ok(e == OB_EDEVICE && strstr(ob_errmsg(), "make XRT=1"), "npu is not built in: %s",
       ob_errmsg());
#endif
    e = ob_route_find("nosuch", &r);
    ok(e == OB_EUSAGE && strstr(ob_errmsg(), "cpu, ref") && strstr(ob_errmsg(), "hrx") &&
       strstr(ob_errmsg(), "npu-sim") && strstr(ob_errmsg(), "npu"),
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
    /* npu-sim runs Q4NX packs only: a GGUF is refused with the way to make a pack */
    e = ob_route_fit(m, "npu-sim", &d0, 1, 16, &f);
    ok(e == OB_EUNSUPP && strstr(ob_errmsg(), "1b-requant --type q4nx"),
       "ob_route_fit npu-sim on a GGUF: OB_EUNSUPP (%s)", ob_errmsg());
    bool nb;
    char dn[64] = "";
    uint64_t mb = 0;
    e = ob_route_probe("npu-sim", &d0, &nb, dn, &mb);
    ok(e == 0 && nb && strncmp(dn, "npu-sim ", 8) == 0 && mb > 0, "ob_route_probe npu-sim: %s",
       e ? ob_errmsg() : dn);

    uint32_t V = ob_model_hparams(m)->n_vocab;
    float *a = malloc(V * sizeof *a), *b = malloc(V * sizeof *b);
    fused = ob_be_cpu;
    fused.layer = fused_layer;
    int ea = run(&ob_be_cpu, m, a), eb = run(&fused, m, b);
    ok(ea == 0 && eb == 0 && n_layer_calls == (int)ob_model_hparams(m)->n_layer &&
       memcmp(a, b, V * sizeof *a) == 0, "a whole-layer op is called once per layer (%d) and "
       "gives the same bits", n_layer_calls);
    free(b);
    ob_model_close(m);

    /* the weights' copy: one model per OB_WEIGHTS choice (each model decides once) */
    const char *modes[3] = {"copy", "map", "bogus"};
    float *wl[2] = {malloc(V * sizeof(float)), malloc(V * sizeof(float))};
    for (int i = 0; i < 3; i++) {
        struct ob_model *mw;
        setenv("OB_WEIGHTS", modes[i], 1);
        if (ob_model_open(argv[1], &mw)) {
            printf("not ok - open: %s\n", ob_errmsg());
            return tap_done() | 1;
        }
        struct ob_weights v1, v2;
        int e1 = ob_model_weights(mw, 0, &v1), e2 = ob_model_weights(mw, 0, &v2);
        const void *wq = mw->layers[0].wq.data, *out = mw->output.data;
        if (i == 0) {
            ok(e1 == 0 && e2 == 0 && v1.len > 0 && v1.at != v1.lo && v2.at == v1.at &&
               v2.len == v1.len && memcmp(v1.at, v1.lo, v1.len) == 0 &&
               (uintptr_t)v1.at % 4096 == (uintptr_t)v1.lo % 4096,
               "OB_WEIGHTS=copy: one copy of %zu bytes, shared, the same bytes at the same page "
               "offsets", v1.len);
            ok(ob_weights_at(&v1, wq) == v1.at + ((const char *)wq - v1.lo) &&
               ob_weights_at(&v1, out) == v1.at + ((const char *)out - v1.lo) &&
               ob_weights_at(&v1, wl[0]) == (const void *)wl[0],
               "the copy: matrices are read in it, other memory in place");
        } else if (i == 1) {
            ok(e1 == 0 && e2 == 0 && v1.len == 0 && ob_weights_at(&v1, wq) == wq,
               "OB_WEIGHTS=map: no copy, matrices read in place");
        } else {
            ok(e1 == OB_EUSAGE && e2 == OB_EUSAGE &&
               strstr(ob_errmsg(), "OB_WEIGHTS=bogus: expected auto, copy or map"),
               "OB_WEIGHTS=bogus: OB_EUSAGE from every call (%s)", ob_errmsg());
            float *t = malloc(V * sizeof *t);
            e = run(&ob_be_cpu, mw, t);
            ok(e == OB_EUSAGE, "OB_WEIGHTS=bogus: the cpu route does not open (%s)",
               ob_errmsg());
            free(t);
        }
        if (i < 2) {
            e = run(&ob_be_cpu, mw, wl[i]);
            ok(e == 0 && memcmp(wl[i], a, V * sizeof *a) == 0, "OB_WEIGHTS=%s: the logits "
               "of the default's bits", modes[i]);
        }
        ob_model_close(mw);
    }
    unsetenv("OB_WEIGHTS");
    free(wl[0]);
    free(wl[1]);
    free(a);

    if (argc >= 3) {
        if (ob_model_open(argv[2], &m)) {
            printf("not ok - open %s: %s\n", argv[2], ob_errmsg());
            return tap_done() | 1;
        }
        V = ob_model_hparams(m)->n_vocab;
        a = malloc(V * sizeof *a);
        const struct ob_route *cpu, *npu;
        e = ob_route_find("cpu", &cpu) || ob_route_find("npu-sim", &npu);
        ok(e == 0, "the cpu and npu-sim rows are found");
        if (e == 0) {
            struct ob_route old = *cpu;
            old.archs &= ~OB_ARCH_BIT(OB_ARCH_GEMMA3);
            e = ob_route_supports(&old, m);
            ok(e == OB_EUNSUPP && strstr(ob_errmsg(), "route cpu has no gemma3 forward pass"),
               "gemma3 on a route whose row lacks it: OB_EUNSUPP (%s)", ob_errmsg());
            e = ob_route_supports(npu, m);
            ok(e == OB_EUNSUPP && strstr(ob_errmsg(), "route npu-sim has no gemma3 forward "
               "pass"), "gemma3 on npu-sim: OB_EUNSUPP (%s)", ob_errmsg());
            e = ob_route_supports(cpu, m);
            ok(e == 0, "gemma3 on the cpu route's row: supported (%s)", e ? ob_errmsg() : "");
        }
        e = run(&ob_be_cpu, m, a);
        ok(e == 0, "gemma3 on the cpu route runs (%s)", e ? ob_errmsg() : "");
        free(a);
        ob_model_close(m);
    }
    for (int i = argc > 2 ? 2 : 1; i < argc; i++)
        panel_copy(argv[i]);
    return tap_done();
}
