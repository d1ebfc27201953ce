/*
 * backend-npu.c — the npu routes: npu-sim, the Q4NX arithmetic executed on the host, and npu,
 * the same arithmetic on an NPU through XRT (make XRT=1; see xrt.c for what runs today).
 *
 * What the NPU computes is the matmuls: every matrix of a Q4NX pack (lib/npu/pack.c) times
 * the activation rows quantised to A8 (arith.h), tile by tile (lib/arith/q4nx.h), with each
 * output's tiles summed in the fixed 8-partial shape. Everything else — the embedding lookup
 * (tiles dequantised), RMSNorm, q/k norms and RoPE, the fp16 KV cache, attention, SwiGLU,
 * residual adds — stays on the host, where these routes hand it to an instance of the cpu
 * route (lib/cpu/backend-cpu.h): those ops are the cpu route's, bit for bit, by construction.
 * So npu-sim differs from cpu only by the weights (a requantisation: "pack vs GGUF") and by
 * the tile arithmetic, and the npu route must equal npu-sim bit for bit.
 *
 * Batch invariance holds as on the cpu route: activation rows are quantised one by one, every
 * output is one row's dot product computed whole by one thread (npu.h), and the host ops are
 * the cpu route's.
 */
#include <stdio.h>
#include <stdlib.h>

#include "backend.h"
#include "cpu/backend-cpu.h"       /* the cpu-route instance the host ops run on, its buffers */
#include "cpu/kernels/kernels.h"   /* its kernel table: the A8 quantiser, the final norm's dot */
#include "npu/npu.h"

extern const struct ob_be_ops ob_be_cpu;

struct ob_be {
    const struct ob_model *m;
    struct ob_be_params p;
    struct ob_be *cpu;             /* the cpu route's instance (its own struct; never looked into) */
    struct ob_cpu_view v;          /* its buffers, pool and ISA level */
    struct ob_batch b;             /* the batch being run (begin) */
    const struct ob_kernel_table *kt;
    uint64_t version[OB_BCOUNT];   /* bumped whenever an op writes a buffer */
    /* the A8 copy of one buffer's rows, reused while that buffer is unchanged (q, k and v
     * share one; gate and up another) */
    void *xq;
    int xq_buf, xq_rows;
    uint64_t xq_version;
    size_t xq_stride;
    float *logit_x;                /* [max_rows][n_embd]: normed rows of the output matmul */
    void *logit_q;
    void *xrt;                     /* the npu route's device (xrt.c) */
    char device[64];
};

static void npu_close(struct ob_be *be)
{
    if (!be)
        return;
    if (be->cpu)
        ob_be_cpu.close(be->cpu);
    if (be->xrt)
        ob_npu_xrt_close(be->xrt);
    free(be->xq);
    free(be->logit_x);
    free(be->logit_q);
    free(be);
}

static int open_host(const struct ob_model *m, const struct ob_be_params *p, struct ob_be *be)
{
    int e;
    be->m = m;
    be->p = *p;
    be->xq_buf = -1;
    if ((e = ob_be_cpu.open(m, p, &be->cpu)))
        return e;
    ob_be_cpu_view(be->cpu, &be->v);
    be->kt = ob_kernels(be->v.isa);
    size_t R = (size_t)p->max_rows, maxw = 0, E = m->hp.n_embd;
    for (int i = 0; i < OB_BCOUNT; i++)
        maxw = (size_t)be->v.width[i] > maxw ? (size_t)be->v.width[i] : maxw;
    be->xq = malloc(R * (maxw / OB_QK4NX) * sizeof(struct ob_act_a8) + 1);
    be->logit_x = malloc(R * E * sizeof(float));
    be->logit_q = malloc(R * (E / OB_QK4NX) * sizeof(struct ob_act_a8) + 1);
    if (!be->xq || !be->logit_x || !be->logit_q)
        return ob_seterr(OB_ENOMEM, "npu route: out of memory for %d rows", p->max_rows);
    return 0;
}

static int sim_open(const struct ob_model *m, const struct ob_be_params *p, struct ob_be **out)
{
    struct ob_be *be = calloc(1, sizeof *be);
    if (!be)
        return ob_seterr(OB_ENOMEM, "out of memory");
    int e = open_host(m, p, be);
    if (e) {
        npu_close(be);
        return e;
    }
    snprintf(be->device, sizeof be->device, "npu-sim %s", ob_be_cpu.device(be->cpu));
    *out = be;
    return 0;
}

static const char *npu_device(const struct ob_be *be) { return be->device; }

/* ---- the host's ops: the cpu route's ------------------------------------------------------- */

static int wrote(struct ob_be *be, int b, int e)
{
    be->version[b]++;
    return e;
}

static int npu_begin(struct ob_be *be, const struct ob_batch *b)
{
    be->b = *b;
    be->xq_buf = -1;               /* new rows: nothing quantised holds */
    return ob_be_cpu.begin(be->cpu, b);
}

static int npu_embed(struct ob_be *be) { return wrote(be, OB_BX, ob_be_cpu.embed(be->cpu)); }

static int npu_rmsnorm(struct ob_be *be, int l, int role, int src, int dst)
{
    return wrote(be, dst, ob_be_cpu.rmsnorm(be->cpu, l, role, src, dst));
}

static int npu_qk_rope(struct ob_be *be, int l)
{
    be->version[OB_BQ]++;
    return wrote(be, OB_BK, ob_be_cpu.qk_rope(be->cpu, l));
}

