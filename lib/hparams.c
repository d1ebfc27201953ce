/*
 * hparams.c — the hyper-parameters a forward pass needs, read from GGUF metadata, and the
 * checks that make a model file safe to run: every value in its range, every tensor the
 * values imply present with the shape they imply, nothing in the file that 1b would ignore.
 *
 * Keys are "<arch>.<name>" (llama.embedding_length, qwen3.attention.head_count, ...). Missing
 * optional keys get the defaults the architectures define (rope base 10000, head_dim =
 * n_embd / n_head, rotary dims = head_dim). Architectures without a forward pass in 1b are
 * still described, with supported = false, so that 1b-load can report any model; for them
 * only the tokenizer's special-token ids are checked.
 *
 * Every refusal is one line that names the key (or tensor) at fault and its value. What is
 * refused, and why:
 * - a value a kernel cannot take or that makes the arithmetic meaningless: zero or absurd
 *   dimensions, kv heads that do not divide the heads, a head dimension above 256, an odd or
 *   zero rope dimension, an RMS epsilon or rope base that is not finite (or 1e30);
 * - a feature 1b does not implement, which it would otherwise ignore and so compute another
 *   model: rope scaling (rope.scaling.*, rope_freqs.weight), experts, non-causal attention,
 *   value heads that differ from key heads, a tensor no part of the forward pass reads (an output bias, a layer past
 *   block_count), tokenizer.ggml.add_eos_token / add_sep_token;
 * - a special-token id outside the vocabulary (a bos id of 600 in a 512-token vocabulary would
 *   drop BOS from every prompt without a word), or a vocabulary that asks for BOS and has none.
 * Tensor shapes are checked here too, so that 1b-load, which does not build the tokenizer or
 * convert weights, refuses what ob_model_open would.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "1b.h"
#include "model.h"

static const struct { const char *name; int id; } archs[] = {
    {"llama", OB_ARCH_LLAMA}, {"qwen2", OB_ARCH_QWEN2}, {"qwen3", OB_ARCH_QWEN3},
    {"gemma3", OB_ARCH_GEMMA3},
};

const char *ob_arch_name(int arch)
{
    for (size_t i = 0; i < sizeof archs / sizeof archs[0]; i++)
        if (archs[i].id == arch)
            return archs[i].name;
    return "?";
}

const char *ob_rope_name(int rope)
{
    return rope == OB_ROPE_NEOX ? "neox" : "norm";
}

/* "<arch>.<key>" in one of four rotating buffers, so that a message may name several keys */
static const char *K(const struct ob_hparams *hp, const char *key)
{
    static _Thread_local char buf[4][96];
    static _Thread_local int i;
    i = (i + 1) % 4;
    snprintf(buf[i], sizeof buf[i], "%s.%s", hp->arch, key);
    return buf[i];
}

/* u32 "<arch>.<key>"; *out unchanged when absent and !required; *present says which */
static int arch_u32(const struct ob_gguf *g, const struct ob_hparams *hp, const char *key,
                    bool required, uint32_t *out, bool *present)
{
    int e = ob_gguf_get_u32(g, K(hp, key), out);
    if (present)
        *present = e == 0;
    if (e == OB_ENOTFOUND && !required)
        return 0;
    return e;
}

static int arch_f32(const struct ob_gguf *g, const struct ob_hparams *hp, const char *key,
                    float *out, bool *present)
{
    int e = ob_gguf_get_f32(g, K(hp, key), out);
    if (present)
        *present = e == 0;
    return e == OB_ENOTFOUND ? 0 : e;
}

static int range_u32(const struct ob_hparams *hp, const char *key, uint32_t v, uint32_t lo,
                     uint32_t hi)
{
    if (v >= lo && v <= hi)
        return 0;
    return ob_seterr(OB_EFORMAT, "%s = %u: must be %u to %u", K(hp, key), v, lo, hi);
}

/* A printable ASCII name (architecture, rope scaling type): no raw bytes in messages. */
static bool is_name(const char *p, uint64_t len, uint64_t cap)
{
    if (len == 0 || len >= cap)
        return false;
    for (uint64_t i = 0; i < len; i++)
        if (p[i] <= ' ' || p[i] > '~' || p[i] == '\'')
            return false;
    return true;
}

/* ---- tokenizer keys ------------------------------------------------------------------------ */

static bool has_suffix(const char *s, const char *suf)
{
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && strcmp(s + a - b, suf) == 0;
}

