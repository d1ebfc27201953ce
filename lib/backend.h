/*
 * backend.h — the interface between the forward pass (forward.c, written once) and the routes
 * that execute it, and the route registry (route.c). Internal to lib/.
 *
 * A backend instance owns its activation buffers and the KV cache of a fixed number of
 * sequence slots, each holding up to n_ctx positions. The forward pass runs one batch of token
 * rows at a time: `begin` hands the backend the rows' tokens, positions and sequences once (a
 * device route uploads them once per batch, not once per op), then the ops below work on rows
 * [0, n) of the named buffers. Rows may belong to different sequences at arbitrary absolute
 * positions; an op's result for a row depends only on that row's inputs (and, for attention,
 * on its sequence's cache at positions <= its own) — never on the other rows, the batch size,
 * the thread count or the device. That is the whole contract a backend keeps for the
 * determinism tests to pass; lib/arith/ defines the bits of every operation it computes.
 *
 * Buffers (floats, or doubles on the ref route; the layout is the backend's):
 *   X     [n, n_embd]            the residual stream
 *   XN    [n, n_embd]            normalised input of a matmul
 *   Q     [n, n_head * hd]       queries (after qk_rope: normalised and rotated)
 *   K, V  [n, n_head_kv * hd]    keys and values of the batch's rows
 *   ATT   [n, n_head * hd]       attention output
 *   GATE, UP [n, n_ff]           feed-forward; GATE holds silu(GATE) * UP after swiglu
 *                                (gelu(GATE) * UP after geglu)
 *   OUT   [n, n_embd]            output of attn_output / ffn_down (normalised in place on
 *                                gemma3), added into X
 *
 * Gemma 3 (hp.arch_id OB_ARCH_GEMMA3, see forward.c and hparams.c) changes four ops and adds
 * one; a route implements them all or none, and declares it in its row's `archs`: a gemma3
 * model on a route whose row lacks it is refused (OB_EUNSUPP, ob_route_supports), so a route
 * written before Gemma never computes it wrong. Each float operation is defined in lib/arith/:
 *   embed      X[i] = row * ob_embd_scale(n_embd), by ob_scale_f32, when hp.embd_scale
 *   rmsnorm    roles OB_W_POST_ATTN_NORM and OB_W_POST_FFN_NORM, with src == dst (OUT)
 *   qk_rope    the tables of hp.rope_base_swa on the sliding-window layers
 *              (ob_hparams_layer_swa), of hp.rope_base on the others
 *   attention  on a sliding-window layer, row i sees keys [ob_attn_first_key(pos[i],
 *              hp.n_swa), pos[i]] (ob_attn_head from the first key); scores are scaled by
 *              ob_attn_scale(hp.attn_scale_dim) on every model (= head_dim but on gemma3 27B)
 *   geglu      GATE = ob_geglu(GATE, UP): ob_gelu, the tanh form, computed as a sigmoid
 *
 * How to add a route (the way git's builtin.h says how to add a command):
 *   1. Make a folder lib/NAME/ with backend-NAME.c defining `const struct ob_be_ops
 *      ob_be_NAME` (every op below but `layer`, which is optional, and `geglu`, which Gemma 3
 *      needs) and, if it has a device, a probe function. Kernels get their bits from lib/arith/
 *      and are tested bit for bit against it.
 *   2. Write its row, `const struct ob_route ob_route_NAME` (name, one line about it, ops, the
 *      architectures it runs, probe, supports, weight and KV bytes), in lib/NAME/route-NAME.c,
 *      under the build knob that compiles it (e.g. #ifdef OB_HAVE_HIP); without the knob the
 *      row stays, with ops NULL and the knob's name, so `-d NAME` says how to get it. Add it to
 *      the list in route.c.
 *   3. Add the folder to LIB_DIRS in the Makefile (and its compiler rules, if not cc).
 *   4. Run the contract suite with the route (tests/t5000-contract.sh takes a route list).
 */
#ifndef OB_BACKEND_H
#define OB_BACKEND_H

#include "model.h"
#include "rope.h"                   /* the RoPE tables every route rotates with */

enum ob_buf { OB_BX, OB_BXN, OB_BQ, OB_BK, OB_BV, OB_BATT, OB_BGATE, OB_BUP, OB_BOUT, OB_BCOUNT };

/* weights by role; layer-level ones are addressed with a layer index */
enum ob_wrole {
    OB_W_ATTN_NORM, OB_W_FFN_NORM, OB_W_Q, OB_W_K, OB_W_V, OB_W_O, OB_W_GATE, OB_W_UP,
    OB_W_DOWN, OB_W_POST_ATTN_NORM, OB_W_POST_FFN_NORM,
};

