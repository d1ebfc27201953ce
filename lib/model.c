/*
 * model.c — open a model for inference: resolve archives, map the GGUF, read the
 * hyper-parameters and the tokenizer, find and check every tensor the architecture needs.
 *
 * Tensor names and shapes (ne[0] is the row length, the input width of a matrix):
 *   token_embd.weight [n_embd, n_vocab]      output.weight [n_embd, n_vocab] (absent: tied)
 *   output_norm.weight [n_embd]
 *   blk.L.attn_norm.weight [n_embd]          blk.L.ffn_norm.weight [n_embd]
 *   blk.L.attn_q.weight [n_embd, n_head*hd]  blk.L.attn_k/v.weight [n_embd, n_head_kv*hd]
 *   blk.L.attn_output.weight [n_head*hd, n_embd]
 *   blk.L.attn_q_norm/k_norm.weight [hd] (qwen3, gemma3)   blk.L.attn_q/k/v.bias (qwen2)
 *   blk.L.post_attention_norm.weight, blk.L.post_ffw_norm.weight [n_embd] (gemma3)
 *   blk.L.ffn_gate/up.weight [n_embd, n_ff]  blk.L.ffn_down.weight [n_ff, n_embd]
 *
 * A Q4NX pack (lib/npu/pack.c) opens into the same struct: its meta GGUF gives the metadata,
 * tokenizer and vectors, its weights file every matrix (token_embd and output too) as Q4NX
 * tiles; the npu routes multiply those, the ref route dequantises them.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "quant.h"
#include "chat.h"
#include "model.h"
#include "sb.h"

static int tensor(const struct ob_model *m, const char *name, const struct ob_gguf_tensor **out)
{
    const struct ob_gguf_tensor *t = ob_gguf_tensor(m->g, name);
    if (!t)
        return ob_seterr(OB_EFORMAT, "tensor '%s' is missing", name);
    *out = t;
    return 0;
}

/* A vector of n values as float32: in place when the file stores F32, else converted. */
static int vector(struct ob_model *m, const char *name, uint64_t n, bool optional,
                  const float **out)
{
    const struct ob_gguf_tensor *t = ob_gguf_tensor(m->g, name);
    *out = NULL;
    if (!t)
        return optional ? 0 : ob_seterr(OB_EFORMAT, "tensor '%s' is missing", name);
    if (t->ne[0] != n || t->ne[1] * t->ne[2] * t->ne[3] != 1)
        return ob_seterr(OB_EFORMAT, "tensor '%s' has shape [%llu, %llu], expected [%llu]", name,
                         (unsigned long long)t->ne[0], (unsigned long long)t->ne[1],
                         (unsigned long long)n);
    if (t->type == OB_F32) {
        *out = t->data;
        return 0;
    }
    float *v = malloc(n * sizeof *v);
    if (!v || !OB_GROW(m->owned, m->cap_owned, m->n_owned + 1)) {
        free(v);
        return ob_seterr(OB_ENOMEM, "out of memory");
    }
    m->owned[m->n_owned++] = v;
    int e = ob_dequant_row(t->type, t->data, v, (int64_t)n);
    if (e)
        return ob_errprefix(e, "tensor '%s'", name);
    *out = v;
    return 0;
}

/* A matrix [k, n] of a pack's tiles (any pack tensor is Q4NX with k a multiple of 32). */
static int pack_matrix(const struct ob_model *m, const char *name, uint64_t k, uint64_t n,
                       struct ob_matrix *w)
{
    const struct ob_pack_tensor *t = ob_pack_tensor(m->pack, name);
    if (!t)
        return ob_seterr(OB_EFORMAT, "tensor '%s' is not in the pack's tiles", name);
    if (t->k != k || t->n != n)
        return ob_seterr(OB_EFORMAT, "tensor '%s' has shape [%llu, %llu], expected [%llu, %llu]",
                         name, (unsigned long long)t->k, (unsigned long long)t->n,
                         (unsigned long long)k, (unsigned long long)n);
    *w = (struct ob_matrix){OB_Q4NX, (int)k, (int)n, (size_t)(t->nbytes / n), t->data};
    return 0;
}

/* A weight matrix [k, n] whose type has kernels, with rows that fit its activation format. */
static int matrix(const struct ob_model *m, const char *name, uint64_t k, uint64_t n,
                  struct ob_matrix *w)
{
    if (m->pack)
        return pack_matrix(m, name, k, n, w);
    const struct ob_gguf_tensor *t = NULL;
    int e = tensor(m, name, &t);
    if (e)
        return e;
    if (t->ne[0] != k || t->ne[1] != n || t->ne[2] != 1 || t->ne[3] != 1)
        return ob_seterr(OB_EFORMAT, "tensor '%s' has shape [%llu, %llu], expected [%llu, %llu]",
                         name, (unsigned long long)t->ne[0], (unsigned long long)t->ne[1],
                         (unsigned long long)k, (unsigned long long)n);
    if (!ob_type_supported(t->type))
        return ob_seterr(OB_EUNSUPP, "tensor '%s' has type %s, which the cpu route cannot "
                         "multiply", name, ob_type_name(t->type));
    int align = ob_act_align(ob_type_actfmt(t->type));
    if (k % (uint64_t)align)
        return ob_seterr(OB_EUNSUPP, "tensor '%s': rows of %llu values do not fit %s's "
                         "activation blocks of %d", name, (unsigned long long)k,
                         ob_type_name(t->type), align);
    uint64_t rb;
    ob_type_row_bytes(t->type, k, &rb);
    *w = (struct ob_matrix){t->type, (int)k, (int)n, (size_t)rb, t->data};
    return 0;
}

