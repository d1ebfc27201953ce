/*
 * backend-ref.c — the ref route: the graph of forward.c in float64, an oracle that says how far
 * every other route is from exact arithmetic. It is slow on purpose; what it promises is:
 *   - the weights are exactly the file's values: each row is dequantised with ob_dequant_row
 *     (exact, to float32) and widened to double (exact);
 *   - everything else is float64: residual stream, norms (1/sqrt(mean(x^2) + eps) with libm
 *     sqrt), biases, q/k norms, RoPE (cos and sin of pos * theta computed here in double, not
 *     the float tables of ob_rope_tables), a float64 KV cache, attention (plain softmax with
 *     libm exp), silu and the logits;
 *   - no activation is quantised and nothing is rounded to float32 except out32 =
 *     (float)out64 at the very end;
 *   - the float64 bits of a row's logits do not depend on the batch it ran in, on the prefill
 *     split, the prompt cache or the thread count (tests/t4400-ref.sh checks each).
 * Gemma 3 likewise: the embedding times sqrt(n_embd) (libm sqrt of the double), the post norms,
 * both rope bases, the sliding window (the same keys as every route: ob_attn_first_key), and
 * GELU as x / (1 + exp(-2u)) (= 0.5 x (1 + tanh u) without tanh's cancellation), in double.
 *
 * Matmuls: cblas_dgemm (OpenBLAS) on panels of weight rows. Memory is bounded by never holding
 * the dequantised weights (a float64 copy of Qwen3-0.6B would take ~5 GB, a float32 one
 * ~2.4 GB): each matmul cuts W into panels of P rows, P depending only on the row length k
 * (about 1 MiB of doubles, see panel_rows), and each panel is one task on the thread pool:
 *   dequantise the P rows from the mapped file into the thread's float64 panel, then
 *   tile [M][P] = X [M][k] . panel^T [k][P]     cblas_dgemm(RowMajor, NoTrans, Trans), 1 thread
 *   and copy the tile into columns j0 .. j0+P of Y.
 * Extra memory is one panel and one output tile per thread, the activations and the float64 KV
 * cache, which is calloc'd so that positions never written cost no resident memory. The price
 * is that every forward call dequantises every weight again: O(n k) next to the O(M n k) of the
 * dgemm, so it dominates only at small batches (decode), where this route is slow anyway.
 *
 * Why OpenBLAS runs single-threaded and the rows are padded (measured with OpenBLAS 0.3.21,
 * Haswell kernels): a logit must not depend on the batch or the thread count, but OpenBLAS's
 * dgemm computes an element of C in a different order depending on the micro-kernel tile its
 * row of X falls in: rows in tiles of 8, 4 or 2 rows agree bit for bit, a row left alone in a
 * 1-row tile does not (~1e-14 relative). So:
 *   - an odd number of rows is padded with a copy of the last row, so no row is ever alone in
 *     a tile (with one BLAS thread the tiles are 8s then a remainder of 4 and/or 2);
 *   - OpenBLAS's own threads would split the rows at thread-count-dependent places, leaving
 *     1-row tiles in the middle: its thread count is pinned to 1 (openblas_set_num_threads at
 *     open) and the route's n_threads run whole panels instead;
 *   - P depends only on k, so a weight row's place in its panel (and tile) is fixed;
 *   - dgemv is never used: it sums in yet another order.
 * OpenBLAS splits k into blocks that depend only on k, so with these rules the bits depend
 * only on OpenBLAS's kernel set, which is why ob_blas_env pins OPENBLAS_CORETYPE.
 */
#include <cblas.h>
#include <errno.h>
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "arith/arith.h"
#include "quant.h"
#include "backend.h"
#include "host/pool.h"

#define PANEL_VALUES (1 << 17)     /* about this many doubles in one weight panel: 1 MiB */
#define PANEL_MAX_ROWS 1024