static bool key_true(const struct ob_gguf *g, const char *key)
{
    bool b = false;
    return ob_gguf_get_bool(g, key, &b) == 0 && b;
}

/*
 * Every tokenizer.ggml.*_token_id (bos, eos, eot, eom, unknown, padding, seperator, cls, mask,
 * fim_*, ...) names a token of the vocabulary or none: -1 as a signed integer, or 0xffffffff,
 * as llama.cpp's converter writes an absent id. Anything else outside the token list is an
 * error, whether or not 1b uses that id today.
 */
static int check_token_ids(const struct ob_gguf *g, uint64_t n_tokens, bool supported)
{
    bool have_bos = false;
    for (uint64_t i = 0; i < ob_gguf_n_kv(g); i++) {
        const struct ob_gguf_kv *kv = ob_gguf_kv_at(g, i);
        if (strncmp(kv->key, "tokenizer.ggml.", 15) != 0 || !has_suffix(kv->key, "_token_id"))
            continue;
        const struct ob_gguf_value *v = &kv->val;
        switch (v->type) {
        case OB_GGUF_I8: case OB_GGUF_I16: case OB_GGUF_I32: case OB_GGUF_I64:
            if (v->i < 0)
                continue;
            if ((uint64_t)v->i >= n_tokens)
                return ob_seterr(OB_EFORMAT, "%s = %lld: outside the vocabulary of %llu tokens",
                                 kv->key, (long long)v->i, (unsigned long long)n_tokens);
            break;
        case OB_GGUF_U8: case OB_GGUF_U16: case OB_GGUF_U32: case OB_GGUF_U64:
            if (v->u == UINT32_MAX || v->u == UINT64_MAX)
                continue;
            if (v->u >= n_tokens)
                return ob_seterr(OB_EFORMAT, "%s = %llu: outside the vocabulary of %llu tokens",
                                 kv->key, (unsigned long long)v->u, (unsigned long long)n_tokens);
            break;
        default:
            return ob_seterr(OB_EFORMAT, "%s is %s, expected an integer token id", kv->key,
                             ob_gguf_vtype_name(v->type));
        }
        have_bos |= strcmp(kv->key, "tokenizer.ggml.bos_token_id") == 0;
    }
    /* BOS: asked for explicitly, or by default for a llama (SentencePiece) vocabulary, as in
     * tok.c; a vocabulary that asks for it and names none would run every prompt without it */
    bool add_bos;
    const struct ob_gguf_value *m = ob_gguf_get(g, "tokenizer.ggml.model");
    if (ob_gguf_get_bool(g, "tokenizer.ggml.add_bos_token", &add_bos) != 0)
        add_bos = m && m->type == OB_GGUF_STRING && m->str.len == 5 &&
                  memcmp(m->str.ptr, "llama", 5) == 0;
    if (add_bos && !have_bos && n_tokens)
        return ob_seterr(OB_EFORMAT, "tokenizer.ggml.bos_token_id is missing (or none) but the "
                         "vocabulary adds BOS to every prompt (tokenizer.ggml.add_bos_token%s)",
                         ob_gguf_get(g, "tokenizer.ggml.add_bos_token") ? "" : ", its default");
    if (!supported)
        return 0;
    /* 1b adds BOS (when asked) and nothing else to a prompt */
    static const char *const adds[] = {"tokenizer.ggml.add_eos_token", "tokenizer.ggml.add_sep_token"};
    for (size_t i = 0; i < 2; i++)
        if (key_true(g, adds[i]))
            return ob_seterr(OB_EUNSUPP, "%s = true: 1b adds no such token to prompts", adds[i]);
    return 0;
}

/* ---- tensors ------------------------------------------------------------------------------- */

/* symbolic dimensions of the tensors */
enum { D_1, D_E, D_V, D_F, D_Q, D_KV, D_HD };
enum { REQ, OPT, ALL_OR_NONE, POST };   /* POST: in every layer when hp->post_norms, else none */

struct tspec {
    const char *name;              /* global name, or the suffix after "blk.L." */
    uint8_t k, n;                  /* ne[0], ne[1] (D_1: a vector) */
    uint8_t need;
};

