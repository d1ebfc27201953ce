/*
 * backend-hrx.c — the host side of the hrx routes, written once against a runtime table
 * (hrx.h): ob_be_hrx on a GPU (the CUDA or HIP table, linked in by make CUDA=1 / HIP=1) and
 * ob_be_hrx_sim on hrx-sim (the same kernels executed on host threads; every build).
 *
 * Memory. Buffers are device arrays [max_rows][width] of floats, as the cpu route's. Weights
 * are uploaded once at open in the file's block layout (hrx-sim reads them in place from the
 * mapped model; a tied output matrix is the embedding, uploaded once). The KV cache holds fp16
 * keys and values per layer: kc[layer][slot][pos][n_head_kv * hd]. The RoPE tables (lib/rope.c)
 * are computed on the host and copied. A batch's tokens, positions and slots are uploaded once
 * by begin; every op then launches kernels on the queue; logits are copied back, and sampling
 * and log-softmax stay on the host, so the logits are what must match the cpu route — bit for
 * bit, which every kernel does by computing lib/arith/'s functions in their order.
 *
 * A matmul quantises its input rows once and keeps them while the buffer is unchanged (q, k
 * and v share one copy of XN), like the cpu route.
 *
 * Gemma 3 (backend.h): the embedding kernel scales by ob_embd_scale, the post norms are the
 * rmsnorm kernel in place on OUT, the sliding-window layers rotate with a second pair of RoPE
 * tables (hp.rope_base_swa) and attend over the window (ob_hrx_attn.window), and geglu has its
 * kernel (ob_gelu).
 */
#include <stdlib.h>
#include <string.h>

#include "arith/arith.h"
#include "backend.h"
#include "hrx/hrx.h"

_Static_assert((int)OB_HRX_ACT_F32 == (int)OB_ACT_F32 && (int)OB_HRX_ACT_Q8K == (int)OB_ACT_Q8K &&
               (int)OB_HRX_ACT_A8 == (int)OB_ACT_A8, "one numbering of the activation formats");

extern const struct ob_be_ops ob_be_hrx, ob_be_hrx_sim;   /* at the end of this file */

/* the GPU runtimes, present when make CUDA=1 or HIP=1 linked them in */
extern const struct ob_hrx_rt ob_hrx_cuda_rt __attribute__((weak));
extern const struct ob_hrx_rt ob_hrx_hip_rt __attribute__((weak));

#define LOGIT_ROWS 64              /* rows of logits computed and copied back at a time */
#define N_GRAPHS 8                 /* graphs kept, by batch size (least recently used goes) */

/* how a step's launches (embed and the layers) go: launched one by one, recorded into a
 * graph, or not launched (the kernel table is dry_kernels) because a graph of the very same
 * launches replays them at the step's end */
enum step_mode { STEP_EAGER, STEP_RECORD, STEP_REPLAY };

struct graph_slot {
    int n;                         /* the batch size it was recorded at; 0: empty */
    void *g;
    uint64_t used;
};

struct hrx_layer {
    struct ob_hrx_mat w[OB_W_DOWN + 1];  /* by role, OB_W_Q .. OB_W_DOWN */
    const float *attn_norm, *ffn_norm, *q_norm, *k_norm, *bias[OB_W_DOWN + 1];
    const float *post_attn_norm, *post_ffn_norm;   /* gemma3, else NULL */
};

/* a host pointer and its copy on the device (weights shared between roles are copied once) */
struct upload {
    const void *host;
    void *dev;
};

struct ob_be {
    const struct ob_model *m;
    struct ob_be_params p;
    const struct ob_hrx_rt *rt;
    const struct ob_hrx_kernels *k;    /* the kernels the ops call: rt->k, or dry_kernels */
    struct ob_hrx_q *q;
    const struct ob_be_ops *ops;   /* ob_be_hrx or ob_be_hrx_sim: for ob_forward_layer */
    int fuse;                      /* OB_HRX_FUSE: 0 op by op, 1 the fused layer, 2 with q/k/v,
                                    * gate/up and rope/kv store in a launch each, 3 (unset)
                                    * with what needs a whole row, head or block done by the
                                    * last block of the launch that makes it */
    bool att_whole;                /* attention a block a (head, row) (OB_HRX_ATT_SPLIT=0) */
    bool graphs;                   /* replay a step's launches as a graph (rt has graphs) */
    enum step_mode mode;
    int last_n, cur;               /* the previous step's batch size; the replayed slot */
    uint64_t tick;
    struct graph_slot gs[N_GRAPHS];
    char device[96];
    struct ob_batch b;             /* the batch being run; its arrays on the device below */
    int32_t *d_tok, *d_pos, *d_seq, *d_rows;
    int width[OB_BCOUNT];
    float *buf[OB_BCOUNT];
    uint64_t version[OB_BCOUNT];   /* bumped whenever a buffer is written */
    void *xqb[2];                  /* the quantised copy of one buffer's rows: xqb[xqi] (xq_cur);
                                    * a product's last block writes the other (level 3) */
    int xqi;
    int xn_for;                    /* XN and xq hold layer xn_for's attention norm, or -1 */
    int xq_buf, xq_fmt, xq_rows;
    uint64_t xq_version;
    size_t xq_stride;
    int kvw;
    uint16_t **kc, **vc;           /* [n_layer] -> [n_slots * n_ctx * kvw] */
    float *cs, *sn;                /* RoPE tables [n_ctx][n_rot / 2] */
    float *swa_cs, *swa_sn;        /* the same for hp.rope_base_swa (sliding-window layers) */
    float *att;                    /* attention scratch (ob_hrx_attn_scratch) */
    float *logit_x, *logits;       /* [LOGIT_ROWS][n_embd], [LOGIT_ROWS][n_vocab] */
    void *pinned[4];               /* host_alloc's page-locked blocks (others are malloc's) */
    bool no_pinned;                /* OB_HRX_PINNED=0: host_alloc is malloc */
    void *logit_q;
    struct ob_hrx_mat tok_embd, output;
    const float *output_norm;
    struct hrx_layer *L;
    struct upload *up;             /* weights on the device */
    size_t n_up;
    void **mem;                    /* every device allocation, freed at close */
    size_t n_mem, cap_mem;
};

/* ---- runtimes and devices ----------------------------------------------------------------- */