struct ob_be {
    const struct ob_model *m;
    struct ob_be_params p;
    struct ob_batch b;             /* the batch being run (begin) */
    char device[64];               /* "float64 openblas Haswell" */
    struct ob_pool *pool;
    int width[OB_BCOUNT];
    double *buf[OB_BCOUNT];        /* [max_rows + 1][width]: one more row for the padding */
    int kmax;                      /* widest matrix row (input width) */
    /* per thread t: panel + t * panel_vals [P][k], tile + t * tile_vals [max_rows + 1][P],
     * rowf + t * kmax (one dequantised row) */
    double *panel, *tile;
    size_t panel_vals, tile_vals;
    float *rowf;
    int kvw;                       /* n_head_kv * head_dim */
    double **kc, **vc;             /* [n_layer] -> [n_slots][n_ctx][kvw] */
    double *theta;                 /* [n_rot / 2] base^(-2i / n_rot) */
    double *theta_swa;             /* the same for rope_base_swa (sliding-window layers) */
    double *rcos, *rsin;           /* [n_rot / 2] of the row being rotated */
    double *scores;                /* [n_threads][n_ctx] attention scores */
    double *xn;                    /* [max_rows + 1][n_embd] normed rows for the output matmul */
};

static int max_i(int a, int b) { return a > b ? a : b; }
static int min_i(int a, int b) { return a < b ? a : b; }

/* weight rows per panel for rows of k values: a multiple of 16 (whole micro-kernel tiles),
 * 16 .. PANEL_MAX_ROWS, a function of k alone */
static int panel_rows(int k)
{
    int P = PANEL_VALUES / k / 16 * 16;
    return max_i(16, min_i(P, PANEL_MAX_ROWS));
}

static void ref_close(struct ob_be *be)
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
    free(be->panel);
    free(be->tile);
    free(be->rowf);
    free(be->theta);
    free(be->theta_swa);
    free(be->rcos);
    free(be->rsin);
    free(be->scores);
    free(be->xn);
    ob_pool_free(be->pool);
    free(be);
}

static int ref_open(const struct ob_model *m, const struct ob_be_params *p, struct ob_be **out)
{
    const struct ob_hparams *hp = &m->hp;
    struct ob_be *be = calloc(1, sizeof *be);
    if (!be)
        return ob_seterr(OB_ENOMEM, "out of memory");
    be->m = m;
    be->p = *p;
    int e = ob_pool_new(p->n_threads, &be->pool);
    if (e) {
        free(be);
        return e;
    }
    openblas_set_num_threads(1);   /* see the file comment: our threads run whole panels */
    const char *core;
    int blas_threads;
    ob_blas_info(&core, &blas_threads);
    snprintf(be->device, sizeof be->device, "float64 openblas %s", core ? core : "?");
    int hd = (int)hp->head_dim, E = (int)hp->n_embd, F = (int)hp->n_ff;
    int Q = (int)hp->n_head * hd, half = (int)hp->n_rot / 2;
    be->width[OB_BX] = be->width[OB_BXN] = be->width[OB_BOUT] = E;
    be->width[OB_BQ] = be->width[OB_BATT] = Q;
    be->width[OB_BK] = be->width[OB_BV] = (int)hp->n_head_kv * hd;
    be->width[OB_BGATE] = be->width[OB_BUP] = F;
    size_t R = (size_t)p->max_rows + 1, T = (size_t)p->n_threads;
    for (int i = 0; i < OB_BCOUNT; i++)
        if (!(be->buf[i] = calloc(R * (size_t)be->width[i], sizeof(double))))
            goto oom;
    /* matrices take rows of n_embd (q k v gate up output), n_head * hd (o) or n_ff (down) */
    be->kmax = max_i(E, max_i(Q, F));
    const int ks[] = {E, Q, F};
    for (int i = 0; i < 3; i++) {
        size_t P = (size_t)panel_rows(ks[i]);
        if (P * (size_t)ks[i] > be->panel_vals)
            be->panel_vals = P * (size_t)ks[i];
        if (R * P > be->tile_vals)
            be->tile_vals = R * P;
    }
    be->panel = malloc(T * be->panel_vals * sizeof(double));
    be->tile = malloc(T * be->tile_vals * sizeof(double));
    be->rowf = malloc(T * (size_t)be->kmax * sizeof(float));
    be->kvw = be->width[OB_BK];
    size_t per_layer = (size_t)p->n_slots * (size_t)p->n_ctx * (size_t)be->kvw;
    be->kc = calloc(hp->n_layer, sizeof *be->kc);
    be->vc = calloc(hp->n_layer, sizeof *be->vc);
    be->theta = malloc((size_t)max_i(half, 1) * sizeof(double));
    be->theta_swa = malloc((size_t)max_i(half, 1) * sizeof(double));
    be->rcos = malloc((size_t)max_i(half, 1) * sizeof(double));
    be->rsin = malloc((size_t)max_i(half, 1) * sizeof(double));
    be->scores = malloc(T * (size_t)p->n_ctx * sizeof(double));
    be->xn = malloc(R * (size_t)E * sizeof(double));
    if (!be->panel || !be->tile || !be->rowf || !be->kc || !be->vc || !be->theta ||
        !be->theta_swa || !be->rcos ||
        !be->rsin || !be->scores || !be->xn)
        goto oom;
    /* calloc: pages of positions never written are never touched */
    for (uint32_t l = 0; l < hp->n_layer; l++)
        if (!(be->kc[l] = calloc(per_layer, sizeof(double))) ||
            !(be->vc[l] = calloc(per_layer, sizeof(double))))
            goto oom;
    for (int i = 0; i < half; i++) {
        be->theta[i] = pow((double)hp->rope_base, -2.0 * i / (double)hp->n_rot);
        be->theta_swa[i] = pow((double)hp->rope_base_swa, -2.0 * i / (double)hp->n_rot);
    }
    *out = be;
    return 0;
oom:
    e = ob_seterr(OB_ENOMEM, "ref route: out of memory for %d slots x %d positions (float64 "
                  "KV cache)", p->n_slots, p->n_ctx);
    ref_close(be);
    return e;
}