static const struct tspec global_tensors[] = {
    {"token_embd.weight", D_E, D_V, REQ},
    {"output.weight", D_E, D_V, OPT},
    {"output_norm.weight", D_E, D_1, REQ},
};
static const struct tspec layer_tensors[] = {
    {"attn_norm.weight", D_E, D_1, REQ},   {"ffn_norm.weight", D_E, D_1, REQ},
    {"attn_q.weight", D_E, D_Q, REQ},      {"attn_k.weight", D_E, D_KV, REQ},
    {"attn_v.weight", D_E, D_KV, REQ},     {"attn_output.weight", D_Q, D_E, REQ},
    {"ffn_gate.weight", D_E, D_F, REQ},    {"ffn_up.weight", D_E, D_F, REQ},
    {"ffn_down.weight", D_F, D_E, REQ},
    /* per-head RMSNorm of q and k (qwen3), q/k/v biases (qwen2): in every layer or none */
    {"attn_q_norm.weight", D_HD, D_1, ALL_OR_NONE}, {"attn_k_norm.weight", D_HD, D_1, ALL_OR_NONE},
    {"attn_q.bias", D_Q, D_1, ALL_OR_NONE}, {"attn_k.bias", D_KV, D_1, ALL_OR_NONE},
    {"attn_v.bias", D_KV, D_1, ALL_OR_NONE},
    /* gemma3: RMSNorm of the attention and feed-forward outputs before the residual adds */
    {"post_attention_norm.weight", D_E, D_1, POST}, {"post_ffw_norm.weight", D_E, D_1, POST},
};
#define N_LAYER_T (sizeof layer_tensors / sizeof layer_tensors[0])
enum { T_Q_NORM = 9, T_K_NORM = 10, T_Q_BIAS = 11 };

static uint64_t dim(const struct ob_hparams *hp, int d)
{
    switch (d) {
    case D_E: return hp->n_embd;
    case D_V: return hp->n_vocab;
    case D_F: return hp->n_ff;
    case D_Q: return (uint64_t)hp->n_head * hp->head_dim;
    case D_KV: return (uint64_t)hp->n_head_kv * hp->head_dim;
    case D_HD: return hp->head_dim;
    }
    return 1;
}

static const char *dim_name(const struct ob_hparams *hp, int d)
{
    switch (d) {
    case D_E: return K(hp, "embedding_length");
    case D_V: return "the vocabulary size";
    case D_F: return K(hp, "feed_forward_length");
    case D_Q: return "heads x head dimension";
    case D_KV: return "kv heads x head dimension";
    case D_HD: return "the head dimension";
    }
    return "1";
}

static int check_shape(const struct ob_hparams *hp, const struct ob_gguf_tensor *t,
                       const struct tspec *s)
{
    uint64_t k = dim(hp, s->k), n = dim(hp, s->n);
    if (t->ne[0] == k && t->ne[1] == n && t->ne[2] == 1 && t->ne[3] == 1)
        return 0;
    if (s->n == D_1)
        return ob_seterr(OB_EFORMAT, "tensor '%s' has shape [%llu, %llu, %llu, %llu], expected "
                         "[%llu] (%s)", t->name, (unsigned long long)t->ne[0],
                         (unsigned long long)t->ne[1], (unsigned long long)t->ne[2],
                         (unsigned long long)t->ne[3], (unsigned long long)k,
                         dim_name(hp, s->k));
    return ob_seterr(OB_EFORMAT, "tensor '%s' has shape [%llu, %llu, %llu, %llu], expected "
                     "[%llu, %llu] (%s, %s)", t->name, (unsigned long long)t->ne[0],
                     (unsigned long long)t->ne[1], (unsigned long long)t->ne[2],
                     (unsigned long long)t->ne[3], (unsigned long long)k, (unsigned long long)n,
                     dim_name(hp, s->k), dim_name(hp, s->n));
}

/* "blk.<L>.<suffix>" with L in canonical decimal: the layer, or -1 */
static long layer_of(const char *name, const char **suffix)
{
    if (strncmp(name, "blk.", 4) != 0 || name[4] < '0' || name[4] > '9' ||
        (name[4] == '0' && name[5] != '.'))
        return -1;
    char *end;
    unsigned long l = strtoul(name + 4, &end, 10);
    if (*end != '.' || l > 1u << 20)
        return -1;
    *suffix = end + 1;
    return (long)l;
}

/* The tensors a model has: those of its GGUF file and, for a Q4NX pack (lib/npu/pack.c), the
 * tiles of its weights file, which no GGUF holds. */
struct tview {
    const struct ob_gguf *g;
    const struct ob_gguf_tensor *x;
    size_t nx;
};

static uint64_t tv_n(const struct tview *v)
{
    return ob_gguf_n_tensors(v->g) + v->nx;
}

