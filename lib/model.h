/*
 * model.h — a loaded model, as the forward pass and the backends see it (internal to lib/).
 *
 * The weights stay in the mmapped GGUF file: matrices point into it; only small vectors that
 * are not float32 in the file (norm weights, biases) are converted once into owned float32
 * arrays. Shapes are checked at open so that no kernel ever sees an inconsistent tensor. The
 * cpu route reads the matrices from a copy in memory the kernel backs with 2 MB pages
 * (cpu/weights.h ob_model_weights), made once on its first use and kept with the model
 * (struct ob_model_att).
 *
 * A model is immutable after ob_model_open and may be shared by any number of contexts and
 * threads.
 */
#ifndef OB_MODEL_H
#define OB_MODEL_H

#include <pthread.h>
#include <stdint.h>

#include "1b.h"
#include "matrix.h"
#include "tok.h"

/* weights of one transformer block; vectors are float32 [width], NULL when absent */
struct ob_layer {
    const float *attn_norm;        /* [n_embd] */
    const float *ffn_norm;         /* [n_embd] */
    const float *q_norm, *k_norm;  /* [head_dim] (qwen3, gemma3) */
    const float *post_attn_norm;   /* [n_embd] (gemma3) */
    const float *post_ffn_norm;    /* [n_embd] (gemma3) */
    const float *bq, *bk, *bv;     /* [n_head*head_dim], [n_head_kv*head_dim] x2 (qwen2) */
    struct ob_matrix wq;           /* k = n_embd, n = n_head * head_dim */
    struct ob_matrix wk, wv;       /* k = n_embd, n = n_head_kv * head_dim */
    struct ob_matrix wo;           /* k = n_head * head_dim, n = n_embd */
    struct ob_matrix w_gate, w_up; /* k = n_embd, n = n_ff */
    struct ob_matrix w_down;       /* k = n_ff, n = n_embd */
};

struct ob_model {
    char *path;                    /* the GGUF actually mapped (after archive extraction), or
                                      the Q4NX pack's directory */
    char *arg;                     /* the name the caller gave */
    struct ob_gguf *g;             /* the GGUF; a pack's meta.gguf (owned by the pack) */
    struct ob_pack *pack;          /* a Q4NX pack (lib/npu/pack.c): its matrices are tiles in
                                      its weights file; NULL for a GGUF */
    struct ob_hparams hp;
    struct ob_tok *tok;
    char *chat_template;           /* NULL when the file has none */
    struct ob_matrix tok_embd;     /* k = n_embd, n = n_vocab: rows are looked up */
    struct ob_matrix output;       /* = tok_embd when tied */
    const float *output_norm;      /* [n_embd] */
    struct ob_layer *layers;       /* [n_layer] */
    float **owned;                 /* converted vectors, freed on close */
    size_t n_owned, cap_owned;
    char sha256[65];               /* "" until ob_model_sha256 computed it */
    pthread_mutex_t sha_mu;
    struct ob_model_att *att;      /* what a route keeps with the model (never NULL) */
};

/* What a route keeps with a model and shares between its contexts (the cpu route's copy of
 * the weights, cpu/weights.h): p, made on first use under mu, and freed by ob_model_close
 * with free(p). */
struct ob_model_att {
    pthread_mutex_t mu;
    void *p;
    void (*free)(void *p);
};


/* ob_hparams_read over the GGUF's tensors and extra ones that are not in it (a Q4NX pack's
 * tiles: lib/npu/pack.c), as if they were */
int ob_hparams_read_with(const struct ob_gguf *g, const struct ob_gguf_tensor *extra,
                         size_t n_extra, struct ob_hparams *hp);

/*
 * Scan the first n bytes of a GGUF file that is still being written (an archive member being
 * extracted): parse its header and tensor table and give the file size they imply, from the
 * end of the last tensor's data (min) to that rounded up to general.alignment (max; writers
 * pad after the last tensor or not). On failure *more tells whether more bytes could help
 * (the header runs past n) or the header is bad whatever follows.
 */
int ob_gguf_scan(const void *prefix, size_t n, uint64_t *min_size, uint64_t *max_size,
                 bool *more);

#endif