/* ---- matmul ---------------------------------------------------------------------------------- */

struct gemm_job {
    struct ob_be *be;
    const struct ob_matrix *w;
    const double *x;               /* [Mp][k] */
    int M, Mp, P;
    double *y64;
    size_t ldy64;
    float *y32;
    size_t ldy32;
    atomic_int err;
};

/*
 * Panel i: weight rows j0 = i * P .. j0 + np, dequantised to float32 (exact) and widened
 * (exact) into this thread's panel, multiplied with all Mp activation rows into this thread's
 * tile [Mp][np] by a single-threaded dgemm, then copied out.
 */
static void gemm_task(void *ctx, int i, int t)
{
    struct gemm_job *j = ctx;
    struct ob_be *be = j->be;
    const struct ob_matrix *w = j->w;
    int k = w->k, j0 = i * j->P, np = min_i(j->P, w->n - j0);
    float *f = be->rowf + (size_t)t * (size_t)be->kmax;
    double *panel = be->panel + (size_t)t * be->panel_vals;
    double *tile = be->tile + (size_t)t * be->tile_vals;
    for (int r = 0; r < np; r++) {
        int e = ob_dequant_row(w->type, (const char *)w->data + (size_t)(j0 + r) * w->row_bytes,
                               f, k);
        if (e) {
            atomic_store(&j->err, e);
            return;
        }
        double *d = panel + (size_t)r * (size_t)k;
        for (int c = 0; c < k; c++)
            d[c] = (double)f[c];
    }
    /* tile [Mp][np] = X [Mp][k] . panel^T [k][np] */
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, j->Mp, np, k, 1.0, j->x, k, panel, k,
                0.0, tile, np);
    for (int r = 0; r < j->M; r++) {
        const double *c = tile + (size_t)r * (size_t)np;
        if (j->y64)
            memcpy(j->y64 + (size_t)r * j->ldy64 + (size_t)j0, c, (size_t)np * sizeof *c);
        if (j->y32)
            for (int q = 0; q < np; q++)
                j->y32[(size_t)r * j->ldy32 + (size_t)(j0 + q)] = (float)c[q];
    }
}