static int load_weights(struct ob_model *m)
{
    const struct ob_hparams *hp = &m->hp;
    uint64_t E = hp->n_embd, V = hp->n_vocab, F = hp->n_ff, hd = hp->head_dim;
    uint64_t Q = (uint64_t)hp->n_head * hd, KV = (uint64_t)hp->n_head_kv * hd;
    int e;
    if (m->pack) {
        if ((e = pack_matrix(m, "token_embd.weight", E, V, &m->tok_embd)))
            return e;
        if (hp->tied_output)
            m->output = m->tok_embd;
        else if ((e = pack_matrix(m, "output.weight", E, V, &m->output)))
            return e;
        goto norms;
    }
    /* the embedding is looked up by row: any type we can dequantise */
    const struct ob_gguf_tensor *te = NULL;
    if ((e = tensor(m, "token_embd.weight", &te)))
        return e;
    if (te->ne[0] != E || te->ne[1] != V)
        return ob_seterr(OB_EFORMAT, "tensor 'token_embd.weight' has shape [%llu, %llu], "
                         "expected [%llu, %llu]", (unsigned long long)te->ne[0],
                         (unsigned long long)te->ne[1], (unsigned long long)E,
                         (unsigned long long)V);
    if (!ob_dequant_supported(te->type))
        return ob_seterr(OB_EUNSUPP, "tensor 'token_embd.weight' has type %s, which cannot be "
                         "read", ob_type_name(te->type));
    uint64_t rb;
    ob_type_row_bytes(te->type, E, &rb);
    m->tok_embd = (struct ob_matrix){te->type, (int)E, (int)V, (size_t)rb, te->data};
    if (hp->tied_output) {
        m->output = m->tok_embd;
        if (!ob_type_supported(te->type) || E % (uint64_t)ob_act_align(ob_type_actfmt(te->type)))
            return ob_seterr(OB_EUNSUPP, "tied output: token_embd.weight (%s) cannot be "
                             "multiplied", ob_type_name(te->type));
    } else if ((e = matrix(m, "output.weight", E, V, &m->output))) {
        return e;
    }
norms:
    if ((e = vector(m, "output_norm.weight", E, false, &m->output_norm)))
        return e;
    m->layers = calloc(hp->n_layer, sizeof *m->layers);
    if (!m->layers)
        return ob_seterr(OB_ENOMEM, "out of memory");
    for (uint32_t l = 0; l < hp->n_layer; l++) {
        struct ob_layer *L = &m->layers[l];
        char n[96];
#define NAME(s) (snprintf(n, sizeof n, "blk.%u." s, l), n)
        if ((e = vector(m, NAME("attn_norm.weight"), E, false, &L->attn_norm)) ||
            (e = vector(m, NAME("ffn_norm.weight"), E, false, &L->ffn_norm)) ||
            (e = matrix(m, NAME("attn_q.weight"), E, Q, &L->wq)) ||
            (e = matrix(m, NAME("attn_k.weight"), E, KV, &L->wk)) ||
            (e = matrix(m, NAME("attn_v.weight"), E, KV, &L->wv)) ||
            (e = matrix(m, NAME("attn_output.weight"), Q, E, &L->wo)) ||
            (e = matrix(m, NAME("ffn_gate.weight"), E, F, &L->w_gate)) ||
            (e = matrix(m, NAME("ffn_up.weight"), E, F, &L->w_up)) ||
            (e = matrix(m, NAME("ffn_down.weight"), F, E, &L->w_down)) ||
            (e = vector(m, NAME("attn_q_norm.weight"), hd, !hp->qk_norm, &L->q_norm)) ||
            (e = vector(m, NAME("attn_k_norm.weight"), hd, !hp->qk_norm, &L->k_norm)) ||
            (e = vector(m, NAME("attn_q.bias"), Q, true, &L->bq)) ||
            (e = vector(m, NAME("attn_k.bias"), KV, true, &L->bk)) ||
            (e = vector(m, NAME("attn_v.bias"), KV, true, &L->bv)) ||
            (e = vector(m, NAME("post_attention_norm.weight"), E, !hp->post_norms,
                        &L->post_attn_norm)) ||
            (e = vector(m, NAME("post_ffw_norm.weight"), E, !hp->post_norms, &L->post_ffn_norm)))
            return e;
#undef NAME
        if ((hp->arch_id == OB_ARCH_QWEN3 || hp->arch_id == OB_ARCH_GEMMA3) && !L->q_norm)
            return ob_seterr(OB_EFORMAT, "%s layer %u has no attn_q_norm", hp->arch, l);
    }
    return 0;
}

