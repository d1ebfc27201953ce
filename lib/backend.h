/*
 * backend.h — the interface between the forward pass (forward.c, written once) and the routes
 * that execute it (backend-cpu.c, backend-ref.c; hrx and npu later). Internal to lib/.
 *
 * A backend instance owns its activation buffers and the KV cache of a fixed number of
 * sequence slots, each holding up to n_ctx positions. The forward pass calls the ops below for
 * one batch of token rows; every op works on rows [0, n) of the named buffers. Rows may belong
 * to different sequences (seq[i]) at arbitrary absolute positions (pos[i]); an op's result for
 * a row depends only on that row's inputs (and, for attention, on its sequence's cache at
 * positions <= pos[i]) — never on the other rows, the batch size or the thread count. That is
 * the whole contract a backend must keep for the determinism tests to pass.
 *
 * Buffers (floats, or doubles on the ref route; the layout is the backend's):
 *   X     [n, n_embd]            the residual stream
 *   XN    [n, n_embd]            normalised input of a matmul
 *   Q     [n, n_head * hd]       queries (after qk_rope: normalised and rotated)
 *   K, V  [n, n_head_kv * hd]    keys and values of the batch's rows
 *   ATT   [n, n_head * hd]       attention output
 *   GATE, UP [n, n_ff]           feed-forward; GATE holds silu(GATE) * UP after swiglu
 *   OUT   [n, n_embd]            output of attn_output / ffn_down, added into X
 */
#ifndef OB_BACKEND_H
#define OB_BACKEND_H

#include "model.h"

enum ob_buf { OB_BX, OB_BXN, OB_BQ, OB_BK, OB_BV, OB_BATT, OB_BGATE, OB_BUP, OB_BOUT, OB_BCOUNT };

/* weights by role; layer-level ones are addressed with a layer index */
enum ob_wrole {
    OB_W_ATTN_NORM, OB_W_FFN_NORM, OB_W_Q, OB_W_K, OB_W_V, OB_W_O, OB_W_GATE, OB_W_UP,
    OB_W_DOWN,
};

struct ob_be_params {
    int n_slots;                   /* sequences with a KV cache */
    int n_ctx;                     /* positions per slot */
    int max_rows;                  /* most token rows in one batch */
    int n_threads;
    int isa;                       /* cpu: the SIMD level (ob_isa_select) */
};

struct ob_be;                      /* a backend instance */

struct ob_be_ops {
    const char *name;
    int (*open)(const struct ob_model *m, const struct ob_be_params *p, struct ob_be **out);
    void (*close)(struct ob_be *be);
    /* X[i] = embedding row of tok[i] */
    int (*embed)(struct ob_be *be, const int32_t *tok, int n);
    /* dst = rmsnorm(src) * the role's norm vector of layer l */
    int (*rmsnorm)(struct ob_be *be, int l, int role, int src, int dst, int n);
    /* dst = W src (+ bias when the layer has one); role selects W in layer l */
    int (*matmul)(struct ob_be *be, int l, int role, int src, int dst, int n);
    /* per-head q/k norm (when the model has it), then RoPE at pos[i], on Q and K */
    int (*qk_rope)(struct ob_be *be, int l, const int32_t *pos, int n);
    /* K[i], V[i] into the cache of slot seq[i] at position pos[i] */
    int (*kv_store)(struct ob_be *be, int l, const int32_t *seq, const int32_t *pos, int n);
    /* ATT[i] = attention of Q[i] over slot seq[i]'s cache at positions [0, pos[i]] */
    int (*attention)(struct ob_be *be, int l, const int32_t *seq, const int32_t *pos, int n);
    /* GATE = silu(GATE) * UP */
    int (*swiglu)(struct ob_be *be, int n);
    /* dst += src */
    int (*add)(struct ob_be *be, int dst, int src, int n);
    /* final norm and output projection of the rows listed (nrows <= max_rows): out32[j *
     * n_vocab ..] for row rows[j]; out64 (may be NULL) gets the same in float64 where the
     * route computes in it */
    int (*logits)(struct ob_be *be, const int32_t *rows, int nrows, float *out32, double *out64);
    /* copy positions [0, n_pos) of every layer's cache from slot src to slot dst */
    int (*kv_copy)(struct ob_be *be, int dst, int src, int n_pos);
};

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

static inline const float *ob_layer_bias(const struct ob_model *m, int l, int role)
{
    const struct ob_layer *L = &m->layers[l];
    return role == OB_W_Q ? L->bq : role == OB_W_K ? L->bk : role == OB_W_V ? L->bv : NULL;
}

extern const struct ob_be_ops ob_be_cpu;
extern const struct ob_be_ops ob_be_ref;

/* RoPE tables: cs/sn [n_ctx][n_rot/2], cos and sin of pos * base^(-2i/n_rot), computed in
 * float64 and rounded once to float (shared by every route). */
int ob_rope_tables(const struct ob_hparams *hp, int n_ctx, float **cs, float **sn);

#endif