/*
 * Y = X W^T for M rows: X [M][k] float64, rows k apart, with room for one more row (an odd M is
 * padded with a copy of the last row, see the file comment); W [n][k] any dequantisable type.
 * y64 (rows ldy64 apart) and/or y32 (ldy32 apart; (float) of the float64 result) may be NULL.
 */
static int gemm(struct ob_be *be, const struct ob_matrix *w, double *x, int M,
                double *y64, size_t ldy64, float *y32, size_t ldy32)
{
    if (!ob_dequant_supported(w->type))
        return ob_seterr(OB_EUNSUPP, "ref route: cannot dequantise weights of type %s",
                         ob_type_name(w->type));
    int k = w->k, P = panel_rows(k);
    if (k > be->kmax || (size_t)P * (size_t)k > be->panel_vals || M > be->p.max_rows)
        return ob_seterr(OB_EINTERNAL, "ref route: a %d x %d matrix on %d rows does not fit the "
                         "buffers", w->n, k, M);
    int Mp = M + (M & 1);
    if (Mp > M)
        memcpy(x + (size_t)M * (size_t)k, x + (size_t)(M - 1) * (size_t)k,
               (size_t)k * sizeof *x);
    struct gemm_job job = {.be = be, .w = w, .x = x, .M = M, .Mp = Mp, .P = P, .y64 = y64,
                           .ldy64 = ldy64, .y32 = y32, .ldy32 = ldy32};
    atomic_init(&job.err, 0);
    ob_pool_run(be->pool, gemm_task, &job, (w->n + P - 1) / P);
    int e = atomic_load(&job.err);
    /* the workers' messages are thread-local: say it again on this thread */
    return e ? ob_seterr(e, "ref route: a %s row of %d values cannot be dequantised",
                         ob_type_name(w->type), k) : 0;
}

static int ref_matmul(struct ob_be *be, int l, int role, int src, int dst)
{
    int n = be->b.n;
    const struct ob_matrix *w = ob_layer_matrix(be->m, l, role);
    if (!w || w->k != be->width[src] || w->n != be->width[dst])
        return ob_seterr(OB_EINTERNAL, "ref route: matmul role %d does not fit its buffers", role);
    int e = gemm(be, w, be->buf[src], n, be->buf[dst], (size_t)be->width[dst], NULL, 0);
    if (e)
        return e;
    const float *b = ob_layer_bias(be->m, l, role);
    if (b)
        for (int i = 0; i < n; i++) {
            double *y = be->buf[dst] + (size_t)i * (size_t)w->n;
            for (int j = 0; j < w->n; j++)
                y[j] += (double)b[j];
        }
    return 0;
}

/* ---- element-wise ops -------------------------------------------------------------------------- */

static int ref_embed(struct ob_be *be)
{
    const int32_t *tok = be->b.tok;
    int n = be->b.n;
    const struct ob_matrix *w = &be->m->tok_embd;
    float *f = be->rowf;
    for (int i = 0; i < n; i++) {
        if (tok[i] < 0 || tok[i] >= w->n)
            return ob_seterr(OB_ERANGE, "token id %d is outside the vocabulary of %d", tok[i], w->n);
        int e = ob_dequant_row(w->type, (const char *)w->data + (size_t)tok[i] * w->row_bytes, f,
                               w->k);
        if (e)
            return e;
        double *x = be->buf[OB_BX] + (size_t)i * (size_t)w->k;
        double sc = be->m->hp.embd_scale ? sqrt((double)w->k) : 1.0;
        for (int c = 0; c < w->k; c++)
            x[c] = (double)f[c] * sc;
    }
    return 0;
}

