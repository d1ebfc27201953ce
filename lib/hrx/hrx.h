/*
 * hrx.h — what the host side of the hrx routes (backend-hrx.c, C) calls: a runtime table per
 * target (device memory, copies, a queue) and the launchers of the kernels (*.hip). Internal to
 * lib/; included by C and by the C++ of the kernel files.
 *
 * Targets: hrx-sim (always built: sim.cc runs the kernel sources on host threads; memory is
 * host memory), and the GPU builds, CUDA (make CUDA=1, nvcc) and HIP (make HIP=1, hipcc), from
 * the same kernel sources through shim.h. Each target defines one `struct ob_hrx_rt`:
 * ob_hrx_sim_rt, ob_hrx_cuda_rt, ob_hrx_hip_rt.
 *
 * Pointers handed to a launcher are device pointers of the queue's device (on hrx-sim, any host
 * pointer). A launcher queues its kernel and returns 0, or an OB_E* code with the message set:
 * a GPU error, or on hrx-sim a kernel bug the executor found (a barrier or a shuffle that not
 * every thread reached). GPU launches are asynchronous: results are there after rt->sync or a
 * copy back.
 *
 * Every kernel is bitwise equal to the cpu route's arithmetic (lib/arith/): each file's header
 * names the function it reproduces; tests/unit/hrx.c compares them on random inputs.
 *
 * Thread safety: one queue, one caller thread at a time.
 */
#ifndef OB_HRX_H
#define OB_HRX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "1b.h"

