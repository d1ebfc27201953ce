/*
 * forward.c — the transformer forward pass, written once against the backend ops (backend.h),
 * and the inference context that holds a backend instance.
 *
 * Per layer (llama, qwen2, qwen3):
 *   XN = rmsnorm(X) * attn_norm
 *   Q, K, V = Wq XN (+bq), Wk XN (+bk), Wv XN (+bv)
 *   Q, K = rope(qk_norm(Q, K))           (qk_norm only where the model has it: qwen3)
 *   cache[seq][pos] = K, V
 *   ATT = attention(Q, cache[seq][0..pos])   (grouped: query head h uses kv head h / group)
 *   X += Wo ATT
 *   XN = rmsnorm(X) * ffn_norm
 *   X += Wdown (silu(Wgate XN) * (Wup XN))
 * then logits = Woutput (rmsnorm(X) * output_norm) for the rows that ask for them.
 *
 * A batch larger than the backend's row capacity is run in consecutive pieces: since every
 * row's result depends only on its own inputs and its sequence's cache, the pieces give the
 * same bits as one pass would.
 */
#include <math.h>
#include <sys/sysinfo.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"

struct ob_ctx {
    struct ob_model *m;
    const struct ob_be_ops *ops;
    struct ob_be *be;
    struct ob_ctx_params p;
    int isa;
};

int ob_rope_tables(const struct ob_hparams *hp, int n_ctx, float **cs, float **sn)
{
    int half = (int)hp->n_rot / 2;
    float *c = malloc((size_t)n_ctx * (size_t)half * sizeof *c);
    float *s = malloc((size_t)n_ctx * (size_t)half * sizeof *s);
    if (!c || !s) {
        free(c);
        free(s);
        return ob_seterr(OB_ENOMEM, "out of memory for rope tables");
    }
    for (int i = 0; i < half; i++) {
        double theta = pow((double)hp->rope_base, -2.0 * i / (double)hp->n_rot);
        for (int p = 0; p < n_ctx; p++) {
            double a = (double)p * theta;
            c[(size_t)p * half + i] = (float)cos(a);
            s[(size_t)p * half + i] = (float)sin(a);
        }
    }
    *cs = c;
    *sn = s;
    return 0;
}

static const struct ob_be_ops *route(const char *name, int *e)
{
    *e = 0;
    if (!name || strcmp(name, "cpu") == 0)
        return &ob_be_cpu;
    if (strcmp(name, "ref") == 0)
        return &ob_be_ref;
    if (strcmp(name, "hrx") == 0 || strcmp(name, "npu") == 0) {
        *e = ob_seterr(OB_EDEVICE, "route '%s' is not built into this binary (see INSTALL: "
                       "HIP=1, XRT=1)", name);
        return NULL;
    }
    *e = ob_seterr(OB_EUSAGE, "unknown route '%s' (cpu, ref, hrx, npu)", name);
    return NULL;
}