/* y = x / sqrt(mean(x^2) + eps) * w; y may alias x */
static void rms_row(const double *x, const float *w, double *y, int n, double eps)
{
    double ss = 0.0;
    for (int i = 0; i < n; i++)
        ss += x[i] * x[i];
    double r = 1.0 / sqrt(ss / (double)n + eps);
    for (int i = 0; i < n; i++)
        y[i] = x[i] * r * (double)w[i];
}

static int ref_rmsnorm(struct ob_be *be, int l, int role, int src, int dst)
{
    int n = be->b.n;
    const float *w = ob_layer_norm(be->m, l, role);
    int E = be->width[src];
    for (int i = 0; i < n; i++)
        rms_row(be->buf[src] + (size_t)i * E, w, be->buf[dst] + (size_t)i * E, E,
                (double)be->m->hp.rms_eps);
    return 0;
}

/* rotate the first n_rot dims of one head with be->rcos / rsin: NEOX pairs (i, i + n_rot/2),
 * NORM pairs (2i, 2i + 1) */
static void rope_head(const struct ob_be *be, double *x, int n_rot, int neox)
{
    int h = n_rot / 2;
    for (int i = 0; i < h; i++) {
        int a = neox ? i : 2 * i, b = neox ? i + h : 2 * i + 1;
        double x0 = x[a], x1 = x[b], c = be->rcos[i], s = be->rsin[i];
        x[a] = x0 * c - x1 * s;
        x[b] = x0 * s + x1 * c;
    }
}

static int ref_qk_rope(struct ob_be *be, int l)
{
    const int32_t *pos = be->b.pos;
    int n = be->b.n;
    const struct ob_hparams *hp = &be->m->hp;
    const struct ob_layer *L = &be->m->layers[l];
    int hd = (int)hp->head_dim, n_rot = (int)hp->n_rot, neox = hp->rope_type == OB_ROPE_NEOX;
    double eps = (double)hp->rms_eps;
    const double *theta = ob_hparams_layer_swa(hp, (uint32_t)l) ? be->theta_swa : be->theta;
    for (int i = 0; i < n; i++) {
        for (int r = 0; r < n_rot / 2; r++) {
            double a = (double)pos[i] * theta[r];
            be->rcos[r] = cos(a);
            be->rsin[r] = sin(a);
        }
        for (uint32_t h = 0; h < hp->n_head; h++) {
            double *q = be->buf[OB_BQ] + (size_t)i * be->width[OB_BQ] + (size_t)h * hd;
            if (L->q_norm)
                rms_row(q, L->q_norm, q, hd, eps);
            rope_head(be, q, n_rot, neox);
        }
        for (uint32_t h = 0; h < hp->n_head_kv; h++) {
            double *k = be->buf[OB_BK] + (size_t)i * be->width[OB_BK] + (size_t)h * hd;
            if (L->k_norm)
                rms_row(k, L->k_norm, k, hd, eps);
            rope_head(be, k, n_rot, neox);
        }
    }
    return 0;
}

static size_t kv_at(const struct ob_be *be, int seq, int pos)
{
    return ((size_t)seq * (size_t)be->p.n_ctx + (size_t)pos) * (size_t)be->kvw;
}

static int ref_kv_store(struct ob_be *be, int l)
{
    const int32_t *seq = be->b.seq, *pos = be->b.pos;
    int n = be->b.n;
    size_t bytes = (size_t)be->kvw * sizeof(double);
    for (int i = 0; i < n; i++) {
        memcpy(be->kc[l] + kv_at(be, seq[i], pos[i]), be->buf[OB_BK] + (size_t)i * be->kvw, bytes);
        memcpy(be->vc[l] + kv_at(be, seq[i], pos[i]), be->buf[OB_BV] + (size_t)i * be->kvw, bytes);
    }
    return 0;
}

struct att_job {
    struct ob_be *be;
    int l;
    const int32_t *seq, *pos;
    double scale;
    int window;                    /* keys per query on a sliding-window layer, 0: all */
};

/* one (row, query head): softmax(q . k_t * scale) over t in [first key, pos], then the weighted
 * sum of v_t */