bool ob_hrx_gpu_linked(void)
{
    return &ob_hrx_cuda_rt != NULL || &ob_hrx_hip_rt != NULL;
}

/* the GPU runtime and its own index of device `index`, counting CUDA's devices first, then
 * HIP's; OB_EDEVICE naming what each runtime said when there is no such device */
static int gpu_find(int index, const struct ob_hrx_rt **rt, int *local)
{
    const struct ob_hrx_rt *rts[2] = {&ob_hrx_cuda_rt, &ob_hrx_hip_rt};
    char why[512] = "";
    int total = 0;
    for (int i = 0; i < 2; i++) {
        if (!rts[i])
            continue;
        int c = rts[i]->count();
        size_t len = strlen(why);
        if (c < 0) {
            snprintf(why + len, sizeof why - len, "%s%s: %s", len ? "; " : "", rts[i]->api,
                     ob_errmsg());
            continue;
        }
        if (index < total + c) {
            *rt = rts[i];
            *local = index - total;
            return 0;
        }
        total += c;
        snprintf(why + len, sizeof why - len, "%s%s: %d device%s", len ? "; " : "", rts[i]->api,
                 c, c == 1 ? "" : "s");
    }
    if (!ob_hrx_gpu_linked())
        return ob_seterr(OB_EDEVICE, "route 'hrx' is not built into this binary: make CUDA=1 "
                         "or HIP=1");
    return ob_seterr(OB_EDEVICE, "hrx: no GPU %d (%s)", index, why);
}

int ob_hrx_probe(bool sim, const struct ob_device_opts *d, struct ob_device_info *info)
{
    const struct ob_hrx_rt *rt = &ob_hrx_sim_rt;
    int idx = d->index, e;
    struct ob_hrx_devinfo di;
    if ((!sim && (e = gpu_find(d->index, &rt, &idx))) || (e = rt->info(idx, &di)))
        return e;
    snprintf(info->name, sizeof info->name, "%s", di.name);
    info->mem_bytes = d->mem_limit && (!di.mem_bytes || d->mem_limit < di.mem_bytes)
                          ? d->mem_limit : di.mem_bytes;
    return 0;
}

/* ---- weights ------------------------------------------------------------------------------- */

bool ob_hrx_type_supported(uint32_t t)
{
    switch (t) {
    OB_TYPES_WEIGHT(OB_TYPE_CASE)       /* the kernels of mm.hip and norm.hip */
        return true;
    }
    return false;
}

static size_t mat_bytes(const struct ob_matrix *w) { return (size_t)w->n * w->row_bytes; }

static size_t vec_bytes(const float *v, uint32_t n) { return v ? (size_t)n * sizeof(float) : 0; }

/* device memory for the weights: every matrix (a tied output once) and vector */
uint64_t ob_hrx_weight_bytes(const struct ob_model *m)
{
    const struct ob_hparams *hp = &m->hp;
    uint64_t b = mat_bytes(&m->tok_embd) + vec_bytes(m->output_norm, hp->n_embd);
    if (m->output.data != m->tok_embd.data)
        b += mat_bytes(&m->output);
    uint32_t qw = hp->n_head * hp->head_dim, kw = hp->n_head_kv * hp->head_dim;
    for (uint32_t l = 0; l < hp->n_layer; l++) {
        const struct ob_layer *L = &m->layers[l];
        for (int r = OB_W_Q; r <= OB_W_DOWN; r++)
            b += mat_bytes(ob_layer_matrix(m, (int)l, r));
        b += vec_bytes(L->attn_norm, hp->n_embd) + vec_bytes(L->ffn_norm, hp->n_embd) +
             vec_bytes(L->post_attn_norm, hp->n_embd) + vec_bytes(L->post_ffn_norm, hp->n_embd) +
             vec_bytes(L->q_norm, hp->head_dim) + vec_bytes(L->k_norm, hp->head_dim) +
             vec_bytes(L->bq, qw) + vec_bytes(L->bk, kw) + vec_bytes(L->bv, kw);
    }
    return b;
}

static int dev_alloc(struct ob_be *be, size_t bytes, void **out)
{
    if (be->n_mem == be->cap_mem) {
        size_t cap = be->cap_mem ? 2 * be->cap_mem : 64;
        void **p = realloc(be->mem, cap * sizeof *p);
        if (!p)
            return ob_seterr(OB_ENOMEM, "out of memory");
        be->mem = p;
        be->cap_mem = cap;
    }
    int e = be->rt->alloc(be->q, bytes ? bytes : 1, out);
    if (e)
        return ob_errprefix(OB_EDEVICE, "%s: not enough device memory for %d slots x %d "
                            "positions", be->device, be->p.n_slots, be->p.n_ctx);
    be->mem[be->n_mem++] = *out;
    return 0;
}

/* the device copy of n host bytes at h (NULL stays NULL; hrx-sim reads the host's in place) */
static int upload(struct ob_be *be, const void *h, size_t n, const void **out)
{
    *out = NULL;
    if (!h)
        return 0;
    if (be->rt->host_memory) {
        *out = h;
        return 0;
    }
    for (size_t i = 0; i < be->n_up; i++)
        if (be->up[i].host == h) {
            *out = be->up[i].dev;
            return 0;
        }
    struct upload *u = realloc(be->up, (be->n_up + 1) * sizeof *u);
    if (!u)
        return ob_seterr(OB_ENOMEM, "out of memory");
    be->up = u;
    void *d;
    int e;
    if ((e = dev_alloc(be, n, &d)) || (e = be->rt->h2d(be->q, d, h, n)))
        return e;
    be->up[be->n_up++] = (struct upload){h, d};
    *out = d;
    return 0;
}

static int upload_mat(struct ob_be *be, const struct ob_matrix *w, struct ob_hrx_mat *out)
{
    *out = (struct ob_hrx_mat){w->type, w->n, w->k, w->row_bytes, NULL};
    return upload(be, w->data, mat_bytes(w), &out->data);
}

static int upload_vec(struct ob_be *be, const float *v, uint32_t n, const float **out)
{
    const void *d;
    int e = upload(be, v, vec_bytes(v, n), &d);
    *out = d;
    return e;
}

