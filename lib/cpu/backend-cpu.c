/*
 * backend-cpu.c — the cpu route: canonical kernels (lib/cpu/kernels/) on host memory.
 *
 * The matrices are read from the model's copy of its weights on 2 MB pages (model.h
 * ob_model_weights; OB_WEIGHTS=map reads the mapped file). Buffers are row-major float arrays
 * [max_rows][width]. A matmul quantises its input rows into the weight type's activation
 * format once and keeps them while the buffer is unchanged (q, k and v share one quantised
 * copy of XN). The KV cache holds fp16 keys and values, each key/value head's positions
 * together: kc[layer][slot][kv head][pos][hd] (attention reads one head's keys in a row, not
 * n_head_kv * hd halfs apart). Matmuls and attention run on the thread pool, split
 * by output rows and by (row, head); every task computes whole results, so the bits do not
 * depend on the number of threads.
 *
 * Gemma 3 (backend.h): the embedding scale, the post norms (rmsnorm in place on OUT), a second
 * pair of RoPE tables for the sliding-window layers' base, the window in attention (keys from
 * ob_attn_first_key: the same attention kernel on fewer keys) and geglu (ob_geglu per row, on
 * the pool).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "quant.h"
#include "backend.h"
#include "cpu/kernels/kernels.h"
#include "cpu/backend-cpu.h"
#include "cpu/weights.h"
#include "cpu/kernels/ops.h"

struct ob_be {
    const struct ob_model *m;
    struct ob_weights w;           /* where the matrices are read (ob_model_weights) */
    struct ob_be_params p;
    int isa;                       /* the SIMD level (ob_isa_select) */
    struct ob_batch b;             /* the batch being run (begin) */
    const struct ob_kernel_table *kt;
    const struct ob_ops *ops;
    struct ob_pool *pool;
    int width[OB_BCOUNT];
    float *buf[OB_BCOUNT];
    uint64_t version[OB_BCOUNT];   /* bumped whenever a buffer is written */
    /* the quantised copy of one buffer's rows */
    void *xq;
    int xq_buf, xq_fmt, xq_rows;
    uint64_t xq_version;
    size_t xq_stride;
    /* kv cache */
    int kvw;                       /* n_head_kv * hd */
    uint16_t **kc, **vc;           /* [n_layer] -> [n_slots][n_head_kv][n_ctx][hd] */
    float *rope_cs, *rope_sn;      /* [n_ctx][n_rot / 2] */
    float *swa_cs, *swa_sn;        /* the same for rope_base_swa (sliding-window layers), or NULL */
    float *scratch;                /* attention: per thread-task scratch, see attention() */
    size_t scratch_per_task;
    float *logit_x;                /* [max_rows][n_embd] normed rows for the output matmul */
    void *logit_q;
    void *embd_row;                /* a token's embedding row read out of panels (the copy holds
                                      tied embeddings so, as the output matrix) */
};

static size_t max_sz(size_t a, size_t b) { return a > b ? a : b; }

static void cpu_close(struct ob_be *be)
{
    if (!be)
        return;
    for (int i = 0; i < OB_BCOUNT; i++)
        free(be->buf[i]);
    if (be->kc)
        for (uint32_t l = 0; l < be->m->hp.n_layer; l++) {
            free(be->kc[l]);
            free(be->vc[l]);
        }
    free(be->kc);
    free(be->vc);
    free(be->xq);
    free(be->rope_cs);
    free(be->rope_sn);
    free(be->swa_cs);
    free(be->swa_sn);
    free(be->scratch);
    free(be->logit_x);
    free(be->logit_q);
    free(be->embd_row);
    ob_pool_free(be->pool);
    free(be);
}