static const struct ob_gguf_tensor *tv_at(const struct tview *v, uint64_t i)
{
    uint64_t n = ob_gguf_n_tensors(v->g);
    return i < n ? ob_gguf_tensor_at(v->g, i) : &v->x[i - n];
}

static const struct ob_gguf_tensor *tv_find(const struct tview *v, const char *name)
{
    const struct ob_gguf_tensor *t = ob_gguf_tensor(v->g, name);
    for (size_t i = 0; i < v->nx && !t; i++)
        if (strcmp(v->x[i].name, name) == 0)
            t = &v->x[i];
    return t;
}

/*
 * Every tensor of the file is one the forward pass reads, with the shape the hyper-parameters
 * imply; every required one is there. A tensor nothing reads means a feature 1b would ignore
 * (llama.cpp refuses such files too: "wrong number of tensors").
 */
static int check_tensors(const struct tview *g, struct ob_hparams *hp)
{
    uint64_t n_req = 0, count[N_LAYER_T] = {0};
    int e;
    for (uint64_t i = 0; i < tv_n(g); i++) {
        const struct ob_gguf_tensor *t = tv_at(g, i);
        const struct tspec *s = NULL;
        const char *suffix;
        long l = layer_of(t->name, &suffix);
        if (l >= 0) {
            for (size_t j = 0; j < N_LAYER_T && !s; j++)
                if (strcmp(suffix, layer_tensors[j].name) == 0) {
                    s = &layer_tensors[j];
                    count[j]++;
                }
            if (s && (uint64_t)l >= hp->n_layer)
                return ob_seterr(OB_EFORMAT, "tensor '%s' is in layer %ld but %s = %u",
                                 t->name, l, K(hp, "block_count"), hp->n_layer);
        } else {
            for (size_t j = 0; j < sizeof global_tensors / sizeof global_tensors[0]; j++)
                if (strcmp(t->name, global_tensors[j].name) == 0)
                    s = &global_tensors[j];
        }
        if (!s && strcmp(t->name, "rope_freqs.weight") == 0)
            return ob_seterr(OB_EUNSUPP, "tensor 'rope_freqs.weight': rope frequency factors "
                             "(llama 3.1 rope scaling) are not supported");
        if (!s || (s->need == POST && !hp->post_norms))
            return ob_seterr(OB_EUNSUPP, "tensor '%s' has no part in 1b's %s forward pass",
                             t->name, hp->arch);
        if ((e = check_shape(hp, t, s)))
            return e;
        n_req += s->need == REQ || s->need == POST;
    }
    uint64_t want = 0;
    for (size_t j = 0; j < sizeof global_tensors / sizeof global_tensors[0]; j++)
        want += global_tensors[j].need == REQ;
    for (size_t j = 0; j < N_LAYER_T; j++)
        want += (uint64_t)hp->n_layer * (layer_tensors[j].need == REQ ||
                                         (layer_tensors[j].need == POST && hp->post_norms));
    if (n_req != want) {
        /* name the first one missing */
        for (size_t j = 0; j < sizeof global_tensors / sizeof global_tensors[0]; j++)
            if (global_tensors[j].need == REQ && !tv_find(g, global_tensors[j].name))
                return ob_seterr(OB_EFORMAT, "tensor '%s' is missing", global_tensors[j].name);
        for (uint32_t l = 0; l < hp->n_layer; l++)
            for (size_t j = 0; j < N_LAYER_T; j++) {
                char n[96];
                snprintf(n, sizeof n, "blk.%u.%s", l, layer_tensors[j].name);
                bool need = layer_tensors[j].need == REQ ||
                            (layer_tensors[j].need == POST && hp->post_norms);
                if (need && !tv_find(g, n))
                    return ob_seterr(OB_EFORMAT, "tensor '%s' is missing (%s = %u)", n,
                                     K(hp, "block_count"), hp->n_layer);
            }
    }
    for (size_t j = 0; j < N_LAYER_T; j++)
        if (layer_tensors[j].need == ALL_OR_NONE && count[j] && count[j] != hp->n_layer)
            return ob_seterr(OB_EFORMAT, "%llu of %u layers have a %s tensor: it must be in "
                             "every layer or none", (unsigned long long)count[j], hp->n_layer,
                             layer_tensors[j].name);
    if (count[T_Q_NORM] != count[T_K_NORM])
        return ob_seterr(OB_EFORMAT, "attn_q_norm.weight and attn_k_norm.weight come together: "
                         "the file has %llu and %llu", (unsigned long long)count[T_Q_NORM],
                         (unsigned long long)count[T_K_NORM]);
    hp->qk_norm = count[T_Q_NORM] != 0;
    hp->attn_bias = count[T_Q_BIAS] != 0;
    if ((hp->arch_id == OB_ARCH_QWEN3 || hp->arch_id == OB_ARCH_GEMMA3) && !hp->qk_norm)
        return ob_seterr(OB_EFORMAT, "tensor 'blk.0.attn_q_norm.weight' is missing (%s "
                         "normalises q and k)", hp->arch);
    return 0;
}

