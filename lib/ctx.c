/*
 * ctx.c — inference contexts: a route's backend instance with the KV cache of n_slots
 * sequences, its memory budget, and the checks and splitting around the forward pass.
 *
 * The memory a context needs is budgeted up front: the route's device weights plus all slots'
 * KV caches at full length must fit in 80% of the memory the route's probe reports (or
 * --mem-limit style device options), so that a context that opens never runs out later.
 *
 * A batch larger than the backend's row capacity runs in consecutive pieces: every row's
 * result depends only on its own inputs and its sequence's cache, so the pieces give the same
 * bits as one pass would.
 */
#include <stdio.h>
#include <stdlib.h>

#include "backend.h"

struct ob_ctx {
    struct ob_model *m;
    const struct ob_route *route;
    struct ob_be *be;
    struct ob_ctx_params p;
    int32_t *rows;                 /* [max_batch]: a piece's wanted rows */
};

/* "1.5 GiB", "12.0 MiB" */
static const char *size_str(uint64_t b, char buf[32])
{
    if (b >= (1ull << 30))
        snprintf(buf, 32, "%.1f GiB", (double)b / (1ull << 30));
    else
        snprintf(buf, 32, "%.1f MiB", (double)b / (1ull << 20));
    return buf;
}

int ob_ctx_new(struct ob_model *m, const struct ob_ctx_params *p, struct ob_ctx **out)
{
    const struct ob_route *r;
    struct ob_device_info info = {0};
    int e;
    if (p->n_slots < 1 || p->n_ctx < 1 || p->max_batch < 1 || p->n_threads < 1)
        return ob_seterr(OB_EUSAGE, "context: slots, positions, batch and threads must be >= 1");
    if (p->dev.index < 0)
        return ob_seterr(OB_EUSAGE, "context: device index %d", p->dev.index);
    if ((e = ob_route_find(p->route, &r)) || (e = r->probe(&p->dev, &info)) ||
        (e = ob_route_supports(r, m)))
        return e;
    if (m->hp.n_ctx_train && (uint32_t)p->n_ctx > m->hp.n_ctx_train)
        return ob_seterr(OB_ERANGE, "context of %d positions exceeds the model's %u",
                         p->n_ctx, m->hp.n_ctx_train);
    uint64_t kv = r->kv_bytes(m, p->n_slots, p->n_ctx), w = r->weight_bytes(m);
    char b1[32], b2[32];
    /* too little memory on a device (whose memory holds the weights: w > 0) is the device's
     * shortcoming, exit status 4 (1b(7)); on the host it is OB_ENOMEM */
    if (info.mem_bytes && kv + w > info.mem_bytes / 10 * 8)
        return ob_seterr(w ? OB_EDEVICE : OB_ENOMEM, "a KV cache for %d slots of %d positions needs %s%s, more "
                         "than 80%% of the %s of memory: lower the context or the slots",
                         p->n_slots, p->n_ctx, size_str(kv, b1),
                         w ? " next to the weights" : "", size_str(info.mem_bytes, b2));
    struct ob_ctx *c = calloc(1, sizeof *c);
    if (!c)
        return ob_seterr(OB_ENOMEM, "out of memory");
    c->m = m;
    c->route = r;
    c->p = *p;
    if (!(c->rows = malloc((size_t)p->max_batch * sizeof *c->rows))) {
        free(c);
        return ob_seterr(OB_ENOMEM, "out of memory");
    }
    struct ob_be_params bp = {p->n_slots, p->n_ctx, p->max_batch, p->n_threads, p->dev};
    if ((e = r->ops->open(m, &bp, &c->be))) {
        free(c->rows);
        free(c);
        return e;
    }
    *out = c;
    return 0;
}

void ob_ctx_free(struct ob_ctx *c)
{
    if (!c)
        return;
    c->route->ops->close(c->be);
    free(c->rows);
    free(c);
}

const char *ob_ctx_route(const struct ob_ctx *c) { return c->route->name; }
const char *ob_ctx_device(const struct ob_ctx *c) { return c->route->ops->device(c->be); }
struct ob_model *ob_ctx_model(const struct ob_ctx *c) { return c->m; }
const struct ob_ctx_params *ob_ctx_params(const struct ob_ctx *c) { return &c->p; }

struct ob_pool *ob_ctx_pool(const struct ob_ctx *c)
{
    return c->route->ops->pool ? c->route->ops->pool(c->be) : NULL;
}

void *ob_ctx_host_alloc(struct ob_ctx *c, size_t bytes)
{
    return c->route->ops->host_alloc ? c->route->ops->host_alloc(c->be, bytes) : malloc(bytes);
}

void ob_ctx_host_free(struct ob_ctx *c, void *p)
{
    if (c->route->ops->host_free)
        c->route->ops->host_free(c->be, p);
    else
        free(p);
}

uint64_t ob_ctx_kv_bytes(const struct ob_model *m, int n_slots, int n_ctx)
{
    return (uint64_t)n_slots * ob_hparams_kv_bytes(&m->hp, (uint64_t)n_ctx);
}

int ob_ctx_forward(struct ob_ctx *c, int n, const int32_t *tok, const int32_t *pos,
                   const int32_t *seq, const int32_t *want, int n_want, float *out32,
                   double *out64)
{
    const struct ob_hparams *hp = &c->m->hp;
    for (int i = 0; i < n; i++) {
        if (seq[i] < 0 || seq[i] >= c->p.n_slots)
            return ob_seterr(OB_EUSAGE, "row %d: slot %d does not exist", i, seq[i]);
        if (pos[i] < 0 || pos[i] >= c->p.n_ctx)
            return ob_seterr(OB_ERANGE, "row %d: position %d is outside the context of %d",
                             i, pos[i], c->p.n_ctx);
        if (tok[i] < 0 || (uint32_t)tok[i] >= hp->n_vocab)
            return ob_seterr(OB_ERANGE, "row %d: token id %d is outside the vocabulary of %u",
                             i, tok[i], hp->n_vocab);
    }
    for (int j = 0; j < n_want; j++)
        if (want[j] < 0 || want[j] >= n || (j && want[j] <= want[j - 1]))
            return ob_seterr(OB_EUSAGE, "logit rows must be increasing row indices < %d", n);
    int B = c->p.max_batch, e, w = 0;
    for (int r0 = 0; r0 < n; r0 += B) {
        struct ob_batch b = {n - r0 < B ? n - r0 : B, tok + r0, pos + r0, seq + r0};
        /* the logits of this piece's wanted rows, indexed within the piece */
        int k = 0, w0 = w;
        while (w < n_want && want[w] < r0 + b.n)
            c->rows[k++] = want[w++] - r0;
        size_t off = (size_t)w0 * hp->n_vocab;
        if ((e = ob_forward(c->route->ops, c->be, c->m, &b, c->rows, k, out32 + off,
                            out64 ? out64 + off : NULL)))
            return e;
    }
    return 0;
}

int ob_ctx_kv_copy(struct ob_ctx *c, int dst, int src, int n_pos)
{
    if (dst < 0 || dst >= c->p.n_slots || src < 0 || src >= c->p.n_slots || n_pos < 0 ||
        n_pos > c->p.n_ctx)
        return ob_seterr(OB_EUSAGE, "kv copy: bad slots %d <- %d or length %d", dst, src, n_pos);
    if (dst == src || n_pos == 0)
        return 0;
    return c->route->ops->kv_copy(c->be, dst, src, n_pos);
}