static int cpu_open(const struct ob_model *m, const struct ob_be_params *p, struct ob_be **out)
{
    const struct ob_hparams *hp = &m->hp;
    struct ob_be *be = calloc(1, sizeof *be);
    if (!be)
        return ob_seterr(OB_ENOMEM, "out of memory");
    be->m = m;
    be->p = *p;
    int e;
    if ((e = ob_isa_select(&be->isa)) || (e = ob_pool_new(p->n_threads, &be->pool))) {
        free(be);
        return e;
    }
    be->kt = ob_kernels(be->isa);
    be->ops = ob_ops(be->isa);
    if ((e = ob_model_weights(m, be->kt->panels, &be->w)))
        goto fail;
    int hd = (int)hp->head_dim, E = (int)hp->n_embd;
    be->width[OB_BX] = be->width[OB_BXN] = be->width[OB_BOUT] = E;
    be->width[OB_BQ] = be->width[OB_BATT] = (int)hp->n_head * hd;
    be->width[OB_BK] = be->width[OB_BV] = (int)hp->n_head_kv * hd;
    be->width[OB_BGATE] = be->width[OB_BUP] = (int)hp->n_ff;
    size_t R = (size_t)p->max_rows, maxw = 0;
    for (int i = 0; i < OB_BCOUNT; i++) {
        maxw = max_sz(maxw, (size_t)be->width[i]);
        if (!(be->buf[i] = calloc(R * (size_t)be->width[i], sizeof(float))))
            goto oom;
    }
    /* a quantised row takes at most 4 bytes a value (float32; Q8_K and A8 take less) */
    be->xq = malloc(R * maxw * sizeof(float));
    be->xq_buf = -1;
    be->kvw = (int)hp->n_head_kv * hd;
    size_t per_layer = (size_t)p->n_slots * (size_t)p->n_ctx * (size_t)be->kvw;
    be->kc = calloc(hp->n_layer, sizeof *be->kc);
    be->vc = calloc(hp->n_layer, sizeof *be->vc);
    if (!be->xq || !be->kc || !be->vc)
        goto oom;
    for (uint32_t l = 0; l < hp->n_layer; l++)
        if (!(be->kc[l] = malloc(per_layer * 2)) || !(be->vc[l] = malloc(per_layer * 2)))
            goto oom;
    if ((e = ob_rope_tables(hp, p->n_ctx, &be->rope_cs, &be->rope_sn)))
        goto fail;
    if (hp->n_swa) {
        size_t nt = (size_t)p->n_ctx * (hp->n_rot / 2);
        if (!(be->swa_cs = malloc(nt * sizeof(float))) || !(be->swa_sn = malloc(nt * sizeof(float))))
            goto oom;
        ob_rope_fill((double)hp->rope_base_swa, (int)hp->n_rot, p->n_ctx, be->swa_cs, be->swa_sn);
    }
    /* attention scratch per thread: scores of a group's heads for n_ctx keys, 2 hd sums each */
    size_t group = hp->n_head / hp->n_head_kv;
    be->scratch_per_task = group * ((size_t)p->n_ctx + 2 * (size_t)hd) + 16;
    be->scratch = malloc(be->scratch_per_task * (size_t)p->n_threads * sizeof(float));
    be->logit_x = malloc(R * (size_t)E * sizeof(float));
    be->logit_q = malloc(R * (size_t)E * sizeof(float));
    be->embd_row = malloc(m->tok_embd.row_bytes);
    if (!be->scratch || !be->logit_x || !be->logit_q || !be->embd_row)
        goto oom;
    *out = be;
    return 0;
oom:
    e = ob_seterr(OB_ENOMEM, "cpu route: out of memory for %d slots x %d positions", p->n_slots,
                  p->n_ctx);
fail:
    cpu_close(be);
    return e;
}

/* matrix w as this route reads it: in the weights' copy (cpu/weights.h ob_model_weights) */
static const struct ob_matrix *wmat(const struct ob_be *be, const struct ob_matrix *w,
                                    struct ob_matrix *tmp)
{
    *tmp = *w;
    tmp->data = ob_weights_at(&be->w, w->data);
    tmp->layout = ob_weights_layout(&be->w, w->data);
    return tmp;
}

static const char *cpu_device(const struct ob_be *be) { return ob_isa_name(be->isa); }

static int cpu_begin(struct ob_be *be, const struct ob_batch *b)
{
    be->b = *b;
    return 0;
}

static int cpu_embed(struct ob_be *be)
{
    struct ob_matrix tmp;
    const struct ob_matrix *w = wmat(be, &be->m->tok_embd, &tmp);
    const int32_t *tok = be->b.tok;
    int n = be->b.n;
    float *x = be->buf[OB_BX];
    for (int i = 0; i < n; i++) {
        if (tok[i] < 0 || tok[i] >= w->n)
            return ob_seterr(OB_ERANGE, "token id %d is outside the vocabulary of %d", tok[i], w->n);
        const void *row = (const char *)w->data + (size_t)tok[i] * w->row_bytes;
        if (w->layout == OB_LAYOUT_P8) {
            ob_panel_row(w, tok[i], be->embd_row);
            row = be->embd_row;
        }
        int e = ob_dequant_row(w->type, row, x + (size_t)i * w->k, w->k);
        if (e)
            return e;
        if (be->m->hp.embd_scale)
            ob_scale_f32(x + (size_t)i * w->k, ob_embd_scale(w->k), (size_t)w->k);
    }
    be->version[OB_BX]++;
    return 0;
}