/* ---- rope scaling and other features 1b does not implement --------------------------------- */

static int check_unsupported(const struct ob_gguf *g, const struct ob_hparams *hp)
{
    /* llama.cpp: scaling.type defaults to linear, the factor (or the older scale_linear) sets
     * it, and type "none" turns it off whatever the factor */
    const struct ob_gguf_value *ty = ob_gguf_get(g, K(hp, "rope.scaling.type"));
    bool none = false;
    if (ty) {
        if (ty->type != OB_GGUF_STRING || !is_name(ty->str.ptr, ty->str.len, 32))
            return ob_seterr(OB_EFORMAT, "%s is not a short name", K(hp, "rope.scaling.type"));
        none = ty->str.len == 4 && memcmp(ty->str.ptr, "none", 4) == 0;
        bool linear = ty->str.len == 6 && memcmp(ty->str.ptr, "linear", 6) == 0;
        if (!none && !linear)
            return ob_seterr(OB_EUNSUPP, "%s = '%.*s': rope scaling is not supported (only "
                             "none, or linear with factor 1)", K(hp, "rope.scaling.type"),
                             (int)ty->str.len, ty->str.ptr);
    }
    static const char *const factors[] = {"rope.scaling.factor", "rope.scale_linear"};
    for (size_t i = 0; i < 2 && !none; i++) {
        float f;
        int e = arch_f32(g, hp, factors[i], &f, NULL);
        if (e)
            return e;
        if (ob_gguf_get(g, K(hp, factors[i])) && f != 0.0f && f != 1.0f)
            return ob_seterr(OB_EUNSUPP, "%s = %g: rope scaling is not supported", K(hp, factors[i]),
                             (double)f);
    }
    const struct ob_gguf_value *c = ob_gguf_get(g, K(hp, "attention.causal"));
    if (c && c->type != OB_GGUF_BOOL)
        return ob_seterr(OB_EFORMAT, "%s is %s, expected bool", K(hp, "attention.causal"),
                         ob_gguf_vtype_name(c->type));
    if (c && !c->u)
        return ob_seterr(OB_EUNSUPP, "%s = false: 1b's attention is causal",
                         K(hp, "attention.causal"));
    static const char *const experts[] = {"expert_count", "expert_used_count"};
    for (size_t i = 0; i < 2; i++) {
        uint32_t n = 0;
        int e = arch_u32(g, hp, experts[i], false, &n, NULL);
        if (e)
            return e;
        if (n)
            return ob_seterr(OB_EUNSUPP, "%s = %u: mixture-of-experts models are not supported",
                             K(hp, experts[i]), n);
    }
    return 0;
}

/* ---- gemma3 -------------------------------------------------------------------------------- */

/*
 * Gemma 3 (checked against llama.cpp's src/models/gemma3.cpp and Hugging Face's
 * modeling_gemma3.py):
 *  - the embedding row is scaled by sqrt(n_embd); per layer, RMSNorm -> q, k, v -> per-head
 *    RMSNorm of q and k -> NeoX RoPE -> attention -> RMSNorm (post_attention_norm) -> residual;
 *    RMSNorm -> GeGLU (GELU, tanh form) -> down -> RMSNorm (post_ffw_norm) -> residual; every
 *    norm weight of the GGUF already holds Gemma's "1 + weight" (the converter adds the 1);
 *  - attention.sliding_window (absent or 0: no window, every layer global) is the window of
 *    the local layers, which rotate with rope.freq_base_swa (default 10000, Hugging Face's
 *    rope_local_base_freq) while the global ones use rope.freq_base; layer l is global when
 *    l % P == P - 1, P = attention.sliding_window_pattern (default 6: layers 5, 11, 17, ...),
 *    as llama.cpp's set_swa_pattern and Hugging Face's layer_types have it;
 *  - scores are scaled by 1/sqrt(query_pre_attn_scalar), which GGUF does not carry: it is the
 *    head dimension for every released Gemma 3 but the 27B (62 layers), whose is
 *    n_embd / n_head (llama.cpp's rule, from gemma_pytorch's config);
 *  - final_logit_softcapping and attn_logit_softcapping (Gemma 2) are not implemented: refused.
 */
