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
#include <sys/mman.h>
#include <unistd.h>

#include "quant.h"
#include "cpu/kernels/kernels.h"   /* which types have kernels, activation block sizes */
#include "chat.h"
#include "model.h"
#include "sb.h"
#include "quant.h"

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

/* ---- the cpu route's copy of the weights (model.h ob_model_weights) -------------------- */

struct ob_wcopy {
    pthread_mutex_t mu;
    bool done;                     /* decided (and copied, or not) */
    int err;                       /* the first call's error, returned again */
    char *msg;                     /* its message */
    struct ob_weights v;
    void *map;                     /* the anonymous mapping holding the copy, or NULL */
    size_t map_len;
    uintptr_t *panels;             /* v.panels */
};

#define HUGE_BYTES ((size_t)2 << 20)

/* transparent huge pages can back anonymous memory (the bracketed choice is not never) */
static bool thp_on(void)
{
    FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
    char line[128] = "";
    if (!f)
        return false;
    bool ok = fgets(line, sizeof line, f) && !strstr(line, "[never]");
    fclose(f);
    return ok;
}

/* bytes of memory available without swapping (MemAvailable), 0 when unknown */
static size_t mem_available(void)
{
    FILE *f = fopen("/proc/meminfo", "r");
    char line[128];
    unsigned long long kb = 0;
    if (!f)
        return 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1)
            break;
    fclose(f);
    return (size_t)kb * 1024;
}

/* matrices by their data's address */
static int cmp_mat_data(const void *a, const void *b)
{
    uintptr_t x = (uintptr_t)(*(const struct ob_matrix *const *)a)->data;
    uintptr_t y = (uintptr_t)(*(const struct ob_matrix *const *)b)->data;
    return x < y ? -1 : x > y;
}

/*
 * The matrices of the types in `panels` into panels in the copy (at holds the len bytes of the
 * mapping from lo on), each once (a matrix two roles share is one), a panel at a time through
 * a buffer of its 8 rows; c->panels lists their data addresses in the mapping, ascending.
 */
static int wcopy_panels(const struct ob_model *m, struct ob_wcopy *c, uint64_t panels,
                        char *at, uintptr_t lo, size_t len)
{
    size_t cap = (size_t)m->hp.n_layer * 7 + 1, n = 0;
    const struct ob_matrix **mats = malloc(cap * sizeof *mats);
    uintptr_t *addr = malloc(cap * sizeof *addr);
    char *buf = NULL;
    if (!mats || !addr)
        goto oom;
    for (uint32_t l = 0; l < m->hp.n_layer; l++) {
        const struct ob_layer *L = &m->layers[l];
        const struct ob_matrix *lm[7] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->w_gate, &L->w_up,
                                         &L->w_down};
        for (int i = 0; i < 7; i++)
            mats[n++] = lm[i];
    }
    mats[n++] = &m->output;        /* the token embeddings too where they are tied to it */
    size_t np = 0, maxrb = 0;
    for (size_t i = 0; i < n; i++) {
        const struct ob_matrix *w = mats[i];
        size_t off = (uintptr_t)w->data - lo;
        if (w->type < 64 && (panels >> w->type & 1) && ob_panel_fits(w) && off < len &&
            (size_t)w->n * w->row_bytes <= len - off) {
            mats[np++] = w;
            maxrb = w->row_bytes > maxrb ? w->row_bytes : maxrb;
        }
    }
    /* sorted by address, each matrix once */
    qsort(mats, np, sizeof *mats, cmp_mat_data);
    size_t nu = 0;
    for (size_t i = 0; i < np; i++)
        if (!nu || mats[i]->data != mats[nu - 1]->data)
            mats[nu++] = mats[i];
    if (nu && !(buf = malloc(OB_PANEL_ROWS * maxrb)))
        goto oom;
    for (size_t i = 0; i < nu; i++) {
        const struct ob_matrix *w = mats[i];
        char *dst = at + ((uintptr_t)w->data - lo);
        size_t pb = OB_PANEL_ROWS * w->row_bytes;
        struct ob_matrix p = {w->type, w->k, OB_PANEL_ROWS, w->row_bytes, buf, OB_LAYOUT_ROWS};
        for (int r = 0; r < w->n; r += OB_PANEL_ROWS) {
            memcpy(buf, dst + (size_t)r * w->row_bytes, pb);
            ob_panel_pack(&p, dst + (size_t)r * w->row_bytes);
        }
        addr[i] = (uintptr_t)w->data;
    }
    free(buf);
    free(mats);
    c->panels = addr;
    c->v.panels = addr;
    c->v.n_panels = nu;
    return 0;
oom:
    free(mats);
    free(addr);
    return ob_seterr(OB_ENOMEM, "out of memory arranging the weights' copy");
}