static int npu_kv_store(struct ob_be *be, int l) { return ob_be_cpu.kv_store(be->cpu, l); }

static int npu_attention(struct ob_be *be, int l)
{
    return wrote(be, OB_BATT, ob_be_cpu.attention(be->cpu, l));
}

static int npu_swiglu(struct ob_be *be) { return wrote(be, OB_BGATE, ob_be_cpu.swiglu(be->cpu)); }

static int npu_add(struct ob_be *be, int dst, int src)
{
    return wrote(be, dst, ob_be_cpu.add(be->cpu, dst, src));
}

static int npu_kv_copy(struct ob_be *be, int dst, int src, int n_pos)
{
    return ob_be_cpu.kv_copy(be->cpu, dst, src, n_pos);
}

/* ---- the tiles ------------------------------------------------------------------------------- */

/* rows [0, n) of buffer src as A8 blocks, reused while the buffer is unchanged */
static void quantised(struct ob_be *be, int src, int k, int n)
{
    if (be->xq_buf == src && be->xq_version == be->version[src] && be->xq_rows >= n)
        return;
    be->xq_stride = (size_t)(k / OB_QK4NX) * sizeof(struct ob_act_a8);
    for (int i = 0; i < n; i++)
        be->kt->actq[OB_ACT_A8](be->v.buf[src] + (size_t)i * k,
                                (char *)be->xq + (size_t)i * be->xq_stride, k);
    be->xq_buf = src;
    be->xq_rows = n;
    be->xq_version = be->version[src];
}

static int npu_matmul(struct ob_be *be, int l, int role, int src, int dst)
{
    const struct ob_matrix *w = ob_layer_matrix(be->m, l, role);
    int n = be->b.n;
    quantised(be, src, w->k, n);
    int e = ob_q4nx_matmul(be->v.pool, be->v.isa, w, be->xq, be->xq_stride, n, be->v.buf[dst],
                           (size_t)be->v.width[dst]);
    if (e)
        return e;
    const float *b = ob_layer_bias(be->m, l, role);
    if (b)
        for (int i = 0; i < n; i++)
            ob_add_f32(be->v.buf[dst] + (size_t)i * w->n, b, (size_t)w->n);
    ob_be_cpu_wrote(be->cpu, dst);
    return wrote(be, dst, 0);
}

static int npu_logits(struct ob_be *be, const int32_t *rows, int nrows, float *out32,
                      double *out64)
{
    const struct ob_matrix *w = &be->m->output;
    int E = (int)be->m->hp.n_embd;
    size_t stride = (size_t)(E / OB_QK4NX) * sizeof(struct ob_act_a8);
    for (int j = 0; j < nrows; j++) {
        /* the cpu route's final norm: the sum of squares by its F32 dot (ob_dot_f32's bits) */
        const float *x = be->v.buf[OB_BX] + (size_t)rows[j] * E;
        float *y = be->logit_x + (size_t)j * E, ss;
        be->kt->dot[OB_F32](x, x, 0, 1, E, &ss);
        ob_rms_apply(x, ob_rms_factor(ss, E, be->m->hp.rms_eps), be->m->output_norm, y, E);
        be->kt->actq[OB_ACT_A8](y, (char *)be->logit_q + (size_t)j * stride, E);
    }
    int e = ob_q4nx_matmul(be->v.pool, be->v.isa, w, be->logit_q, stride, nrows, out32,
                           (size_t)w->n);
    if (!e && out64)
        for (size_t i = 0; i < (size_t)nrows * (size_t)w->n; i++)
            out64[i] = out32[i];
    return e;
}

static struct ob_pool *npu_pool(struct ob_be *be) { return ob_be_cpu.pool(be->cpu); }

const struct ob_be_ops ob_be_npu_sim = {
    .open = sim_open,
    .close = npu_close,
    .device = npu_device,
    .begin = npu_begin,
    .embed = npu_embed,
    .rmsnorm = npu_rmsnorm,
    .matmul = npu_matmul,
    .qk_rope = npu_qk_rope,
    .kv_store = npu_kv_store,
    .attention = npu_attention,
    .swiglu = npu_swiglu,
    .add = npu_add,
    .logits = npu_logits,
    .kv_copy = npu_kv_copy,
    .pool = npu_pool,
};

#ifdef OB_HAVE_XRT
/*
 * The npu route: the same host side, the matmuls on the device. Opening it probes and opens
 * the device (xrt.c), which today always ends in OB_EDEVICE — no machine 1b is built on has an
 * NPU, and no kernel design exists yet — so these ops never run a matmul on the host in its
 * place: a route never falls back to another.
 */
static int xrt_open(const struct ob_model *m, const struct ob_be_params *p, struct ob_be **out)
{
    void *dev = NULL;
    int e = ob_npu_xrt_open(&p->dev, &dev);
    if (e)
        return e;
    ob_npu_xrt_close(dev);
    return ob_seterr(OB_EDEVICE, "npu: no kernel design to run the tiles on device %d",
                     p->dev.index);
}

const struct ob_be_ops ob_be_npu = {
    .open = xrt_open,
    .close = npu_close,
    .device = npu_device,
    .begin = npu_begin,
    .embed = npu_embed,
    .rmsnorm = npu_rmsnorm,
    .matmul = npu_matmul,
    .qk_rope = npu_qk_rope,
    .kv_store = npu_kv_store,
    .attention = npu_attention,
    .swiglu = npu_swiglu,
    .add = npu_add,
    .logits = npu_logits,
    .kv_copy = npu_kv_copy,
    .pool = npu_pool,
};
#endif