static int gemma3_keys(const struct ob_gguf *g, struct ob_hparams *hp)
{
    int e;
    bool has_swa;
    hp->embd_scale = true;
    hp->post_norms = true;
    hp->ffn_act = OB_ACT_GELU;
    if (hp->n_layer == 62 && hp->n_head)
        hp->attn_scale_dim = hp->n_embd / hp->n_head;
    hp->swa_pattern = 6;
    hp->rope_base_swa = 10000.0f;
    if ((e = arch_u32(g, hp, "attention.sliding_window", false, &hp->n_swa, &has_swa)) ||
        (e = arch_u32(g, hp, "attention.sliding_window_pattern", false, &hp->swa_pattern, NULL)) ||
        (e = arch_f32(g, hp, "rope.freq_base_swa", &hp->rope_base_swa, NULL)))
        return e;
    if (!(hp->rope_base_swa > 1.0f && isfinite(hp->rope_base_swa)))
        return ob_seterr(OB_EFORMAT, "%s = %g: must be a finite number above 1",
                         K(hp, "rope.freq_base_swa"), (double)hp->rope_base_swa);
    if (hp->n_swa > 1u << 24)
        return ob_seterr(OB_EFORMAT, "%s = %u: must be at most %u",
                         K(hp, "attention.sliding_window"), hp->n_swa, 1u << 24);
    if (hp->attn_scale_dim == 0)
        return ob_seterr(OB_EFORMAT, "%s = %u, %s = %u: no query scale (n_embd / n_head is 0)",
                         K(hp, "embedding_length"), hp->n_embd, K(hp, "attention.head_count"),
                         hp->n_head);
    static const char *const caps[] = {"final_logit_softcapping", "attn_logit_softcapping"};
    for (size_t i = 0; i < 2; i++) {
        float f = 0.0f;
        bool present;
        if ((e = arch_f32(g, hp, caps[i], &f, &present)))
            return e;
        if (present && f != 0.0f)
            return ob_seterr(OB_EUNSUPP, "%s = %g: logit soft-capping is not supported",
                             K(hp, caps[i]), (double)f);
    }
    return 0;
}

bool ob_hparams_layer_swa(const struct ob_hparams *hp, uint32_t l)
{
    if (!hp->n_swa)
        return false;
    return hp->swa_pattern == 0 || l % hp->swa_pattern < hp->swa_pattern - 1;
}

/* ---- the whole set ------------------------------------------------------------------------- */

int ob_hparams_read(const struct ob_gguf *g, struct ob_hparams *hp)
{
    return ob_hparams_read_with(g, NULL, 0, hp);
}