static int wcopy_make(const struct ob_model *m, struct ob_wcopy *c, uint64_t panels)
{
    const char *env = getenv("OB_WEIGHTS");
    bool force = env && !strcmp(env, "copy");
    if (env && *env && strcmp(env, "auto") && strcmp(env, "copy") && strcmp(env, "map"))
        return ob_seterr(OB_EUSAGE, "OB_WEIGHTS=%s: expected auto, copy or map", env);
    if (m->pack || (env && !strcmp(env, "map")))
        return 0;
    /* the tensors' bytes: [lo, hi) of the mapping */
    uintptr_t lo = UINTPTR_MAX, hi = 0;
    for (uint64_t i = 0; i < ob_gguf_n_tensors(m->g); i++) {
        const struct ob_gguf_tensor *t = ob_gguf_tensor_at(m->g, i);
        if (!t->nbytes)
            continue;
        uintptr_t a = (uintptr_t)t->data;
        lo = a < lo ? a : lo;
        hi = a + t->nbytes > hi ? a + t->nbytes : hi;
    }
    if (hi <= lo)
        return 0;
    size_t len = hi - lo;
    if (!force && (!thp_on() || len > mem_available() / 2))
        return 0;
    /* the copy keeps every address's offset in its 4 KB page (the kernels see the alignment
     * they see in the mapping) and starts within a 2 MB page */
    size_t page = (size_t)sysconf(_SC_PAGESIZE), skew = lo % page;
    size_t map_len = len + skew + HUGE_BYTES;
    void *r = mmap(NULL, map_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (r == MAP_FAILED) {
        if (!force)
            return 0;
        return ob_seterr(OB_ENOMEM, "OB_WEIGHTS=copy: no memory for a copy of %zu MB of "
                         "weights", len >> 20);
    }
    char *base = (char *)(((uintptr_t)r + HUGE_BYTES - 1) & ~(uintptr_t)(HUGE_BYTES - 1));
    (void)madvise(base, len + skew, MADV_HUGEPAGE);   /* EINVAL without THP: 4 KB pages */
    char *at = base + skew;
    /* a part at a time; the mapping's pages each part came from are dropped after it (they
     * would be read again from the page cache, the same bytes: the mapping is read-only) */
    for (size_t o = 0; o < len; o += HUGE_BYTES * 16) {
        size_t n = len - o < HUGE_BYTES * 16 ? len - o : HUGE_BYTES * 16;
        memcpy(at + o, (const char *)lo + o, n);
        uintptr_t p0 = (lo + o + page - 1) / page * page, p1 = (lo + o + n) / page * page;
        if (p1 > p0)
            (void)madvise((void *)p0, p1 - p0, MADV_DONTNEED);
    }
    c->map = r;
    c->map_len = map_len;
    c->v = (struct ob_weights){(const char *)lo, at, len, NULL, 0};
    int e = panels ? wcopy_panels(m, c, panels, at, lo, len) : 0;
    (void)mprotect(base, len + skew, PROT_READ);      /* nothing writes weights */
    return e;
}

int ob_model_weights(const struct ob_model *m, uint64_t panels, struct ob_weights *v)
{
    struct ob_wcopy *c = m->wcopy;
    pthread_mutex_lock(&c->mu);
    if (!c->done) {
        c->err = wcopy_make(m, c, panels);
        if (c->err && !(c->msg = strdup(ob_errmsg())))
            c->err = ob_seterr(OB_ENOMEM, "out of memory");
        c->done = true;
    } else if (c->err) {
        ob_seterr(c->err, "%s", c->msg ? c->msg : "out of memory");
    }
    int e = c->err;
    *v = c->v;
    pthread_mutex_unlock(&c->mu);
    return e;
}

static int cmp_uintptr(const void *a, const void *b)
{
    uintptr_t x = *(const uintptr_t *)a, y = *(const uintptr_t *)b;
    return x < y ? -1 : x > y;
}

int ob_weights_layout(const struct ob_weights *v, const void *p)
{
    uintptr_t key = (uintptr_t)p;
    return v->n_panels && bsearch(&key, v->panels, v->n_panels, sizeof key, cmp_uintptr)
               ? OB_LAYOUT_P8 : OB_LAYOUT_ROWS;
}

static void wcopy_free(struct ob_wcopy *c)
{
    if (!c)
        return;
    if (c->map)
        munmap(c->map, c->map_len);
    free(c->panels);
    free(c->msg);
    pthread_mutex_destroy(&c->mu);
    free(c);
}

int ob_model_open(const char *arg, struct ob_model **out)
{
    struct ob_model *m = calloc(1, sizeof *m);
    if (!m)
        return ob_seterr(OB_ENOMEM, "out of memory");
    pthread_mutex_init(&m->sha_mu, NULL);
    int e;
    if (!(m->wcopy = calloc(1, sizeof *m->wcopy))) {
        e = ob_seterr(OB_ENOMEM, "out of memory");
        goto fail;
    }
    pthread_mutex_init(&m->wcopy->mu, NULL);
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
    wcopy_free(m->wcopy);
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