struct ob_be_params {
    int n_slots;                   /* sequences with a KV cache */
    int n_ctx;                     /* positions per slot */
    int max_rows;                  /* most token rows in one batch */
    int n_threads;                 /* host threads the route may use */
    struct ob_device_opts dev;     /* which device, how much of its memory */
};

/* One batch of token rows: row i is token tok[i] of slot seq[i] at position pos[i]. The
 * arrays belong to the caller and stay valid until the next begin. */
struct ob_batch {
    int n;                         /* 1 .. max_rows */
    const int32_t *tok, *pos, *seq;
};

struct ob_be;                      /* a backend instance */

struct ob_be_ops {
    int (*open)(const struct ob_model *m, const struct ob_be_params *p, struct ob_be **out);
    void (*close)(struct ob_be *be);
    /* what the route computes on, for logs and records: "avx512", a GPU's name */
    const char *(*device)(const struct ob_be *be);
    /* the batch the next ops work on */
    int (*begin)(struct ob_be *be, const struct ob_batch *b);
    /* optional (NULL: forward.c calls the ops below in order): the whole of layer l, for a
     * route that fuses ops or replays a captured graph; same bits as the ops */
    int (*layer)(struct ob_be *be, int l);
    /* X[i] = embedding row of tok[i] (times ob_embd_scale(n_embd) when hp.embd_scale) */
    int (*embed)(struct ob_be *be);
    /* dst = rmsnorm(src) * the role's norm vector of layer l (ob_layer_norm); dst may be src */
    int (*rmsnorm)(struct ob_be *be, int l, int role, int src, int dst);
    /* dst = W src (+ bias when the layer has one); role selects W in layer l */
    int (*matmul)(struct ob_be *be, int l, int role, int src, int dst);
    /* per-head q/k norm (when the model has it), then RoPE at pos[i], on Q and K, with the
     * layer's rope base */
    int (*qk_rope)(struct ob_be *be, int l);
    /* K[i], V[i] into the cache of slot seq[i] at position pos[i] */
    int (*kv_store)(struct ob_be *be, int l);
    /* ATT[i] = attention of Q[i] over slot seq[i]'s cache at positions [0, pos[i]], or the
     * sliding window's [ob_attn_first_key(pos[i], hp.n_swa), pos[i]] on a local layer */
    int (*attention)(struct ob_be *be, int l);
    /* GATE = silu(GATE) * UP */
    int (*swiglu)(struct ob_be *be);
    /* GATE = gelu(GATE) * UP (ob_geglu); NULL on a route whose row does not list gemma3 */
    int (*geglu)(struct ob_be *be);
    /* dst += src */
    int (*add)(struct ob_be *be, int dst, int src);
    /* final norm and output projection of the rows listed (nrows <= max_rows): out32[j *
     * n_vocab ..] for row rows[j]; out64 (may be NULL) gets the same in float64 where the
     * route computes in it */
    int (*logits)(struct ob_be *be, const int32_t *rows, int nrows, float *out32, double *out64);
    /* copy positions [0, n_pos) of every layer's cache from slot src to slot dst */
    int (*kv_copy)(struct ob_be *be, int dst, int src, int n_pos);
    /* optional: the route's host thread pool (host/pool.h), idle between the ops' calls: the
     * engine runs its work on a step's rows on it (NULL, or no op: a pool of its own) */
    struct ob_pool *(*pool)(struct ob_be *be);
    /* optional (both or neither): host memory for logits' out32 that the route fills fastest
     * (page-locked where a device copies into it), freed with host_free before close; NULL
     * when out of memory */
    void *(*host_alloc)(struct ob_be *be, size_t bytes);
    void (*host_free)(struct ob_be *be, void *p);
};

/* the pool of a context's backend (the op above), NULL where it has none */
struct ob_pool *ob_ctx_pool(const struct ob_ctx *c);
/* memory for the logits of ob_ctx_forward: the backend's host_alloc, else malloc; freed with
 * ob_ctx_host_free before the context */
void *ob_ctx_host_alloc(struct ob_ctx *c, size_t bytes);
void ob_ctx_host_free(struct ob_ctx *c, void *p);

/* ---- the route registry (route.c) ---------------------------------------------------------- */

/* What a probe found: the device a route would run on and the memory it can use. */
struct ob_device_info {
    char name[64];                 /* "x86-64 avx512", a GPU's name */
    uint64_t mem_bytes;            /* memory for weights and caches (after dev.mem_limit) */
};

/* a set of architectures (enum ob_arch) a route runs */
#define OB_ARCH_BIT(a) (1u << (a))
#define OB_ARCHS_ALL (OB_ARCH_BIT(OB_ARCH_LLAMA) | OB_ARCH_BIT(OB_ARCH_QWEN2) | \
                      OB_ARCH_BIT(OB_ARCH_QWEN3) | OB_ARCH_BIT(OB_ARCH_GEMMA3))