int ob_hparams_read_with(const struct ob_gguf *g, const struct ob_gguf_tensor *extra,
                         size_t n_extra, struct ob_hparams *hp)
{
    const struct tview tv = {g, extra, n_extra};
    memset(hp, 0, sizeof *hp);
    const struct ob_gguf_value *a = ob_gguf_get(g, "general.architecture");
    if (!a)
        return ob_seterr(OB_EFORMAT, "metadata key 'general.architecture' is missing");
    if (a->type != OB_GGUF_STRING || !is_name(a->str.ptr, a->str.len, sizeof hp->arch))
        return ob_seterr(OB_EFORMAT, "general.architecture is not a short name of printable "
                         "characters");
    memcpy(hp->arch, a->str.ptr, a->str.len);
    hp->arch_id = OB_ARCH_UNKNOWN;
    for (size_t i = 0; i < sizeof archs / sizeof archs[0]; i++)
        if (strcmp(hp->arch, archs[i].name) == 0)
            hp->arch_id = archs[i].id;
    hp->supported = hp->arch_id != OB_ARCH_UNKNOWN;
    bool req = hp->supported;
    bool has_ctx, has_hd, has_rot;
    int e;
    if ((e = arch_u32(g, hp, "embedding_length", req, &hp->n_embd, NULL)) ||
        (e = arch_u32(g, hp, "block_count", req, &hp->n_layer, NULL)) ||
        (e = arch_u32(g, hp, "attention.head_count", req, &hp->n_head, NULL)) ||
        (e = arch_u32(g, hp, "feed_forward_length", req, &hp->n_ff, NULL)) ||
        (e = arch_u32(g, hp, "context_length", false, &hp->n_ctx_train, &has_ctx)))
        return e;
    hp->n_head_kv = hp->n_head;
    if ((e = arch_u32(g, hp, "attention.head_count_kv", false, &hp->n_head_kv, NULL)))
        return e;
    hp->head_dim = hp->n_head ? hp->n_embd / hp->n_head : 0;
    if ((e = arch_u32(g, hp, "attention.key_length", false, &hp->head_dim, &has_hd)))
        return e;
    hp->head_dim_v = hp->head_dim;
    if ((e = arch_u32(g, hp, "attention.value_length", false, &hp->head_dim_v, NULL)))
        return e;
    hp->n_rot = hp->head_dim;
    if ((e = arch_u32(g, hp, "rope.dimension_count", false, &hp->n_rot, &has_rot)))
        return e;
    hp->rms_eps = 1e-5f;
    hp->rope_base = 10000.0f;
    if ((e = arch_f32(g, hp, "attention.layer_norm_rms_epsilon", &hp->rms_eps, NULL)) ||
        (e = arch_f32(g, hp, "rope.freq_base", &hp->rope_base, NULL)))
        return e;
    /* vocabulary: explicit key, else the token list, else the embedding matrix */
    const struct ob_gguf_value *toks = ob_gguf_get(g, "tokenizer.ggml.tokens");
    uint64_t n_tokens = toks && toks->type == OB_GGUF_ARRAY ? toks->arr.n : 0;
    hp->n_vocab = n_tokens > UINT32_MAX ? UINT32_MAX : (uint32_t)n_tokens;
    if ((e = arch_u32(g, hp, "vocab_size", false, &hp->n_vocab, NULL)))
        return e;
    const struct ob_gguf_tensor *emb = tv_find(&tv, "token_embd.weight");
    if (!hp->n_vocab && emb && emb->n_dims == 2)
        hp->n_vocab = emb->ne[1] > UINT32_MAX ? UINT32_MAX : (uint32_t)emb->ne[1];

    hp->rope_type = hp->arch_id == OB_ARCH_LLAMA ? OB_ROPE_NORM : OB_ROPE_NEOX;
    hp->attn_scale_dim = hp->head_dim;
    hp->ffn_act = OB_ACT_SILU;
    hp->tied_output = tv_find(&tv, "output.weight") == NULL;
    hp->qk_norm = tv_find(&tv, "blk.0.attn_q_norm.weight") != NULL;
    hp->attn_bias = tv_find(&tv, "blk.0.attn_q.bias") != NULL;

    if ((e = check_token_ids(g, n_tokens ? n_tokens : hp->n_vocab, hp->supported)))
        return e;
    if (!hp->supported)
        return 0;

    /* ranges, each refusal naming its key */
    if ((e = range_u32(hp, "embedding_length", hp->n_embd, 1, 1u << 20)) ||
        (e = range_u32(hp, "block_count", hp->n_layer, 1, 4096)) ||
        (e = range_u32(hp, "attention.head_count", hp->n_head, 1, 4096)) ||
        (e = range_u32(hp, "feed_forward_length", hp->n_ff, 1, 1u << 22)) ||
        (e = range_u32(hp, "attention.head_count_kv", hp->n_head_kv, 1, hp->n_head)))
        return e;
    if (has_ctx && (e = range_u32(hp, "context_length", hp->n_ctx_train, 1, UINT32_MAX)))
        return e;
    if (hp->n_head % hp->n_head_kv)
        return ob_seterr(OB_EFORMAT, "%s = %u does not divide %s = %u",
                         K(hp, "attention.head_count_kv"), hp->n_head_kv,
                         K(hp, "attention.head_count"), hp->n_head);
    if (!has_hd && hp->n_embd % hp->n_head)
        return ob_seterr(OB_EFORMAT, "%s = %u is not a multiple of %s = %u (and %s is absent)",
                         K(hp, "embedding_length"), hp->n_embd, K(hp, "attention.head_count"),
                         hp->n_head, K(hp, "attention.key_length"));
    if (has_hd && (e = range_u32(hp, "attention.key_length", hp->head_dim, 1, 4096)))
        return e;
    if (hp->head_dim > 256)
        return ob_seterr(OB_EUNSUPP, "%s: head dimension %u is above 256, the most the attention "
                         "kernels take", has_hd ? K(hp, "attention.key_length") :
                         K(hp, "embedding_length"), hp->head_dim);
    if (hp->head_dim_v != hp->head_dim)
        return ob_seterr(OB_EUNSUPP, "%s = %u differs from the key length %u",
                         K(hp, "attention.value_length"), hp->head_dim_v, hp->head_dim);
    if (hp->n_rot < 2 || hp->n_rot > hp->head_dim || hp->n_rot % 2)
        return ob_seterr(OB_EFORMAT, "%s = %u: must be even, 2 to the head dimension %u",
                         has_rot ? K(hp, "rope.dimension_count") : K(hp, "attention.key_length"),
                         hp->n_rot, hp->head_dim);
    /* the epsilon is added to a mean of squares of activations of order 1 */
    if (!(hp->rms_eps > 0.0f && hp->rms_eps <= 1.0f))
        return ob_seterr(OB_EFORMAT, "%s = %g: must be above 0 and at most 1",
                         K(hp, "attention.layer_norm_rms_epsilon"), (double)hp->rms_eps);
    if (!(hp->rope_base > 1.0f && isfinite(hp->rope_base)))
        return ob_seterr(OB_EFORMAT, "%s = %g: must be a finite number above 1",
                         K(hp, "rope.freq_base"), (double)hp->rope_base);
    if (!hp->n_vocab)
        return ob_seterr(OB_EFORMAT, "no vocabulary size: %s, tokenizer.ggml.tokens and "
                         "token_embd.weight are all absent or empty", K(hp, "vocab_size"));
    if (n_tokens > hp->n_vocab)
        return ob_seterr(OB_EFORMAT, "tokenizer.ggml.tokens has %llu tokens, more than %s = %u",
                         (unsigned long long)n_tokens, K(hp, "vocab_size"), hp->n_vocab);
    if ((e = check_unsupported(g, hp)))
        return e;
    if (hp->arch_id == OB_ARCH_GEMMA3 && (e = gemma3_keys(g, hp)))
        return e;
    return check_tensors(&tv, hp);
}