#ifdef __cplusplus
extern "C" {
#endif

#define OB_WARP 32                 /* lanes of a warp, on every target (shim.h) */
/* floats of a queue's workspace (16 MiB): the partials of a product split over the classes of
 * its blocks (mm.hip's k_gm_q) */
#define OB_HRX_WS_FLOATS ((size_t)4 << 20)
/* a queue's arrival counters (unsigned, zero between launches): the last block of a launch to
 * finish a group of its results does what needs the whole group (struct ob_hrx_then) */
#define OB_HRX_CTRS 4096

struct ob_hrx_q;                   /* a queue: a GPU stream on one device, or hrx-sim's threads */

/* A weight matrix as the kernels read it: n rows of k values of GGUF type `type` (the file's
 * block layout), rows row_bytes apart, in device memory. */
struct ob_hrx_mat {
    uint32_t type;
    int n, k;
    size_t row_bytes;
    const void *data;
};

/* Activation formats of the integer dot products (types.h's enum ob_actfmt, same
 * numbers): float rows, Q8_K blocks (K-quant weights), A8 blocks (32-value formats). */
enum { OB_HRX_ACT_F32 = 0, OB_HRX_ACT_Q8K = 1, OB_HRX_ACT_A8 = 2 };

/* What a matmul does with its result v (after the bias): store it (y = v), or fold the next op
 * in: the residual add y = y + v (ob_add_f32), or the gated unit with y holding the gate's
 * product: y = ob_silu(y) * v (swiglu), y = ob_gelu(y) * v (geglu). */
enum { OB_HRX_EPI_STORE = 0, OB_HRX_EPI_ADD = 1, OB_HRX_EPI_SILU = 2, OB_HRX_EPI_GELU = 3 };

/* Up to 3 matrices that read the same activation rows in one launch (matmul_multi): matrix j
 * of w[0 .. count) gives y[j][r * ldy[j] + i] (+ b[j][i] when b[j]). Q, K and V of a layer;
 * or gate (w[0]) and up (w[1]) folded into the gated unit, y[0] = act(gate) * up. */
#define OB_HRX_MULTI 3
struct ob_hrx_multi {
    int count;
    struct ob_hrx_mat w[OB_HRX_MULTI];
    const float *b[OB_HRX_MULTI];
    float *y[OB_HRX_MULTI];
    size_t ldy[OB_HRX_MULTI];
};

/* Per-head q/k norm and RoPE of one layer (ob_rmsnorm over head_dim values, then ob_rope). */
struct ob_hrx_rope {
    int n_head, n_head_kv, hd, n_rot, neox;
    float eps;
    const float *q_norm, *k_norm;  /* [hd] each, or NULL: no q/k norm */
    const float *cs, *sn;          /* [n_ctx][n_rot / 2]: lib/rope.c's tables */
};

/*
 * What a matmul or matmul_multi launch does with its result y once every value of a row (or
 * of a block of 256 columns, or of a head) is there: nothing (then NULL, or op
 * OB_HRX_THEN_NONE); the next layer part's rmsnorm_q of y's rows (OB_HRX_THEN_NORM_Q: ny =
 * rmsnorm of y with weights w and eps, quantised in format fmt into xq, rows stride bytes
 * apart; the product's epilogue is OB_HRX_EPI_ADD and y's rows are w.n values); actq of y's
 * rows (OB_HRX_THEN_ACTQ: the gated unit's GATE, in format fmt into xq); or rope_kv's work on
 * the heads a matmul_multi (epi STORE) made (OB_HRX_THEN_ROPE_KV: matrix j's n rows are the
 * heads of role[j], 0 q, 1 k, 2 v; q's heads normalised and rotated in place, k's into kc, v's
 * converted into vc, at pos[i] of slot seq[i], as rope_kv does). The bits of the launches one
 * after the other; on a GPU at up to 15 rows (16 for matmul_multi) one launch, the block that
 * arrives last (ob_last_block) doing it. xq must not be the launch's own activation rows:
 * other blocks may still be reading them.
 */
enum { OB_HRX_THEN_NONE = 0, OB_HRX_THEN_NORM_Q = 1, OB_HRX_THEN_ACTQ = 2,
       OB_HRX_THEN_ROPE_KV = 3 };
struct ob_hrx_then {
    int op;
    const float *w;                /* NORM_Q: the norm's weights */
    float eps;
    float *ny;                     /* NORM_Q: the normalised rows */
    int fmt;                       /* OB_HRX_ACT_Q8K or OB_HRX_ACT_A8 */
    void *xq;
    size_t stride;
    struct ob_hrx_rope r;          /* ROPE_KV */
    int role[OB_HRX_MULTI];
    const int32_t *pos, *seq;
    int n_ctx;
    uint16_t *kc, *vc;
};

/* Attention shapes (ob_attn_head per query head; kv head = head / (n_head / n_head_kv)). */
struct ob_hrx_attn {
    int n_head, n_head_kv, hd, n_ctx;
    float scale;                   /* ob_attn_scale(hp.attn_scale_dim) */
    int window;                    /* a sliding-window layer's hp.n_swa, 0: every key from 0 */
    int whole;                     /* on a GPU: a block a (head, row) for all its keys, not the
                                    * keys split over blocks (OB_HRX_ATT_SPLIT=0) */
    int fold;                      /* attention_q split over blocks: the chunks launch's last
                                    * block of a row combines and quantises it (ob_last_block),
                                    * no third launch (OB_HRX_FUSE=3) */
};

/* Rows of one attention launch, and the floats of scratch it needs: for that many rows, every
 * query head's scores (n_ctx each) and, per chunk of 64 positions, the chunk's maximum, l_c
 * and o_c[0..hd) (the split kernels, attn.hip). */
#define OB_HRX_ATT_ROWS 16
static inline size_t ob_hrx_attn_scratch(const struct ob_hrx_attn *a)
{
    size_t chunks = ((size_t)a->n_ctx + 63) / 64;
    return (size_t)OB_HRX_ATT_ROWS * (size_t)a->n_head *
           ((size_t)a->n_ctx + chunks * (2 + (size_t)a->hd));
}

/*
 * The launchers, one list (X(name, parameters)) from which the table below and each target's
 * prototypes are written, so that they cannot disagree. Buffers are row-major floats.
 *   embed      x[i][0..w.k) = row tok[i] of w, dequantised (lib/arith/dequant.h), then
 *              times scale by ob_scale_f32 unless scale is 0 (gemma3: ob_embd_scale)
 *   rmsnorm    y[j] = ob_rmsnorm(x[rows[j]], w) over k values (rows NULL: row j), j < n
 *   actq       row i of xq (stride bytes apart) = x row i (k values) in format fmt:
 *              ob_quantize_q8k, ob_quantize_a8, or the floats (OB_HRX_ACT_*)
 *   rmsnorm_q  rmsnorm (rows NULL) into y, then actq of y into xq: one launch on a GPU
 *   matmul     y[r * ldy + i] = dot(w row i, xq row r) (+ b[i] when b), r < n, i < w.n
 *              (lib/arith/dot.h: ob_dot_<type>), or that value folded into y by epi
 *              (OB_HRX_EPI_*); then what `then` says (NULL: nothing), above
 *   matmul_multi  matmul of each matrix of m (epi OB_HRX_EPI_STORE), the bits of a matmul
 *              launch each, in one launch on a GPU where the matrices share type and k (a warp
 *              a weight row, the row picking its matrix); or, epi OB_HRX_EPI_SILU / GELU with
 *              count 2, y[0][r * ldy[0] + i] = act(gate + b[0]) * (up + b[1]): the bits of
 *              matmul(gate, STORE) into y[0] then matmul(up, epi) into y[0], in one launch
 *              where gate and up share type, n and k (y[1] unused). Elsewhere (hrx-sim's own
 *              tiles, float weights, more than 16 rows, mixed types) it makes those matmul
 *              launches itself. Then what `then` says: ACTQ of y[0] for the gated unit,
 *              ROPE_KV for the stored products (NULL: nothing)
 *   qk_rope    each head of Q (n_head * hd per row) and K (n_head_kv * hd): q/k norm, then
 *              RoPE at pos[i]
 *   kv_store   kc/vc[(seq[i] * n_ctx + pos[i]) * kvw ..] = fp16 of K/V row i (ob_kv_put)
 *   rope_kv    qk_rope of Q in place, and of K into kc (K itself unchanged) with V's rows
 *              into vc as kv_store does (kvw = n_head_kv * hd): one launch
 *   attention  out row i, head h = ob_attn_head(Q row i head h, slot seq[i]'s keys and values
 *              at positions ob_attn_first_key(pos[i], a.window)..pos[i]); scratch holds
 *              ob_hrx_attn_scratch(&a) floats
 *   attention_q  attention, then actq of its rows (n_head * hd values) in format fmt into
 *              xq: one launch fewer on a GPU
 *   swiglu     g[i] = ob_silu(g[i]) * u[i]
 *   geglu      g[i] = ob_gelu(g[i]) * u[i] (ob_geglu)
 *   add        y[i] = y[i] + x[i]
 */
#define OB_HRX_KERNELS(X)                                                                   \
    X(embed, (struct ob_hrx_q *q, struct ob_hrx_mat w, const int32_t *tok, int n, float scale, \
              float *x))                                                                     \
    X(rmsnorm, (struct ob_hrx_q *q, const float *x, const int32_t *rows, int n, int k,        \
                const float *w, float eps, float *y))                                        \
    X(actq, (struct ob_hrx_q *q, int fmt, const float *x, int n, int k, void *xq,            \
             size_t stride))                                                                 \
    X(rmsnorm_q, (struct ob_hrx_q *q, const float *x, int n, int k, const float *w, float eps,  \
                  float *y, int fmt, void *xq, size_t stride))                               \
    X(matmul, (struct ob_hrx_q *q, struct ob_hrx_mat w, const void *xq, size_t stride, int n, \
               const float *b, float *y, size_t ldy, int epi, const struct ob_hrx_then *then)) \
    X(matmul_multi, (struct ob_hrx_q *q, struct ob_hrx_multi m, const void *xq,              \
                     size_t stride, int n, int epi, const struct ob_hrx_then *then))         \
    X(qk_rope, (struct ob_hrx_q *q, struct ob_hrx_rope r, float *Q, float *K,                \
                const int32_t *pos, int n))                                                  \
    X(kv_store, (struct ob_hrx_q *q, const float *K, const float *V, int kvw,                \
                 const int32_t *pos, const int32_t *seq, int n, int n_ctx, uint16_t *kc,     \
                 uint16_t *vc))                                                              \
    X(rope_kv, (struct ob_hrx_q *q, struct ob_hrx_rope r, float *Q, const float *K,          \
                const float *V, const int32_t *pos, const int32_t *seq, int n, int n_ctx,    \
                uint16_t *kc, uint16_t *vc))                                                 \
    X(attention, (struct ob_hrx_q *q, struct ob_hrx_attn a, const float *Q,                  \
                  const uint16_t *kc, const uint16_t *vc, const int32_t *pos,                \
                  const int32_t *seq, int n, float *out, float *scratch))                    \
    X(attention_q, (struct ob_hrx_q *q, struct ob_hrx_attn a, const float *Q,                \
                    const uint16_t *kc, const uint16_t *vc, const int32_t *pos,              \
                    const int32_t *seq, int n, float *out, float *scratch, int fmt, void *xq, \
                    size_t stride))                                                          \
    X(swiglu, (struct ob_hrx_q *q, float *g, const float *u, size_t n))                      \
    X(geglu, (struct ob_hrx_q *q, float *g, const float *u, size_t n))                       \
    X(add, (struct ob_hrx_q *q, float *y, const float *x, size_t n))

#define OB_HRX_FIELD(name, params) int(*name) params;
struct ob_hrx_kernels {
    OB_HRX_KERNELS(OB_HRX_FIELD)
};
#undef OB_HRX_FIELD

/* What a device is. */
struct ob_hrx_devinfo {
    char name[64];                 /* "NVIDIA H200", "hrx-sim on x86-64 (2 threads)" */
    uint64_t mem_bytes;            /* its memory */
    uint64_t free_bytes;           /* of which free now (0: unknown) */
};

/* The runtime of one target. */
struct ob_hrx_rt {
    const char *api;               /* "cuda", "hip", "sim" */
    /* devices of this kind on the machine: >= 0, or OB_EDEVICE with the reason */
    int (*count)(void);
    int (*info)(int index, struct ob_hrx_devinfo *out);
    /* a queue on device `index`; hrx-sim runs its blocks on n_threads host threads */
    int (*open)(int index, int n_threads, struct ob_hrx_q **out);
    void (*close)(struct ob_hrx_q *q);
    int (*alloc)(struct ob_hrx_q *q, size_t bytes, void **out);   /* OB_ENOMEM when full */
    void (*free)(struct ob_hrx_q *q, void *p);
    /* copies in queue order; d2h returns when the bytes are on the host */
    int (*h2d)(struct ob_hrx_q *q, void *dst, const void *src, size_t bytes);
    int (*d2h)(struct ob_hrx_q *q, void *dst, const void *src, size_t bytes);
    int (*d2d)(struct ob_hrx_q *q, void *dst, const void *src, size_t bytes);
    int (*sync)(struct ob_hrx_q *q);
    /* Graphs (NULL where the target has none): between graph_begin and graph_end the
     * launches on q are recorded, not run (no copy or sync may come between); graph_end
     * gives an executable graph of them, graph_launch runs it in queue order (its launches
     * with the arguments they were recorded with), graph_free frees it. */
    int (*graph_begin)(struct ob_hrx_q *q);
    int (*graph_end)(struct ob_hrx_q *q, void **graph);
    int (*graph_launch)(struct ob_hrx_q *q, void *graph);
    void (*graph_free)(struct ob_hrx_q *q, void *graph);
    /* device memory is host memory: weights are read in place from the mapped model */
    bool host_memory;
    const struct ob_hrx_kernels *k;
    /* host memory the device copies to and from at full speed (page-locked): the logits'
     * (NULL where plain memory is as fast: hrx-sim); OB_ENOMEM when there is none */
    int (*host_alloc)(struct ob_hrx_q *q, size_t bytes, void **out);
    void (*host_free)(struct ob_hrx_q *q, void *p);
};

/* each target's runtime and kernel table (the GPU ones only in builds with CUDA=1 / HIP=1) */
extern const struct ob_hrx_rt ob_hrx_sim_rt;
extern const struct ob_hrx_kernels ob_hrx_sim_kernels, ob_hrx_cuda_kernels, ob_hrx_hip_kernels;

/* ---- the host side (backend-hrx.c), for the route registry (route.c) ---- */

struct ob_model;
struct ob_device_info;
struct ob_device_opts;
/* a GPU runtime (CUDA or HIP) is linked into this binary */
bool ob_hrx_gpu_linked(void);
/* the device hrx (sim false) or hrx-sim would run on: 0 and *info, or OB_EDEVICE */
int ob_hrx_probe(bool sim, const struct ob_device_opts *d, struct ob_device_info *info);
/* the weight types the kernels take: those of the cpu route */
bool ob_hrx_type_supported(uint32_t type);
/* device bytes of the model's weights on a GPU */
uint64_t ob_hrx_weight_bytes(const struct ob_model *m);

/* the launchers of each target, under their target's names */
#define OB_HRX_DECL(prefix, name, params) int ob_hrx_##prefix##_##name params;
#define OB_HRX_DECL_SIM(name, params) OB_HRX_DECL(sim, name, params)
#define OB_HRX_DECL_CUDA(name, params) OB_HRX_DECL(cuda, name, params)
#define OB_HRX_DECL_HIP(name, params) OB_HRX_DECL(hip, name, params)
OB_HRX_KERNELS(OB_HRX_DECL_SIM)
OB_HRX_KERNELS(OB_HRX_DECL_CUDA)
OB_HRX_KERNELS(OB_HRX_DECL_HIP)

#ifdef __cplusplus
}
#endif

#endif