/* y = (x * r) * w with r from the canonical sum of squares (the F32 dot kernel) */
static void rms_row(const struct ob_be *be, const float *x, const float *w, float *y, int n,
                    float eps)
{
    float ss;
    be->kt->dot[OB_F32](x, x, 0, 1, n, &ss);   /* = ob_dot_f32(x, x, n), at SIMD speed */
    ob_rms_apply(x, ob_rms_factor(ss, n, eps), w, y, n);
}

/*
 * The per-row steps between the matmuls (norms, activation quantisation, QK-norm and RoPE,
 * swiglu) run one row a pool task from two rows on: at width 8 they were 2 % of a decode
 * step's samples on the calling thread while the others waited (perf, AVX2 level, 2 threads).
 * Rows are independent, so the bits are the same whoever runs a row.
 */
struct row_job {
    struct ob_be *be;
    const float *w;                /* rmsnorm: the norm's weights */
    int src, dst, width, fmt;      /* fmt: quantised's activation format */
    int layer;                     /* rope */
};

static void rmsnorm_task(void *ctx, int i, int thread)
{
    const struct row_job *j = ctx;
    size_t E = (size_t)j->width;           /* dst may be src: rms_row reads x before it writes */
    rms_row(j->be, j->be->buf[j->src] + i * E, j->w, j->be->buf[j->dst] + i * E, j->width,
            j->be->m->hp.rms_eps);
    (void)thread;
}

static void actq_task(void *ctx, int i, int thread)
{
    const struct row_job *j = ctx;
    j->be->kt->actq[j->fmt](j->be->buf[j->src] + (size_t)i * j->width,
                            (char *)j->be->xq + i * j->be->xq_stride, j->width);
    (void)thread;
}

static void swiglu_task(void *ctx, int i, int thread)
{
    const struct row_job *j = ctx;
    size_t F = (size_t)j->width;
    j->be->ops->swiglu(j->be->buf[OB_BGATE] + i * F, j->be->buf[OB_BUP] + i * F, F);
    (void)thread;
}

/* fn on rows [0, n): in the calling thread for one row, else one row a pool task */
static void each_row(struct ob_be *be, void (*fn)(void *, int, int), struct row_job *j, int n)
{
    if (n == 1)
        fn(j, 0, 0);
    else
        ob_pool_run(be->pool, fn, j, n);
}

static int cpu_rmsnorm(struct ob_be *be, int l, int role, int src, int dst)
{
    struct row_job j = {.be = be, .w = ob_layer_norm(be->m, l, role), .src = src, .dst = dst,
                        .width = be->width[src]};
    each_row(be, rmsnorm_task, &j, be->b.n);
    be->version[dst]++;
    return 0;
}

/* quantised copy of rows [0, n) of buffer src in format fmt, reused while unchanged */
static int quantised(struct ob_be *be, int src, uint32_t wtype, int k, int n)
{
    int fmt = ob_type_actfmt(wtype);
    if (be->xq_buf == src && be->xq_fmt == fmt && be->xq_version == be->version[src] &&
        be->xq_rows >= n)
        return 0;
    be->xq_stride = ob_act_row_bytes(fmt, k);
    struct row_job j = {.be = be, .src = src, .width = k, .fmt = fmt};
    each_row(be, actq_task, &j, n);
    be->xq_buf = src;
    be->xq_fmt = fmt;
    be->xq_rows = n;
    be->xq_version = be->version[src];
    return 0;
}

static int cpu_matmul(struct ob_be *be, int l, int role, int src, int dst)
{
    int n = be->b.n;
    struct ob_matrix tmp;
    const struct ob_matrix *w = wmat(be, ob_layer_matrix(be->m, l, role), &tmp);
    quantised(be, src, w->type, w->k, n);
    int e = ob_matmul(be->pool, be->isa, w, be->xq, be->xq_stride, n, be->buf[dst],
                      (size_t)be->width[dst]);
    if (e)
        return e;
    const float *b = ob_layer_bias(be->m, l, role);
    if (b)
        for (int i = 0; i < n; i++)
            ob_add_f32(be->buf[dst] + (size_t)i * w->n, b, (size_t)w->n);
    be->version[dst]++;
    return 0;
}

