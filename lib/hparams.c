/*
 * hparams.c — the hyper-parameters a forward pass needs, read from GGUF metadata.
 *
 * Keys are "<arch>.<name>" (llama.embedding_length, qwen3.attention.head_count, ...). Missing
 * optional keys get the defaults the architectures define (rope base 10000, head_dim =
 * n_embd / n_head, rotary dims = head_dim). Architectures without a forward pass in 1b are
 * still described, with supported = false, so that 1b-load can report any model.
 */
#include <stdlib.h>
#include <string.h>

#include "1b.h"

static const struct { const char *name; int id; } archs[] = {
    {"llama", OB_ARCH_LLAMA}, {"qwen2", OB_ARCH_QWEN2}, {"qwen3", OB_ARCH_QWEN3},
};

const char *ob_rope_name(int rope)
{
    return rope == OB_ROPE_NEOX ? "neox" : "norm";
}

/* u32 "<arch>.<key>"; *out unchanged when absent and !required */
static int arch_u32(const struct ob_gguf *g, const char *arch, const char *key, bool required,
                    uint32_t *out)
{
    char k[128];
    snprintf(k, sizeof k, "%s.%s", arch, key);
    int e = ob_gguf_get_u32(g, k, out);
    if (e == OB_ENOTFOUND && !required)
        return 0;
    return e;
}

static int arch_f32(const struct ob_gguf *g, const char *arch, const char *key, float *out)
{
    char k[128];
    snprintf(k, sizeof k, "%s.%s", arch, key);
    int e = ob_gguf_get_f32(g, k, out);
    return e == OB_ENOTFOUND ? 0 : e;
}

int ob_hparams_read(const struct ob_gguf *g, struct ob_hparams *hp)
{
    memset(hp, 0, sizeof *hp);
    const struct ob_gguf_value *a = ob_gguf_get(g, "general.architecture");
    if (!a)
        return ob_seterr(OB_EFORMAT, "metadata key 'general.architecture' is missing");
    if (a->type != OB_GGUF_STRING || a->str.len == 0 || a->str.len >= sizeof hp->arch ||
        memchr(a->str.ptr, 0, a->str.len))
        return ob_seterr(OB_EFORMAT, "general.architecture is not a short string");
    memcpy(hp->arch, a->str.ptr, a->str.len);
    hp->arch_id = OB_ARCH_UNKNOWN;
    for (size_t i = 0; i < sizeof archs / sizeof archs[0]; i++)
        if (strcmp(hp->arch, archs[i].name) == 0)
            hp->arch_id = archs[i].id;
    hp->supported = hp->arch_id != OB_ARCH_UNKNOWN;
    bool req = hp->supported;
    const char *ar = hp->arch;
    int e;
    if ((e = arch_u32(g, ar, "embedding_length", req, &hp->n_embd)) ||
        (e = arch_u32(g, ar, "block_count", req, &hp->n_layer)) ||
        (e = arch_u32(g, ar, "attention.head_count", req, &hp->n_head)) ||
        (e = arch_u32(g, ar, "feed_forward_length", req, &hp->n_ff)) ||
        (e = arch_u32(g, ar, "context_length", false, &hp->n_ctx_train)))
        return e;
    hp->n_head_kv = hp->n_head;
    if ((e = arch_u32(g, ar, "attention.head_count_kv", false, &hp->n_head_kv)))
        return e;
    hp->head_dim = hp->n_head ? hp->n_embd / hp->n_head : 0;
    if ((e = arch_u32(g, ar, "attention.key_length", false, &hp->head_dim)))
        return e;
    hp->head_dim_v = hp->head_dim;
    if ((e = arch_u32(g, ar, "attention.value_length", false, &hp->head_dim_v)))
        return e;
    hp->n_rot = hp->head_dim;
    if ((e = arch_u32(g, ar, "rope.dimension_count", false, &hp->n_rot)))
        return e;
    hp->rms_eps = 1e-5f;
    hp->rope_base = 10000.0f;
    if ((e = arch_f32(g, ar, "attention.layer_norm_rms_epsilon", &hp->rms_eps)) ||
        (e = arch_f32(g, ar, "rope.freq_base", &hp->rope_base)))
        return e;
    /* vocabulary: explicit key, else the token list, else the embedding matrix */
    const struct ob_gguf_value *toks = ob_gguf_get(g, "tokenizer.ggml.tokens");
    if (toks && toks->type == OB_GGUF_ARRAY)
        hp->n_vocab = toks->arr.n > UINT32_MAX ? UINT32_MAX : (uint32_t)toks->arr.n;
    if ((e = arch_u32(g, ar, "vocab_size", false, &hp->n_vocab)))
        return e;
    const struct ob_gguf_tensor *emb = ob_gguf_tensor(g, "token_embd.weight");
    if (!hp->n_vocab && emb && emb->n_dims == 2)
        hp->n_vocab = emb->ne[1] > UINT32_MAX ? UINT32_MAX : (uint32_t)emb->ne[1];

    hp->rope_type = hp->arch_id == OB_ARCH_LLAMA ? OB_ROPE_NORM : OB_ROPE_NEOX;
    hp->tied_output = ob_gguf_tensor(g, "output.weight") == NULL;
    hp->qk_norm = ob_gguf_tensor(g, "blk.0.attn_q_norm.weight") != NULL;
    hp->attn_bias = ob_gguf_tensor(g, "blk.0.attn_q.bias") != NULL;

    if (!hp->supported)
        return 0;
    /* shape sanity for architectures we run */
    if (!hp->n_embd || !hp->n_layer || !hp->n_head || !hp->n_head_kv || !hp->head_dim ||
        !hp->n_ff || !hp->n_vocab)
        return ob_seterr(OB_EFORMAT, "%s: a dimension is zero (embd %u, layers %u, heads %u/%u, "
                         "head_dim %u, ffn %u, vocab %u)", ar, hp->n_embd, hp->n_layer,
                         hp->n_head, hp->n_head_kv, hp->head_dim, hp->n_ff, hp->n_vocab);
    if (hp->n_head % hp->n_head_kv)
        return ob_seterr(OB_EFORMAT, "%s: %u heads is not a multiple of %u kv heads", ar,
                         hp->n_head, hp->n_head_kv);
    if (hp->n_rot > hp->head_dim || hp->n_rot % 2)
        return ob_seterr(OB_EFORMAT, "%s: rope dimension %u must be even and at most head_dim %u",
                         ar, hp->n_rot, hp->head_dim);
    if (hp->head_dim > 256)
        return ob_seterr(OB_EUNSUPP, "%s: head dimension %u is above 256", ar, hp->head_dim);
    if (hp->head_dim_v != hp->head_dim)
        return ob_seterr(OB_EUNSUPP, "%s: key length %u differs from value length %u", ar,
                         hp->head_dim, hp->head_dim_v);
    if (!(hp->rms_eps > 0.0f) || !(hp->rope_base > 0.0f))
        return ob_seterr(OB_EFORMAT, "%s: rms epsilon and rope base must be positive", ar);
    if (hp->n_embd > (1u << 20) || hp->n_layer > 4096 || hp->head_dim > 4096 ||
        hp->n_ff > (1u << 22) || hp->n_head > 4096)
        return ob_seterr(OB_EFORMAT, "%s: implausible dimensions", ar);
    return 0;
}

uint64_t ob_hparams_kv_bytes(const struct ob_hparams *hp, uint64_t n_ctx)
{
    /* K and V per layer, per kv head, per position: f16 (2 bytes) each */
    return 2ull * hp->n_layer * hp->n_head_kv * hp->head_dim * n_ctx * 2ull;
}