struct ob_route {
    const char *name;              /* what -d takes */
    const char *about;             /* one line */
    const struct ob_be_ops *ops;   /* NULL: not built into this binary */
    bool (*linked)(void);          /* NULL, or whether its runtime is linked in (ops alone do
                                    * not say: hrx's host side is always built) */
    const char *build;             /* when not built in: how to build it in ("make HIP=1") */
    unsigned archs;                /* the architectures it runs (OB_ARCH_BIT); Gemma 3 needs
                                    * the ops geglu and the rest above */
    /* is the device there? 0 and *info, or OB_EDEVICE with a message */
    int (*probe)(const struct ob_device_opts *d, struct ob_device_info *info);
    /* can the route run this model? 0, or OB_EUNSUPP naming what it cannot */
    int (*supports)(const struct ob_model *m);
    /* device memory for the weights (0: they stay in the mapped file, in host memory) */
    uint64_t (*weight_bytes)(const struct ob_model *m);
    /* bytes of KV cache for n_slots x n_ctx positions in the route's cache format */
    uint64_t (*kv_bytes)(const struct ob_model *m, int n_slots, int n_ctx);
};

/* The route named name (NULL: "cpu"): OB_EUSAGE listing the routes when there is none,
 * OB_EDEVICE when it is not built in (saying how to build it) or its device is absent. */
int ob_route_find(const char *name, const struct ob_route **out);

/* Can route r run model m: its architecture, then the row's own check (weight types)?
 * 0, or OB_EUNSUPP naming what it cannot. */
int ob_route_supports(const struct ob_route *r, const struct ob_model *m);

/* What the rows share (route.c): the host's memory as a route's device memory (device index 0
 * only; d->mem_limit caps it); each matrix of m passing ok, else OB_EUNSUPP naming the route
 * and the weight type; no weights on a device; fp16 keys and values. */
int ob_route_host_memory(const struct ob_device_opts *d, struct ob_device_info *info);
/* a host route's probe: the SIMD level it computes at (OB_SIMD, or the best the CPU has)
 * after prefix as its device name, and the host's memory */
int ob_route_host_simd(const struct ob_device_opts *d, struct ob_device_info *info,
                       const char *prefix);
int ob_route_each_matrix(const struct ob_model *m, bool (*ok)(uint32_t), const char *route);
uint64_t ob_route_no_device_weights(const struct ob_model *m);
uint64_t ob_route_kv_fp16(const struct ob_model *m, int n_slots, int n_ctx);

/* ---- the forward pass (forward.c) ---------------------------------------------------------- */

/* Run one batch (b->n <= the backend's max_rows) through every layer, then the logits of rows
 * rows[0..nrows) (indices into the batch, increasing) into out32 (and out64). */
int ob_forward(const struct ob_be_ops *o, struct ob_be *be, const struct ob_model *m,
               const struct ob_batch *b, const int32_t *rows, int nrows, float *out32,
               double *out64);

/* Layer l of that pass as the ops above, one by one: what a route's own `layer` may call for
 * the layers it does not fuse. */
int ob_forward_layer(const struct ob_be_ops *o, struct ob_be *be, const struct ob_hparams *hp,
                     int l);

/* the matrix of a role in layer l, and its bias (NULL when the model has none) */
static inline const struct ob_matrix *ob_layer_matrix(const struct ob_model *m, int l, int role)
{
    const struct ob_layer *L = &m->layers[l];
    switch (role) {
    case OB_W_Q: return &L->wq;
    case OB_W_K: return &L->wk;
    case OB_W_V: return &L->wv;
    case OB_W_O: return &L->wo;
    case OB_W_GATE: return &L->w_gate;
    case OB_W_UP: return &L->w_up;
    case OB_W_DOWN: return &L->w_down;
    }
    return NULL;
}

/* the norm vector of a role in layer l: [n_embd] */
static inline const float *ob_layer_norm(const struct ob_model *m, int l, int role)
{
    const struct ob_layer *L = &m->layers[l];
    switch (role) {
    case OB_W_ATTN_NORM: return L->attn_norm;
    case OB_W_FFN_NORM: return L->ffn_norm;
    case OB_W_POST_ATTN_NORM: return L->post_attn_norm;
    case OB_W_POST_FFN_NORM: return L->post_ffn_norm;
    }
    return NULL;
}

static inline const float *ob_layer_bias(const struct ob_model *m, int l, int role)
{
    const struct ob_layer *L = &m->layers[l];
    return role == OB_W_Q ? L->bq : role == OB_W_K ? L->bk : role == OB_W_V ? L->bv : NULL;
}


#endif