/* one row's query and key heads: QK-norm where the model has it, then RoPE at the row's
 * position */
static void rope_task(void *ctx, int i, int thread)
{
    const struct row_job *j = ctx;
    struct ob_be *be = j->be;
    const struct ob_hparams *hp = &be->m->hp;
    const struct ob_layer *L = &be->m->layers[j->layer];
    int hd = (int)hp->head_dim, half = (int)hp->n_rot / 2, neox = hp->rope_type == OB_ROPE_NEOX;
    bool swa = ob_hparams_layer_swa(hp, (uint32_t)j->layer);
    const float *tc = swa ? be->swa_cs : be->rope_cs, *ts = swa ? be->swa_sn : be->rope_sn;
    const float *cs = tc + (size_t)be->b.pos[i] * half, *sn = ts + (size_t)be->b.pos[i] * half;
    for (uint32_t h = 0; h < hp->n_head; h++) {
        float *q = be->buf[OB_BQ] + (size_t)i * be->width[OB_BQ] + h * hd;
        if (L->q_norm)
            rms_row(be, q, L->q_norm, q, hd, hp->rms_eps);
        ob_rope(q, cs, sn, (int)hp->n_rot, neox);
    }
    for (uint32_t h = 0; h < hp->n_head_kv; h++) {
        float *k = be->buf[OB_BK] + (size_t)i * be->width[OB_BK] + h * hd;
        if (L->k_norm)
            rms_row(be, k, L->k_norm, k, hd, hp->rms_eps);
        ob_rope(k, cs, sn, (int)hp->n_rot, neox);
    }
    (void)thread;
}

static int cpu_qk_rope(struct ob_be *be, int l)
{
    struct row_job j = {.be = be, .layer = l};
    each_row(be, rope_task, &j, be->b.n);
    be->version[OB_BQ]++;
    be->version[OB_BK]++;
    return 0;
}

/* where position pos of key/value head g of slot seq starts in a layer's cache */
static size_t kv_at(const struct ob_be *be, int seq, int g, int pos)
{
    size_t nkv = be->m->hp.n_head_kv, hd = be->m->hp.head_dim;
    return (((size_t)seq * nkv + (size_t)g) * (size_t)be->p.n_ctx + (size_t)pos) * hd;
}

static int cpu_kv_store(struct ob_be *be, int l)
{
    const int32_t *seq = be->b.seq, *pos = be->b.pos;
    int n = be->b.n;
    size_t hd = be->m->hp.head_dim;
    for (int i = 0; i < n; i++)
        for (int g = 0; g < (int)be->m->hp.n_head_kv; g++) {
            const float *k = be->buf[OB_BK] + (size_t)i * be->kvw + g * hd;
            const float *v = be->buf[OB_BV] + (size_t)i * be->kvw + g * hd;
            be->ops->f16_put(be->kc[l] + kv_at(be, seq[i], g, pos[i]), k, hd);
            be->ops->f16_put(be->vc[l] + kv_at(be, seq[i], g, pos[i]), v, hd);
        }
    return 0;
}

struct att_job {
    struct ob_be *be;
    int l;
    const int32_t *seq, *pos;
    float scale;
    int window;                    /* keys per query on a sliding-window layer, 0: all */
};

/* one task: the query heads of row i that share kv head g */
static void att_task(void *ctx, int task, int thread)
{
    const struct att_job *j = ctx;
    struct ob_be *be = j->be;
    const struct ob_hparams *hp = &be->m->hp;
    int hd = (int)hp->head_dim, nkv = (int)hp->n_head_kv, group = (int)(hp->n_head / hp->n_head_kv);
    int i = task / nkv, g = task % nkv;
    int k0 = ob_attn_first_key(j->pos[i], j->window), nk = j->pos[i] + 1 - k0;
    float *s = be->scratch + (size_t)thread * be->scratch_per_task;
    const uint16_t *k = be->kc[j->l] + kv_at(be, j->seq[i], g, k0);
    const uint16_t *v = be->vc[j->l] + kv_at(be, j->seq[i], g, k0);
    const float *q = be->buf[OB_BQ] + (size_t)i * be->width[OB_BQ] + (size_t)g * group * hd;
    float *out = be->buf[OB_BATT] + (size_t)i * be->width[OB_BATT] + (size_t)g * group * hd;
    be->ops->attn_group(q, group, k, v, hd, nk, hd, j->scale, s, s + (size_t)group * nk,
                        out);
}