static int upload_weights(struct ob_be *be)
{
    const struct ob_model *m = be->m;
    const struct ob_hparams *hp = &m->hp;
    uint32_t qw = hp->n_head * hp->head_dim, kw = hp->n_head_kv * hp->head_dim;
    int e;
    if ((e = upload_mat(be, &m->tok_embd, &be->tok_embd)) ||
        (e = upload_mat(be, &m->output, &be->output)) ||
        (e = upload_vec(be, m->output_norm, hp->n_embd, &be->output_norm)))
        return e;
    for (uint32_t l = 0; l < hp->n_layer; l++) {
        const struct ob_layer *L = &m->layers[l];
        struct hrx_layer *D = &be->L[l];
        for (int r = OB_W_Q; r <= OB_W_DOWN; r++)
            if ((e = upload_mat(be, ob_layer_matrix(m, (int)l, r), &D->w[r])))
                return e;
        if ((e = upload_vec(be, L->attn_norm, hp->n_embd, &D->attn_norm)) ||
            (e = upload_vec(be, L->ffn_norm, hp->n_embd, &D->ffn_norm)) ||
            (e = upload_vec(be, L->post_attn_norm, hp->n_embd, &D->post_attn_norm)) ||
            (e = upload_vec(be, L->post_ffn_norm, hp->n_embd, &D->post_ffn_norm)) ||
            (e = upload_vec(be, L->q_norm, hp->head_dim, &D->q_norm)) ||
            (e = upload_vec(be, L->k_norm, hp->head_dim, &D->k_norm)) ||
            (e = upload_vec(be, L->bq, qw, &D->bias[OB_W_Q])) ||
            (e = upload_vec(be, L->bk, kw, &D->bias[OB_W_K])) ||
            (e = upload_vec(be, L->bv, kw, &D->bias[OB_W_V])))
            return e;
    }
    return 0;
}

/* ---- graphs ----------------------------------------------------------------------------------- *
 *
 * A decode step of one batch size launches the same kernels with the same arguments every time:
 * buffers, weights and caches stay where open put them, and what changes (tokens, positions,
 * slots) is read from device arrays that begin uploads. So from the second step in a row of a
 * batch size on, the step's launches (embed and every layer) are recorded into a graph (the
 * first time) or not launched at all (kernel table dry_kernels: the host-side bookkeeping of
 * the ops still runs) and the graph of that size replays them, in queue order, when the step
 * ends: after its last layer (and, should a step stop short of it, before logits, the next
 * begin, a KV copy or close) — before anything can see the results. A step's launches cannot
 * differ from the recorded ones: every argument is a function of the batch size and the model.
 * A step whose op fails on the host (none can today: the model's shapes are checked at load)
 * drops what it recorded (step_abort). The bits are the launches' own; OB_HRX_GRAPHS=0 turns
 * graphs off, and profiling (OB_HRX_PROFILE) on a GPU does too.
 */
#define X_DRY(name, params) static int dry_##name params { return 0; }
OB_HRX_KERNELS(X_DRY)
#undef X_DRY
#define X_DRY(name, params) .name = dry_##name,
static const struct ob_hrx_kernels dry_kernels = {OB_HRX_KERNELS(X_DRY)};
#undef X_DRY

/* the graph of batch size n, or -1 */
static int graph_find(const struct ob_be *be, int n)
{
    for (int i = 0; i < N_GRAPHS; i++)
        if (be->gs[i].n == n)
            return i;
    return -1;
}

/* before a step's launches: how they will go */
static int step_start(struct ob_be *be, int n)
{
    int last = be->last_n, i;
    be->last_n = n;
    be->mode = STEP_EAGER;
    if (!be->graphs)
        return 0;
    if ((i = graph_find(be, n)) >= 0) {
        be->mode = STEP_REPLAY;
        be->cur = i;
        be->k = &dry_kernels;
        be->gs[i].used = ++be->tick;
        return 0;
    }
    if (n != last)
        return 0;                  /* a size seen once: not worth a graph yet */
    int e = be->rt->graph_begin(be->q);
    if (e == OB_EUNSUPP) {         /* not now (profiling): launch one by one from now on */
        be->graphs = false;
        return 0;
    }
    if (!e)
        be->mode = STEP_RECORD;
    return e;
}

/* at the end of a step's launches (any later op that needs them done calls this first) */
static int step_end(struct ob_be *be)
{
    enum step_mode mode = be->mode;
    be->mode = STEP_EAGER;
    be->k = be->rt->k;
    if (mode == STEP_REPLAY)
        return be->rt->graph_launch(be->q, be->gs[be->cur].g);
    if (mode != STEP_RECORD)
        return 0;
    void *g;
    int e = be->rt->graph_end(be->q, &g), slot = 0;
    if (e) {
        be->graphs = false;        /* the step's launches did not run: the step fails */
        return e;
    }
    for (int i = 1; i < N_GRAPHS; i++)   /* an empty slot, else the least recently used */
        if (be->gs[slot].n && (!be->gs[i].n || be->gs[i].used < be->gs[slot].used))
            slot = i;
    if (be->gs[slot].g)
        be->rt->graph_free(be->q, be->gs[slot].g);
    be->gs[slot] = (struct graph_slot){be->b.n, g, ++be->tick};
    return be->rt->graph_launch(be->q, g);
}

/* A step whose op failed: what it recorded is dropped (a graph stored from a half-recorded step
 * would replay, with no error, for every later step of its size) and a replay is not run. */
static void step_abort(struct ob_be *be)
{
    enum step_mode mode = be->mode;
    be->mode = STEP_EAGER;
    be->k = be->rt->k;
    void *g = NULL;
    if (mode == STEP_RECORD && !be->rt->graph_end(be->q, &g) && g)
        be->rt->graph_free(be->q, g);
}

/* ---- open and close -------------------------------------------------------------------------- */

/* the logits' host memory: page-locked where the runtime has it (4 blocks at most; an engine
 * takes one), else malloc's */
static void *hrx_host_alloc(struct ob_be *be, size_t bytes)
{
    void *p = NULL;
    for (int i = 0; be->rt->host_alloc && !be->no_pinned && i < 4; i++)
        if (!be->pinned[i]) {
            if (be->rt->host_alloc(be->q, bytes ? bytes : 1, &p))
                p = NULL;              /* none to have: plain memory, the copies slower */
            be->pinned[i] = p;
            break;
        }
    return p ? p : malloc(bytes);
}