static void att_task(void *ctx, int task, int thread)
{
    const struct att_job *j = ctx;
    struct ob_be *be = j->be;
    const struct ob_hparams *hp = &be->m->hp;
    int hd = (int)hp->head_dim, nh = (int)hp->n_head;
    int i = task / nh, h = task % nh, g = h / (int)(hp->n_head / hp->n_head_kv);
    double *s = be->scores + (size_t)thread * (size_t)be->p.n_ctx;
    int k0 = ob_attn_first_key(j->pos[i], j->window), nk = j->pos[i] + 1 - k0;
    const double *k = be->kc[j->l] + kv_at(be, j->seq[i], k0) + (size_t)g * hd;
    const double *v = be->vc[j->l] + kv_at(be, j->seq[i], k0) + (size_t)g * hd;
    const double *q = be->buf[OB_BQ] + (size_t)i * be->width[OB_BQ] + (size_t)h * hd;
    double *out = be->buf[OB_BATT] + (size_t)i * be->width[OB_BATT] + (size_t)h * hd;
    double m = -INFINITY;
    for (int t = 0; t < nk; t++) {
        const double *kt = k + (size_t)t * be->kvw;
        double d = 0.0;
        for (int c = 0; c < hd; c++)
            d += q[c] * kt[c];
        s[t] = d * j->scale;
        m = s[t] > m ? s[t] : m;
    }
    double l = 0.0;
    for (int c = 0; c < hd; c++)
        out[c] = 0.0;
    for (int t = 0; t < nk; t++) {
        double e = exp(s[t] - m);
        const double *vt = v + (size_t)t * be->kvw;
        l += e;
        for (int c = 0; c < hd; c++)
            out[c] += e * vt[c];
    }
    for (int c = 0; c < hd; c++)
        out[c] /= l;
}

static int ref_attention(struct ob_be *be, int l)
{
    const int32_t *seq = be->b.seq, *pos = be->b.pos;
    int n = be->b.n;
    const struct ob_hparams *hp = &be->m->hp;
    int window = ob_hparams_layer_swa(hp, (uint32_t)l) ? (int)hp->n_swa : 0;
    struct att_job j = {be, l, seq, pos, 1.0 / sqrt((double)hp->attn_scale_dim), window};
    ob_pool_run(be->pool, att_task, &j, n * (int)hp->n_head);
    return 0;
}

static int ref_swiglu(struct ob_be *be)
{
    int n = be->b.n;
    double *g = be->buf[OB_BGATE];
    const double *u = be->buf[OB_BUP];
    size_t len = (size_t)n * (size_t)be->width[OB_BGATE];
    for (size_t i = 0; i < len; i++)
        g[i] = g[i] / (1.0 + exp(-g[i])) * u[i];
    return 0;
}

/* GATE = gelu(GATE) * UP, gelu the tanh form: 0.5 x (1 + tanh u) = x / (1 + e^-2u) */
static int ref_geglu(struct ob_be *be)
{
    int n = be->b.n;
    double *g = be->buf[OB_BGATE];
    const double *u = be->buf[OB_BUP];
    size_t len = (size_t)n * (size_t)be->width[OB_BGATE];
    for (size_t i = 0; i < len; i++) {
        double x = g[i], a = 0.79788456080286535588 * (x + 0.044715 * x * x * x);
        g[i] = x / (1.0 + exp(-2.0 * a)) * u[i];
    }
    return 0;
}

static int ref_add(struct ob_be *be, int dst, int src)
{
    int n = be->b.n;
    double *d = be->buf[dst];
    const double *s = be->buf[src];
    size_t len = (size_t)n * (size_t)be->width[dst];
    for (size_t i = 0; i < len; i++)
        d[i] += s[i];
    return 0;
}