int ob_model_open(const char *arg, struct ob_model **out)
{
    struct ob_model *m = calloc(1, sizeof *m);
    if (!m)
        return ob_seterr(OB_ENOMEM, "out of memory");
    pthread_mutex_init(&m->sha_mu, NULL);
    int e;
    if (!(m->att = calloc(1, sizeof *m->att))) {
        e = ob_seterr(OB_ENOMEM, "out of memory");
        goto fail;
    }
    pthread_mutex_init(&m->att->mu, NULL);
    if (!(m->arg = strdup(arg))) {
        e = ob_seterr(OB_ENOMEM, "out of memory");
        goto fail;
    }
    if ((e = ob_model_resolve(arg, &m->path)))
        goto fail;
    if (ob_pack_is(m->path)) {
        /* checks the manifest and every tensor's shape against the hyper-parameters */
        if ((e = ob_pack_open(m->path, &m->pack)))
            goto fail;
        m->g = ob_pack_meta(m->pack);
        m->hp = *ob_pack_hparams(m->pack);
    } else if ((e = ob_gguf_open(m->path, &m->g))) {
        goto fail;
    } else {
        e = ob_hparams_read(m->g, &m->hp);
    }
    if (e)
        goto fail_named;
    if (!m->hp.supported) {
        e = ob_seterr(OB_EUNSUPP, "architecture '%s' has no forward pass in 1b (llama, qwen2, "
                      "qwen3, gemma3)", m->hp.arch);
        goto fail_named;
    }
    if ((e = ob_tok_from_gguf(m->g, &m->tok)))
        goto fail_named;
    if (ob_tok_n_vocab(m->tok) > m->hp.n_vocab) {
        e = ob_seterr(OB_EFORMAT, "the tokenizer has %u tokens but the model only %u rows",
                      ob_tok_n_vocab(m->tok), m->hp.n_vocab);
        goto fail_named;
    }
    if ((e = ob_gguf_get_str(m->g, "tokenizer.chat_template", &m->chat_template)) &&
        e != OB_ENOTFOUND)
        goto fail_named;
    /* a gemma3 file without a template: the Gemma 3 turn format (chat.h) */
    if (!m->chat_template && ob_chat_builtin(m->hp.arch) &&
        !(m->chat_template = strdup(ob_chat_builtin(m->hp.arch)))) {
        e = ob_seterr(OB_ENOMEM, "out of memory");
        goto fail_named;
    }
    if ((e = load_weights(m)))
        goto fail_named;
    *out = m;
    return 0;
fail_named:
    ob_errprefix(e, "%s", arg);
fail:
    ob_model_close(m);
    return e;
}

void ob_model_close(struct ob_model *m)
{
    if (!m)
        return;
    for (size_t i = 0; i < m->n_owned; i++)
        free(m->owned[i]);
    free(m->owned);
    free(m->layers);
    free(m->chat_template);
    ob_tok_free(m->tok);
    if (m->pack)
        ob_pack_close(m->pack);        /* with its meta GGUF */
    else
        ob_gguf_close(m->g);
    pthread_mutex_destroy(&m->sha_mu);
    if (m->att) {
        if (m->att->free)
            m->att->free(m->att->p);
        pthread_mutex_destroy(&m->att->mu);
        free(m->att);
    }
    free(m->path);
    free(m->arg);
    free(m);
}

const struct ob_hparams *ob_model_hparams(const struct ob_model *m) { return &m->hp; }
const struct ob_tok *ob_model_tok(const struct ob_model *m) { return m->tok; }
const char *ob_model_chat_template(const struct ob_model *m) { return m->chat_template; }
const char *ob_model_path(const struct ob_model *m) { return m->path; }
const struct ob_gguf *ob_model_gguf(const struct ob_model *m) { return m->g; }

const char *ob_model_name(const struct ob_model *m)
{
    const struct ob_gguf_value *v = ob_gguf_get(m->g, "general.name");
    static _Thread_local char buf[256];
    if (v && v->type == OB_GGUF_STRING) {
        size_t n = v->str.len < sizeof buf - 1 ? v->str.len : sizeof buf - 1;
        memcpy(buf, v->str.ptr, n);
        buf[n] = 0;
        for (size_t i = 0; i < n; i++)
            if (!buf[i])
                buf[i] = ' ';
        return buf;
    }
    const char *s = strrchr(m->arg, '/');
    return s ? s + 1 : m->arg;
}

int ob_model_sha256(struct ob_model *m, const char **out)
{
    int e = 0;
    pthread_mutex_lock(&m->sha_mu);
    if (!m->sha256[0] && m->pack)     /* the manifest's: it holds every file's sha256 */
        memcpy(m->sha256, ob_pack_sha256(m->pack), sizeof m->sha256);
    else if (!m->sha256[0])
        e = ob_sha256_file(m->path, m->sha256);
    pthread_mutex_unlock(&m->sha_mu);
    *out = m->sha256;
    return e;
}