static void hrx_host_free(struct ob_be *be, void *p)
{
    for (int i = 0; p && i < 4; i++)
        if (be->pinned[i] == p) {
            be->rt->host_free(be->q, p);
            be->pinned[i] = NULL;
            return;
        }
    free(p);
}

static void hrx_close(struct ob_be *be)
{
    if (!be)
        return;
    if (be->q) {
        (void)step_end(be);
        for (int i = 0; i < N_GRAPHS; i++)
            if (be->gs[i].g)
                be->rt->graph_free(be->q, be->gs[i].g);
        be->rt->sync(be->q);
        for (size_t i = 0; i < be->n_mem; i++)
            be->rt->free(be->q, be->mem[i]);
        be->rt->close(be->q);
    }
    free(be->mem);
    free(be->up);
    free(be->L);
    free(be->kc);
    free(be->vc);
    free(be);
}

/* the RoPE tables of base (lib/rope.c) on the device */
static int rope_upload(struct ob_be *be, double base, float **dcs, float **dsn)
{
    const struct ob_hparams *hp = &be->m->hp;
    size_t nt = (size_t)be->p.n_ctx * (hp->n_rot / 2), rb = nt * sizeof(float);
    float *cs = malloc(rb ? rb : 1), *sn = malloc(rb ? rb : 1);
    void *v;
    int e = 0;
    if (!cs || !sn)
        e = ob_seterr(OB_ENOMEM, "out of memory");
    if (!e)
        ob_rope_fill(base, (int)hp->n_rot, be->p.n_ctx, cs, sn);
    if (!e && !(e = dev_alloc(be, rb, &v)) && !(e = be->rt->h2d(be->q, v, cs, rb)))
        *dcs = v;
    if (!e && !(e = dev_alloc(be, rb, &v)) && !(e = be->rt->h2d(be->q, v, sn, rb)))
        *dsn = v;
    if (!e)
        e = be->rt->sync(be->q);   /* the copies are done with cs and sn */
    free(cs);
    free(sn);
    return e;
}

static int hrx_open(const struct ob_model *m, const struct ob_be_params *p, bool sim,
                    struct ob_be **out)
{
    const struct ob_hparams *hp = &m->hp;
    const struct ob_hrx_rt *rt = &ob_hrx_sim_rt;
    int idx = p->dev.index, e;
    struct ob_hrx_devinfo di;
    if ((!sim && (e = gpu_find(p->dev.index, &rt, &idx))) || (e = rt->info(idx, &di)))
        return e;
    struct ob_be *be = calloc(1, sizeof *be);
    if (!be)
        return ob_seterr(OB_ENOMEM, "out of memory");
    be->m = m;
    be->p = *p;
    be->rt = rt;
    be->k = rt->k;
    const char *gr = getenv("OB_HRX_GRAPHS"), *fu = getenv("OB_HRX_FUSE");
    be->graphs = rt->graph_begin && !(gr && !strcmp(gr, "0"));
    be->fuse = !fu || !*fu      ? 3
               : !strcmp(fu, "0") ? 0
               : !strcmp(fu, "1") ? 1
               : !strcmp(fu, "2") ? 2
                                  : 3;
    const char *as = getenv("OB_HRX_ATT_SPLIT"), *pn = getenv("OB_HRX_PINNED");
    be->att_whole = as && !strcmp(as, "0");
    be->no_pinned = pn && !strcmp(pn, "0");
    be->ops = sim ? &ob_be_hrx_sim : &ob_be_hrx;
    if (sim)
        snprintf(be->device, sizeof be->device, "hrx-sim (%d host thread%s)", p->n_threads,
                 p->n_threads == 1 ? "" : "s");
    else
        snprintf(be->device, sizeof be->device, "%s (%s %d)", di.name, rt->api, idx);
    if ((e = rt->open(idx, p->n_threads, &be->q))) {
        free(be);
        return e;
    }
    be->L = calloc(hp->n_layer, sizeof *be->L);
    be->kc = calloc(hp->n_layer, sizeof *be->kc);
    be->vc = calloc(hp->n_layer, sizeof *be->vc);
    if (!be->L || !be->kc || !be->vc) {
        e = ob_seterr(OB_ENOMEM, "out of memory");
        goto fail;
    }
    int hd = (int)hp->head_dim, E = (int)hp->n_embd, V = (int)hp->n_vocab;
    be->width[OB_BX] = be->width[OB_BXN] = be->width[OB_BOUT] = E;
    be->width[OB_BQ] = be->width[OB_BATT] = (int)hp->n_head * hd;
    be->width[OB_BK] = be->width[OB_BV] = (int)hp->n_head_kv * hd;
    be->width[OB_BGATE] = be->width[OB_BUP] = (int)hp->n_ff;
    size_t R = (size_t)p->max_rows, maxw = 0;
    void *v;
    for (int i = 0; i < OB_BCOUNT; i++) {
        maxw = (size_t)be->width[i] > maxw ? (size_t)be->width[i] : maxw;
        if ((e = dev_alloc(be, R * (size_t)be->width[i] * sizeof(float), &v)))
            goto fail;
        be->buf[i] = v;
    }
    /* a quantised row takes at most 4 bytes a value (float32; Q8_K and A8 take less) */
    for (int i = 0; i < 2; i++)
        if ((e = dev_alloc(be, R * maxw * sizeof(float), &be->xqb[i])))
            goto fail;
    be->xq_buf = be->xn_for = -1;
    int32_t **ids[4] = {&be->d_tok, &be->d_pos, &be->d_seq, &be->d_rows};
    for (int i = 0; i < 4; i++) {
        if ((e = dev_alloc(be, R * sizeof(int32_t), &v)))
            goto fail;
        *ids[i] = v;
    }
    be->kvw = (int)hp->n_head_kv * hd;
    size_t per_layer = (size_t)p->n_slots * (size_t)p->n_ctx * (size_t)be->kvw * 2;
    for (uint32_t l = 0; l < hp->n_layer; l++) {
        if ((e = dev_alloc(be, per_layer, &v)))
            goto fail;
        be->kc[l] = v;
        if ((e = dev_alloc(be, per_layer, &v)))
            goto fail;
        be->vc[l] = v;
    }
    if ((e = rope_upload(be, (double)hp->rope_base, &be->cs, &be->sn)) ||
        (hp->n_swa && (e = rope_upload(be, (double)hp->rope_base_swa, &be->swa_cs, &be->swa_sn))))
        goto fail;
    struct ob_hrx_attn a = {(int)hp->n_head, (int)hp->n_head_kv, hd, p->n_ctx, 0.0f};
    if ((e = dev_alloc(be, ob_hrx_attn_scratch(&a) * sizeof(float), &v)))
        goto fail;
    be->att = v;
    if ((e = dev_alloc(be, (size_t)LOGIT_ROWS * E * sizeof(float), &v)))
        goto fail;
    be->logit_x = v;
    if ((e = dev_alloc(be, (size_t)LOGIT_ROWS * E * sizeof(float), &be->logit_q)) ||
        (e = dev_alloc(be, (size_t)LOGIT_ROWS * V * sizeof(float), &v)))
        goto fail;
    be->logits = v;
    if ((e = upload_weights(be)) || (e = rt->sync(be->q)))
        goto fail;
    *out = be;
    return 0;
fail:
    hrx_close(be);
    return e;
}