static int cpu_attention(struct ob_be *be, int l)
{
    const struct ob_hparams *hp = &be->m->hp;
    int n = be->b.n;
    int window = ob_hparams_layer_swa(hp, (uint32_t)l) ? (int)hp->n_swa : 0;
    struct att_job j = {be, l, be->b.seq, be->b.pos, ob_attn_scale((int)hp->attn_scale_dim),
                        window};
    ob_pool_run(be->pool, att_task, &j, n * (int)hp->n_head_kv);
    be->version[OB_BATT]++;
    return 0;
}

static int cpu_swiglu(struct ob_be *be)
{
    struct row_job j = {.be = be, .width = be->width[OB_BGATE]};
    each_row(be, swiglu_task, &j, be->b.n);
    be->version[OB_BGATE]++;
    return 0;
}

/* one task: GATE = ob_geglu(GATE, UP) on one row */
static void geglu_task(void *ctx, int i, int thread)
{
    struct ob_be *be = ctx;
    size_t F = (size_t)be->width[OB_BGATE];
    be->ops->geglu(be->buf[OB_BGATE] + (size_t)i * F, be->buf[OB_BUP] + (size_t)i * F, F);
    (void)thread;
}

static int cpu_geglu(struct ob_be *be)
{
    ob_pool_run(be->pool, geglu_task, be, be->b.n);
    be->version[OB_BGATE]++;
    return 0;
}

static int cpu_add(struct ob_be *be, int dst, int src)
{
    int n = be->b.n;
    float *d = be->buf[dst];
    const float *s = be->buf[src];
    ob_add_f32(d, s, (size_t)n * (size_t)be->width[dst]);
    be->version[dst]++;
    return 0;
}

static int cpu_logits(struct ob_be *be, const int32_t *rows, int nrows, float *out32, double *out64)
{
    struct ob_matrix tmp;
    const struct ob_matrix *w = wmat(be, &be->m->output, &tmp);
    int E = (int)be->m->hp.n_embd;
    int fmt = ob_type_actfmt(w->type);
    size_t stride = ob_act_row_bytes(fmt, E);
    for (int j = 0; j < nrows; j++) {
        float *x = be->logit_x + (size_t)j * E;
        rms_row(be, be->buf[OB_BX] + (size_t)rows[j] * E, be->m->output_norm, x, E,
                be->m->hp.rms_eps);
        be->kt->actq[fmt](x, (char *)be->logit_q + j * stride, E);
    }
    int e = ob_matmul(be->pool, be->isa, w, be->logit_q, stride, nrows, out32, (size_t)w->n);
    if (!e && out64)
        for (size_t i = 0; i < (size_t)nrows * (size_t)w->n; i++)
            out64[i] = out32[i];
    return e;
}

static int cpu_kv_copy(struct ob_be *be, int dst, int src, int n_pos)
{
    size_t bytes = (size_t)n_pos * be->m->hp.head_dim * sizeof(uint16_t);
    for (uint32_t l = 0; l < be->m->hp.n_layer; l++)
        for (int g = 0; g < (int)be->m->hp.n_head_kv; g++) {
            memmove(be->kc[l] + kv_at(be, dst, g, 0), be->kc[l] + kv_at(be, src, g, 0), bytes);
            memmove(be->vc[l] + kv_at(be, dst, g, 0), be->vc[l] + kv_at(be, src, g, 0), bytes);
        }
    return 0;
}

static struct ob_pool *cpu_pool(struct ob_be *be) { return be->pool; }

const struct ob_be_ops ob_be_cpu = {
    .open = cpu_open,
    .close = cpu_close,
    .device = cpu_device,
    .begin = cpu_begin,
    .embed = cpu_embed,
    .rmsnorm = cpu_rmsnorm,
    .matmul = cpu_matmul,
    .qk_rope = cpu_qk_rope,
    .kv_store = cpu_kv_store,
    .attention = cpu_attention,
    .swiglu = cpu_swiglu,
    .geglu = cpu_geglu,
    .add = cpu_add,
    .logits = cpu_logits,
    .kv_copy = cpu_kv_copy,
    .pool = cpu_pool,
};

/* ---- the view of routes built on this one (backend-cpu.h) -------------------------------------- */

void ob_be_cpu_view(struct ob_be *be, struct ob_cpu_view *v)
{
    *v = (struct ob_cpu_view){be->isa, be->pool, be->buf, be->width};
}

void ob_be_cpu_wrote(struct ob_be *be, int b)
{
    be->version[b]++;
}