static int ref_logits(struct ob_be *be, const int32_t *rows, int nrows, float *out32,
                      double *out64)
{
    const struct ob_matrix *w = &be->m->output;
    int E = (int)be->m->hp.n_embd;
    if (nrows > be->p.max_rows)
        return ob_seterr(OB_EINTERNAL, "ref route: %d logit rows, room for %d", nrows,
                         be->p.max_rows);
    for (int j = 0; j < nrows; j++)
        rms_row(be->buf[OB_BX] + (size_t)rows[j] * E, be->m->output_norm,
                be->xn + (size_t)j * E, E, (double)be->m->hp.rms_eps);
    return gemm(be, w, be->xn, nrows, out64, (size_t)w->n, out32, (size_t)w->n);
}

static int ref_kv_copy(struct ob_be *be, int dst, int src, int n_pos)
{
    size_t bytes = (size_t)n_pos * (size_t)be->kvw * sizeof(double);
    for (uint32_t l = 0; l < be->m->hp.n_layer; l++) {
        memmove(be->kc[l] + kv_at(be, dst, 0), be->kc[l] + kv_at(be, src, 0), bytes);
        memmove(be->vc[l] + kv_at(be, dst, 0), be->vc[l] + kv_at(be, src, 0), bytes);
    }
    return 0;
}

static const char *ref_device(const struct ob_be *be) { return be->device; }

static int ref_begin(struct ob_be *be, const struct ob_batch *b)
{
    be->b = *b;
    return 0;
}

static struct ob_pool *ref_pool(struct ob_be *be) { return be->pool; }

const struct ob_be_ops ob_be_ref = {
    .open = ref_open,
    .close = ref_close,
    .device = ref_device,
    .begin = ref_begin,
    .embed = ref_embed,
    .rmsnorm = ref_rmsnorm,
    .matmul = ref_matmul,
    .qk_rope = ref_qk_rope,
    .kv_store = ref_kv_store,
    .attention = ref_attention,
    .swiglu = ref_swiglu,
    .geglu = ref_geglu,
    .add = ref_add,
    .logits = ref_logits,
    .kv_copy = ref_kv_copy,
    .pool = ref_pool,
};

/* ---- OpenBLAS set-up ----------------------------------------------------------------------------- */

/*
 * The kernel set to force. OpenBLAS 0.3.21 (DYNAMIC_ARCH) chooses its kernels in a load-time
 * constructor from its own CPU tables, which do not know the newer EPYC families: it falls
 * back to "Prescott" (SSE3), measured at 6.3 against 32-38 GFLOP/s for a 512x2048x1024 dgemm
 * on one Zen 3 core. "Haswell" (AVX2 + FMA) is correct on every x86-64 CPU with AVX2 and FMA,
 * Intel or AMD; 0.3.21's "Zen" set uses the same dgemm kernels (measured: bitwise equal
 * results, same speed within noise). Choosing it everywhere, rather than the fastest set of
 * each CPU (SkylakeX on AVX-512 Intel), also makes the oracle's bits the same on every such
 * machine. CPUs without AVX2 + FMA, and other architectures, are left to OpenBLAS.
 */
static const char *blas_coretype(void)
{
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        return "Haswell";
#endif
    return NULL;
}

int ob_blas_env(int argc, char **argv)
{
    if (getenv("OPENBLAS_CORETYPE"))
        return 0;                  /* set by the user, or by us before the re-exec */
    const char *core = blas_coretype();
    if (!core)
        return 0;
    if (argc < 1 || !argv || argv[argc])
        return ob_seterr(OB_EUSAGE, "ob_blas_env: argv must hold argc arguments and a NULL");
    if (setenv("OPENBLAS_CORETYPE", core, 1))
        return ob_seterr(OB_ENOMEM, "cannot set OPENBLAS_CORETYPE: %s", strerror(errno));
    execv("/proc/self/exe", argv);
    return ob_seterr(OB_EIO, "cannot re-execute /proc/self/exe with OPENBLAS_CORETYPE=%s: %s",
                     core, strerror(errno));
}

void ob_blas_info(const char **coretype, int *n_threads)
{
    if (coretype)
        *coretype = openblas_get_corename();
    if (n_threads)
        *n_threads = openblas_get_num_threads();
}