static int hrx_open_gpu(const struct ob_model *m, const struct ob_be_params *p,
                        struct ob_be **out)
{
    return hrx_open(m, p, false, out);
}

static int hrx_open_sim(const struct ob_model *m, const struct ob_be_params *p,
                        struct ob_be **out)
{
    return hrx_open(m, p, true, out);
}

static const char *hrx_device(const struct ob_be *be) { return be->device; }

/* ---- ops ------------------------------------------------------------------------------------- */

static int hrx_begin(struct ob_be *be, const struct ob_batch *b)
{
    uint32_t V = be->m->hp.n_vocab;
    for (int i = 0; i < b->n; i++)
        if (b->tok[i] < 0 || (uint32_t)b->tok[i] >= V)
            return ob_seterr(OB_ERANGE, "token id %d is outside the vocabulary of %u", b->tok[i],
                             V);
    int e;
    if ((e = step_end(be)))        /* the previous step's launches, if it had no logits */
        return e;
    be->b = *b;
    /* every step starts from the same buffers, so that a graph's replay writes where the host
     * side believes it does */
    be->xqi = 0;
    be->xq_buf = be->xn_for = -1;
    size_t n = (size_t)b->n * sizeof(int32_t);
    if ((e = be->rt->h2d(be->q, be->d_tok, b->tok, n)) ||
        (e = be->rt->h2d(be->q, be->d_pos, b->pos, n)) ||
        (e = be->rt->h2d(be->q, be->d_seq, b->seq, n)))
        return e;
    return step_start(be, b->n);
}

static int hrx_embed(struct ob_be *be)
{
    const struct ob_hparams *hp = &be->m->hp;
    float scale = hp->embd_scale ? ob_embd_scale((int)hp->n_embd) : 0.0f;
    int e = be->k->embed(be->q, be->tok_embd, be->d_tok, be->b.n, scale, be->buf[OB_BX]);
    be->version[OB_BX]++;
    if (e)
        step_abort(be);
    return e;
}

static int hrx_rmsnorm(struct ob_be *be, int l, int role, int src, int dst)
{
    const struct hrx_layer *L = &be->L[l];
    const float *w = role == OB_W_ATTN_NORM ? L->attn_norm
                     : role == OB_W_FFN_NORM ? L->ffn_norm
                     : role == OB_W_POST_ATTN_NORM ? L->post_attn_norm : L->post_ffn_norm;
    int e = be->k->rmsnorm(be->q, be->buf[src], NULL, be->b.n, be->width[src], w,
                           be->m->hp.rms_eps, be->buf[dst]);
    be->version[dst]++;
    return e;
}

/* the quantised copy the products read */
static void *xq_cur(const struct ob_be *be) { return be->xqb[be->xqi]; }

/* after xq_cur was written with rows [0, n) of buffer src in format fmt (e: how that went):
 * what it holds, for the matmuls that may reuse it */
static int xq_holds(struct ob_be *be, int e, int src, int fmt, int n, size_t stride)
{
    be->xq_buf = e ? -1 : src;
    be->xq_fmt = fmt;
    be->xq_rows = n;
    be->xq_version = be->version[src];
    be->xq_stride = stride;
    return e;
}

/* the quantised copy of rows [0, n) of buffer src for weights of type wtype, reused while the
 * buffer is unchanged */
static int quantised(struct ob_be *be, int src, uint32_t wtype, int k, int n)
{
    int fmt = ob_type_actfmt(wtype);
    if (be->xq_buf == src && be->xq_fmt == fmt && be->xq_version == be->version[src] &&
        be->xq_rows >= n)
        return 0;
    size_t stride = ob_act_row_bytes(fmt, k);
    return xq_holds(be, be->k->actq(be->q, fmt, be->buf[src], n, k, xq_cur(be), stride), src, fmt,
                    n, stride);
}

/* dst = W src, or that product folded into dst by op (OB_HRX_EPI_*) */
static int matmul_op(struct ob_be *be, int l, int role, int src, int dst, int op)
{
    const struct ob_hrx_mat *w = &be->L[l].w[role];
    int e;
    if ((e = quantised(be, src, w->type, w->k, be->b.n)))
        return e;
    e = be->k->matmul(be->q, *w, xq_cur(be), be->xq_stride, be->b.n, be->L[l].bias[role],
                      be->buf[dst], (size_t)be->width[dst], op, NULL);
    be->version[dst]++;
    return e;
}

static int hrx_matmul(struct ob_be *be, int l, int role, int src, int dst)
{
    return matmul_op(be, l, role, src, dst, OB_HRX_EPI_STORE);
}

/* dst = rmsnorm(src) and its rows quantised for the weights of wrole (the quantised copy the
 * next matmuls reuse), one launch on a GPU */
static int rmsnorm_q(struct ob_be *be, int l, int role, int src, int dst, int wrole)
{
    const struct hrx_layer *L = &be->L[l];
    const float *w = role == OB_W_ATTN_NORM ? L->attn_norm : L->ffn_norm;
    int k = be->width[src], fmt = ob_type_actfmt(L->w[wrole].type), n = be->b.n;
    size_t stride = ob_act_row_bytes(fmt, k);
    int e = be->k->rmsnorm_q(be->q, be->buf[src], n, k, w, be->m->hp.rms_eps, be->buf[dst],
                             fmt, xq_cur(be), stride);
    be->version[dst]++;
    return xq_holds(be, e, dst, fmt, n, stride);
}