int ob_ctx_new(struct ob_model *m, const struct ob_ctx_params *p, struct ob_ctx **out)
{
    int e;
    const struct ob_be_ops *ops = route(p->route, &e);
    if (!ops)
        return e;
    if (p->n_slots < 1 || p->n_ctx < 1 || p->max_batch < 1 || p->n_threads < 1)
        return ob_seterr(OB_EUSAGE, "context: slots, positions, batch and threads must be >= 1");
    if (m->hp.n_ctx_train && (uint32_t)p->n_ctx > m->hp.n_ctx_train)
        return ob_seterr(OB_ERANGE, "context of %d positions exceeds the model's %u",
                         p->n_ctx, m->hp.n_ctx_train);
    /* the KV cache is budgeted up front: all slots at full length must fit in memory (the
     * cpu route keeps fp16 keys and values, the ref route float64) */
    uint64_t kv = ob_ctx_kv_bytes(m, p->n_slots, p->n_ctx) * (ops == &ob_be_ref ? 4 : 1);
    struct sysinfo si;
    if (sysinfo(&si) == 0) {
        uint64_t ram = (uint64_t)si.totalram * si.mem_unit;
        if (kv > ram / 10 * 8)
            return ob_seterr(OB_ENOMEM, "a KV cache for %d slots of %d positions needs %.1f GiB, "
                             "more than 80%% of the %.1f GiB of memory: lower the context or the "
                             "slots", p->n_slots, p->n_ctx, (double)kv / (1 << 30),
                             (double)ram / (1 << 30));
    }
    struct ob_ctx *c = calloc(1, sizeof *c);
    if (!c)
        return ob_seterr(OB_ENOMEM, "out of memory");
    c->m = m;
    c->ops = ops;
    c->p = *p;
    /* the SIMD level is the cpu route's; other routes compute on their own terms */
    c->isa = OB_ISA_SCALAR;
    if (ops == &ob_be_cpu && (e = ob_isa_select(&c->isa))) {
        free(c);
        return e;
    }
    struct ob_be_params bp = {p->n_slots, p->n_ctx, p->max_batch, p->n_threads, c->isa};
    if ((e = ops->open(m, &bp, &c->be))) {
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
    c->ops->close(c->be);
    free(c);
}

const char *ob_ctx_route(const struct ob_ctx *c) { return c->ops->name; }
const char *ob_ctx_isa(const struct ob_ctx *c) { return ob_isa_name(c->isa); }
struct ob_model *ob_ctx_model(const struct ob_ctx *c) { return c->m; }
const struct ob_ctx_params *ob_ctx_params(const struct ob_ctx *c) { return &c->p; }

uint64_t ob_ctx_kv_bytes(const struct ob_model *m, int n_slots, int n_ctx)
{
    return (uint64_t)n_slots * ob_hparams_kv_bytes(&m->hp, (uint64_t)n_ctx);
}

/* one piece of at most max_batch rows */
static int forward_piece(struct ob_ctx *c, int n, const int32_t *tok, const int32_t *pos,
                         const int32_t *seq)
{
    const struct ob_be_ops *o = c->ops;
    struct ob_be *be = c->be;
    int e;
    if ((e = o->embed(be, tok, n)))
        return e;
    for (int l = 0; l < (int)c->m->hp.n_layer; l++) {
        if ((e = o->rmsnorm(be, l, OB_W_ATTN_NORM, OB_BX, OB_BXN, n)) ||
            (e = o->matmul(be, l, OB_W_Q, OB_BXN, OB_BQ, n)) ||
            (e = o->matmul(be, l, OB_W_K, OB_BXN, OB_BK, n)) ||
            (e = o->matmul(be, l, OB_W_V, OB_BXN, OB_BV, n)) ||
            (e = o->qk_rope(be, l, pos, n)) ||
            (e = o->kv_store(be, l, seq, pos, n)) ||
            (e = o->attention(be, l, seq, pos, n)) ||
            (e = o->matmul(be, l, OB_W_O, OB_BATT, OB_BOUT, n)) ||
            (e = o->add(be, OB_BX, OB_BOUT, n)) ||
            (e = o->rmsnorm(be, l, OB_W_FFN_NORM, OB_BX, OB_BXN, n)) ||
            (e = o->matmul(be, l, OB_W_GATE, OB_BXN, OB_BGATE, n)) ||
            (e = o->matmul(be, l, OB_W_UP, OB_BXN, OB_BUP, n)) ||
            (e = o->swiglu(be, n)) ||
            (e = o->matmul(be, l, OB_W_DOWN, OB_BGATE, OB_BOUT, n)) ||
            (e = o->add(be, OB_BX, OB_BOUT, n)))
            return e;
    }
    return 0;
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
        int m = n - r0 < B ? n - r0 : B;
        if ((e = forward_piece(c, m, tok + r0, pos + r0, seq + r0)))
            return e;
        /* the logits of this piece's wanted rows, indexed within the piece */
        int32_t rows[256];
        while (w < n_want && want[w] < r0 + m) {
            int k = 0, w0 = w;
            while (w < n_want && want[w] < r0 + m && k < 256)
                rows[k++] = want[w++] - r0;
            size_t off = (size_t)w0 * hp->n_vocab;
            if ((e = c->ops->logits(c->be, rows, k, out32 + off, out64 ? out64 + off : NULL)))
                return e;
        }
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
    return c->ops->kv_copy(c->be, dst, src, n_pos);
}