uint64_t ob_hparams_kv_bytes(const struct ob_hparams *hp, uint64_t n_ctx)
{
    /* K and V per layer, per kv head, per position: f16 (2 bytes) each */
    return 2ull * hp->n_layer * hp->n_head_kv * hp->head_dim * n_ctx * 2ull;
}

/* The hyper-parameters as 1b-load prints them and a pack manifest keeps them. */
cJSON *ob_hparams_json(const struct ob_hparams *hp)
{
    cJSON *h = cJSON_CreateObject();
    ob_json_add_u64(h, "n_vocab", hp->n_vocab);
    ob_json_add_u64(h, "n_ctx_train", hp->n_ctx_train);
    ob_json_add_u64(h, "n_embd", hp->n_embd);
    ob_json_add_u64(h, "n_layer", hp->n_layer);
    ob_json_add_u64(h, "n_head", hp->n_head);
    ob_json_add_u64(h, "n_head_kv", hp->n_head_kv);
    ob_json_add_u64(h, "head_dim", hp->head_dim);
    ob_json_add_u64(h, "n_ff", hp->n_ff);
    ob_json_add_u64(h, "n_rot", hp->n_rot);
    cJSON_AddItemToObject(h, "rms_eps", ob_json_f32(hp->rms_eps));
    cJSON_AddItemToObject(h, "rope_base", ob_json_f32(hp->rope_base));
    cJSON_AddStringToObject(h, "rope_type", ob_rope_name(hp->rope_type));
    cJSON_AddBoolToObject(h, "qk_norm", hp->qk_norm);
    cJSON_AddBoolToObject(h, "tied_output", hp->tied_output);
    cJSON_AddBoolToObject(h, "attn_bias", hp->attn_bias);
    if (hp->arch_id == OB_ARCH_GEMMA3) {
        cJSON_AddBoolToObject(h, "embd_scale", hp->embd_scale);
        cJSON_AddBoolToObject(h, "post_norms", hp->post_norms);
        cJSON_AddStringToObject(h, "ffn_act", hp->ffn_act == OB_ACT_GELU ? "gelu" : "silu");
        ob_json_add_u64(h, "attn_scale_dim", hp->attn_scale_dim);
        ob_json_add_u64(h, "sliding_window", hp->n_swa);
        cJSON_AddItemToObject(h, "rope_base_swa", ob_json_f32(hp->rope_base_swa));
        cJSON *gl = cJSON_AddArrayToObject(h, "global_layers");
        for (uint32_t l = 0; l < hp->n_layer; l++)
            if (!ob_hparams_layer_swa(hp, l))
                cJSON_AddItemToArray(gl, cJSON_CreateNumber(l));
    }
    return h;
}