/* layer l's q/k norm and RoPE */
static struct ob_hrx_rope rope_shape(const struct ob_be *be, int l)
{
    const struct ob_hparams *hp = &be->m->hp;
    bool swa = ob_hparams_layer_swa(hp, (uint32_t)l);
    struct ob_hrx_rope r = {(int)hp->n_head, (int)hp->n_head_kv, (int)hp->head_dim,
                            (int)hp->n_rot, hp->rope_type == OB_ROPE_NEOX, hp->rms_eps,
                            be->L[l].q_norm, be->L[l].k_norm, swa ? be->swa_cs : be->cs,
                            swa ? be->swa_sn : be->sn};
    return r;
}

static int hrx_qk_rope(struct ob_be *be, int l)
{
    int e = be->k->qk_rope(be->q, rope_shape(be, l), be->buf[OB_BQ], be->buf[OB_BK], be->d_pos,
                           be->b.n);
    be->version[OB_BQ]++;
    be->version[OB_BK]++;
    return e;
}

static int hrx_kv_store(struct ob_be *be, int l)
{
    return be->k->kv_store(be->q, be->buf[OB_BK], be->buf[OB_BV], be->kvw, be->d_pos,
                           be->d_seq, be->b.n, be->p.n_ctx, be->kc[l], be->vc[l]);
}

static struct ob_hrx_attn attn_shape(const struct ob_be *be, int l)
{
    const struct ob_hparams *hp = &be->m->hp;
    struct ob_hrx_attn a = {(int)hp->n_head, (int)hp->n_head_kv, (int)hp->head_dim,
                            be->p.n_ctx, ob_attn_scale((int)hp->attn_scale_dim),
                            ob_hparams_layer_swa(hp, (uint32_t)l) ? (int)hp->n_swa : 0,
                            be->att_whole, be->fuse > 2};
    return a;
}

static int hrx_attention(struct ob_be *be, int l)
{
    int e = be->k->attention(be->q, attn_shape(be, l), be->buf[OB_BQ], be->kc[l], be->vc[l],
                             be->d_pos, be->d_seq, be->b.n, be->buf[OB_BATT], be->att);
    be->version[OB_BATT]++;
    return e;
}

/* attention, and its rows quantised for the output product (the copy matmul_op reuses):
 * one launch fewer on a GPU (OB_HRX_FUSE=2) */
static int attention_q(struct ob_be *be, int l)
{
    if (be->fuse < 2)
        return hrx_attention(be, l);
    int k = be->width[OB_BATT], fmt = ob_type_actfmt(be->L[l].w[OB_W_O].type), n = be->b.n;
    size_t stride = ob_act_row_bytes(fmt, k);
    int e = be->k->attention_q(be->q, attn_shape(be, l), be->buf[OB_BQ], be->kc[l], be->vc[l],
                               be->d_pos, be->d_seq, n, be->buf[OB_BATT], be->att, fmt, xq_cur(be),
                               stride);
    be->version[OB_BATT]++;
    return xq_holds(be, e, OB_BATT, fmt, n, stride);
}

static int hrx_swiglu(struct ob_be *be)
{
    int e = be->k->swiglu(be->q, be->buf[OB_BGATE], be->buf[OB_BUP],
                          (size_t)be->b.n * (size_t)be->width[OB_BGATE]);
    be->version[OB_BGATE]++;
    return e;
}

static int hrx_geglu(struct ob_be *be)
{
    int e = be->k->geglu(be->q, be->buf[OB_BGATE], be->buf[OB_BUP],
                         (size_t)be->b.n * (size_t)be->width[OB_BGATE]);
    be->version[OB_BGATE]++;
    return e;
}

static int hrx_add(struct ob_be *be, int dst, int src)
{
    int e = be->k->add(be->q, be->buf[dst], be->buf[src],
                       (size_t)be->b.n * (size_t)be->width[dst]);
    be->version[dst]++;
    return e;
}

/* ---- OB_HRX_FUSE=2: more than one op a launch --------------------------------------------- */

/* the products of src's rows with the matrices of roles[0 .. count) into buffers dst[..]: those
 * of one weight type and k in one matmul_multi launch, the others in launches of their own;
 * each launch then does `then` (NULL: nothing) with its matrices' roles (their index in
 * roles: 0 q, 1 k, 2 v for ROPE_KV) */
static int multi_op(struct ob_be *be, int l, const int *roles, const int *dst, int count,
                    int src, const struct ob_hrx_then *then)
{
    const struct hrx_layer *L = &be->L[l];
    bool done[OB_HRX_MULTI] = {false};
    int e = 0;
    for (int a = 0; a < count && !e; a++) {
        if (done[a])
            continue;
        const struct ob_hrx_mat *wa = &L->w[roles[a]];
        struct ob_hrx_multi m = {0};
        struct ob_hrx_then t = {0};
        if (then)
            t = *then;
        for (int c = a; c < count; c++) {
            const struct ob_hrx_mat *wc = &L->w[roles[c]];
            if (done[c] || wc->type != wa->type || wc->k != wa->k)
                continue;
            t.role[m.count] = c;
            m.w[m.count] = *wc;
            m.b[m.count] = L->bias[roles[c]];
            m.y[m.count] = be->buf[dst[c]];
            m.ldy[m.count++] = (size_t)be->width[dst[c]];
            done[c] = true;
            be->version[dst[c]]++;
        }
        if (!(e = quantised(be, src, wa->type, wa->k, be->b.n)))
            e = be->k->matmul_multi(be->q, m, xq_cur(be), be->xq_stride, be->b.n,
                                    OB_HRX_EPI_STORE, then ? &t : NULL);
    }
    return e;
}

/* Q, K and V of XN: one launch where they share weight type and k (level 2), else one each;
 * at level 3 those launches also do rope_kv's work (the q/k norm, RoPE, the KV store) */
static int qkv_op(struct ob_be *be, int l)
{
    static const int roles[3] = {OB_W_Q, OB_W_K, OB_W_V}, dst[3] = {OB_BQ, OB_BK, OB_BV};
    int e;
    if (be->fuse > 2) {
        struct ob_hrx_then t = {OB_HRX_THEN_ROPE_KV};
        t.r = rope_shape(be, l);
        t.pos = be->d_pos;
        t.seq = be->d_seq;
        t.n_ctx = be->p.n_ctx;
        t.kc = be->kc[l];
        t.vc = be->vc[l];
        return multi_op(be, l, roles, dst, 3, OB_BXN, &t);
    }
    if (be->fuse > 1)
        return multi_op(be, l, roles, dst, 3, OB_BXN, NULL);
    if ((e = matmul_op(be, l, OB_W_Q, OB_BXN, OB_BQ, OB_HRX_EPI_STORE)) ||
        (e = matmul_op(be, l, OB_W_K, OB_BXN, OB_BK, OB_HRX_EPI_STORE)))
        return e;
    return matmul_op(be, l, OB_W_V, OB_BXN, OB_BV, OB_HRX_EPI_STORE);
}

/* q/k norm, RoPE and the KV store in one launch (level 2: K rotated straight into the cache,
 * BK keeping the unrotated rows, which nothing reads after), else qk_rope then kv_store */
static int rope_kv_op(struct ob_be *be, int l)
{
    if (be->fuse > 2)
        return 0;                  /* qkv_op's launches did it */
    if (be->fuse < 2) {
        int e = hrx_qk_rope(be, l);
        return e ? e : hrx_kv_store(be, l);
    }
    int e = be->k->rope_kv(be->q, rope_shape(be, l), be->buf[OB_BQ], be->buf[OB_BK],
                           be->buf[OB_BV], be->d_pos, be->d_seq, be->b.n, be->p.n_ctx, be->kc[l],
                           be->vc[l]);
    be->version[OB_BQ]++;
    return e;
}

/* ---- OB_HRX_FUSE=3: what needs a whole row or block, done by a product's last block ---------- */

/* the quantised-copy buffer that matmul_op's products do not read: where their last block may
 * write while other blocks still read xq_cur */
static void *xq_next(struct ob_be *be) { return be->xqb[!be->xqi]; }

/* after a launch wrote xq_next (e: how that went): it becomes xq_cur, holding what xq_holds
 * says */
static int xq_swap(struct ob_be *be, int e, int src, int fmt, int n, size_t stride)
{
    be->xqi = !be->xqi;
    return xq_holds(be, e, src, fmt, n, stride);
}

/* X = X + W src (W layer l's matrix of role), then XN = rmsnorm(X) with weights norm and its
 * rows quantised for weights of type wtype: in the product's launch on a GPU (its last block
 * of each row group), else a launch after it */
static int add_norm_op(struct ob_be *be, int l, int role, int src, const float *norm,
                       uint32_t wtype)
{
    const struct ob_hrx_mat *w = &be->L[l].w[role];
    int e;
    if ((e = quantised(be, src, w->type, w->k, be->b.n)))
        return e;
    int k = be->width[OB_BX], fmt = ob_type_actfmt(wtype), n = be->b.n;
    size_t stride = ob_act_row_bytes(fmt, k);
    struct ob_hrx_then t = {OB_HRX_THEN_NORM_Q, norm, be->m->hp.rms_eps, be->buf[OB_BXN], fmt,
                            xq_next(be), stride};
    e = be->k->matmul(be->q, *w, xq_cur(be), be->xq_stride, n, be->L[l].bias[role], be->buf[OB_BX],
                      (size_t)k, OB_HRX_EPI_ADD, &t);
    be->version[OB_BX]++;
    be->version[OB_BXN]++;
    return xq_swap(be, e, OB_BXN, fmt, n, stride);
}

/* GATE = act(gate XN) * (up XN): one launch where gate and up share weight type and shape
 * (level 2; level 3 also quantises GATE for the down product there), else the gate's
 * product, then the up product folding the gated unit in */
static int glu_op(struct ob_be *be, int l, int glu)
{
    const struct hrx_layer *L = &be->L[l];
    const struct ob_hrx_mat *g = &L->w[OB_W_GATE], *u = &L->w[OB_W_UP];
    int e;
    if (be->fuse > 1 && g->type == u->type && g->k == u->k && g->n == u->n) {
        struct ob_hrx_multi m = {2, {*g, *u}, {L->bias[OB_W_GATE], L->bias[OB_W_UP]},
                                 {be->buf[OB_BGATE], NULL},
                                 {(size_t)be->width[OB_BGATE], 0}};
        if ((e = quantised(be, OB_BXN, g->type, g->k, be->b.n)))
            return e;
        int fmt = ob_type_actfmt(L->w[OB_W_DOWN].type), n = be->b.n;
        size_t stride = ob_act_row_bytes(fmt, g->n);
        struct ob_hrx_then t = {OB_HRX_THEN_ACTQ, NULL, 0.0f, NULL, fmt, xq_next(be), stride};
        e = be->k->matmul_multi(be->q, m, xq_cur(be), be->xq_stride, n, glu,
                                be->fuse > 2 ? &t : NULL);
        be->version[OB_BGATE]++;
        return be->fuse > 2 ? xq_swap(be, e, OB_BGATE, fmt, n, stride) : e;
    }
    e = matmul_op(be, l, OB_W_GATE, OB_BXN, OB_BGATE, OB_HRX_EPI_STORE);
    return e ? e : matmul_op(be, l, OB_W_UP, OB_BXN, OB_BGATE, glu);
}

/*
 * Layer l with ops folded together where the arithmetic is the same, operation for operation:
 * rmsnorm and the quantisation of its rows (rmsnorm_q), the residual adds into the output and
 * down products (X = X + OUT as the matmul's last rounding), swiglu / geglu into the up product
 * (GATE = act(GATE) * UP with the gate's product already in GATE). OUT and UP are not written.
 * 14 launches a layer (OB_HRX_FUSE=1). OB_HRX_FUSE=2 also puts Q, K and V in one launch,
 * gate, up and the gated unit in one, q/k norm, RoPE and the KV store in one, and the
 * quantisation of ATT in attention's last launch (attention_q): 11 launches a layer with
 * attention split over blocks (three), where Q, K, V share a weight type and gate and up do
 * (12 where V's type differs, as in Q4_K_M files), on a GPU at up to 16 rows (matmul_multi in
 * hrx.h). By default (OB_HRX_FUSE=3) launches also do what needs their whole result, by
 * the block that finishes it last (hrx.h's ob_hrx_then, ob_hrx_attn's fold): the output
 * product the feed-forward rmsnorm_q, the down product the next layer's attention rmsnorm_q,
 * the gated unit's launch GATE's quantisation, the q, k and v launch rope_kv's work (each
 * head's last block), attention's chunks launch the combine and attention_q's quantisation:
 * 6 launches a layer (7 where V's type differs; layer 0 one more, its attention norm), on a
 * GPU at up to 15 rows. Gemma 3's post norms (which normalise OUT before the add) take the
 * ops one by one, and so does every layer under OB_HRX_FUSE=0.
 */
static int layer_ops(struct ob_be *be, int l)
{
    const struct ob_hparams *hp = &be->m->hp;
    if (!be->fuse || hp->post_norms)
        return ob_forward_layer(be->ops, be, hp, l);
    int glu = hp->ffn_act == OB_ACT_GELU ? OB_HRX_EPI_GELU : OB_HRX_EPI_SILU, e;
    if ((be->xn_for != l && (e = rmsnorm_q(be, l, OB_W_ATTN_NORM, OB_BX, OB_BXN, OB_W_Q))) ||
        (e = qkv_op(be, l)) || (e = rope_kv_op(be, l)) || (e = attention_q(be, l)))
        return e;
    be->xn_for = -1;
    if (be->fuse < 3) {
        if ((e = matmul_op(be, l, OB_W_O, OB_BATT, OB_BX, OB_HRX_EPI_ADD)) ||
            (e = rmsnorm_q(be, l, OB_W_FFN_NORM, OB_BX, OB_BXN, OB_W_GATE)) ||
            (e = glu_op(be, l, glu)))
            return e;
        return matmul_op(be, l, OB_W_DOWN, OB_BGATE, OB_BX, OB_HRX_EPI_ADD);
    }
    /* level 3: each norm in the product before it, the next layer's attention norm too */
    const struct hrx_layer *L = be->L;
    if ((e = add_norm_op(be, l, OB_W_O, OB_BATT, L[l].ffn_norm, L[l].w[OB_W_GATE].type)) ||
        (e = glu_op(be, l, glu)))
        return e;
    if (l + 1 == (int)hp->n_layer)
        return matmul_op(be, l, OB_W_DOWN, OB_BGATE, OB_BX, OB_HRX_EPI_ADD);
    if ((e = add_norm_op(be, l, OB_W_DOWN, OB_BGATE, L[l + 1].attn_norm,
                         L[l + 1].w[OB_W_Q].type)))
        return e;
    be->xn_for = l + 1;
    return 0;
}

/* a layer; after the last one the step's graph is ended or replayed (step_end) on the thread
 * that ran the step, as stream capture wants */
static int hrx_layer(struct ob_be *be, int l)
{
    int e = layer_ops(be, l);
    if (e)
        step_abort(be);
    else if (l == (int)be->m->hp.n_layer - 1)
        e = step_end(be);
    return e;
}

static int hrx_logits(struct ob_be *be, const int32_t *rows, int nrows, float *out32,
                      double *out64)
{
    const struct ob_hparams *hp = &be->m->hp;
    const struct ob_hrx_mat *w = &be->output;
    int E = (int)hp->n_embd, fmt = ob_type_actfmt(w->type), e;
    size_t stride = ob_act_row_bytes(fmt, E), V = (size_t)w->n;
    if ((e = step_end(be)))
        return e;
    for (int j0 = 0; j0 < nrows; j0 += LOGIT_ROWS) {
        int nj = nrows - j0 < LOGIT_ROWS ? nrows - j0 : LOGIT_ROWS;
        if ((e = be->rt->h2d(be->q, be->d_rows, rows + j0, (size_t)nj * sizeof(int32_t))) ||
            (e = be->k->rmsnorm(be->q, be->buf[OB_BX], be->d_rows, nj, E, be->output_norm,
                                hp->rms_eps, be->logit_x)) ||
            (e = be->k->actq(be->q, fmt, be->logit_x, nj, E, be->logit_q, stride)) ||
            (e = be->k->matmul(be->q, *w, be->logit_q, stride, nj, NULL, be->logits, V,
                               OB_HRX_EPI_STORE, NULL)) ||
            (e = be->rt->d2h(be->q, out32 + (size_t)j0 * V, be->logits, (size_t)nj * V * 4)))
            return e;
    }
    if (out64)
        for (size_t i = 0; i < (size_t)nrows * V; i++)
            out64[i] = out32[i];
    return 0;
}

static int hrx_kv_copy(struct ob_be *be, int dst, int src, int n_pos)
{
    size_t at_d = (size_t)dst * be->p.n_ctx * be->kvw, at_s = (size_t)src * be->p.n_ctx * be->kvw;
    size_t bytes = (size_t)n_pos * be->kvw * sizeof(uint16_t);
    int e;
    if ((e = step_end(be)))
        return e;
    for (uint32_t l = 0; l < be->m->hp.n_layer; l++)
        if ((e = be->rt->d2d(be->q, be->kc[l] + at_d, be->kc[l] + at_s, bytes)) ||
            (e = be->rt->d2d(be->q, be->vc[l] + at_d, be->vc[l] + at_s, bytes)))
            return e;
    return 0;
}

#define HRX_OPS(open_fn)                                                                   \
    {                                                                                      \
        .open = open_fn, .close = hrx_close, .device = hrx_device, .begin = hrx_begin,     \
        .layer = hrx_layer, .embed = hrx_embed, .rmsnorm = hrx_rmsnorm,                    \
        .matmul = hrx_matmul,                                                              \
        .qk_rope = hrx_qk_rope, .kv_store = hrx_kv_store, .attention = hrx_attention,      \
        .swiglu = hrx_swiglu, .geglu = hrx_geglu, .add = hrx_add, .logits = hrx_logits,   \
        .kv_copy = hrx_kv_copy, .host_alloc = hrx_host_alloc, .host_free = hrx_host_free,  \
    }

const struct ob_be_ops ob_be_hrx = HRX_OPS(hrx_open_gpu);
const struct ob_be_ops ob_be_hrx_sim = HRX_OPS(hrx_open_sim);
