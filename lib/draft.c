/*
 * draft.c — the draft model of speculative decoding (draft.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "draft.h"
#include "sample.h"
#include "tok.h"

struct dslot {
    int32_t *tok;                  /* the tokens whose K/V the slot holds, [n_ctx] */
    int n;
    uint64_t used;                 /* tick of the last use */
};

struct ob_drafter {
    struct ob_model *m;
    struct ob_ctx *ctx;
    int n_slots, n_ctx;
    uint32_t n_vocab;
    struct dslot *slots;
    uint64_t tick;
    int32_t *tok, *pos, *seq;      /* one pass's rows, [n_ctx] */
    float *logits;                 /* one row's, [n_vocab] */
    char error[512];               /* the first failure (then no more drafts), or "" */
};

/* "ab\x01" for a token text in one line (up to 32 bytes shown) */
static void show(char *buf, size_t size, const char *s, size_t len)
{
    size_t o = 0;
    buf[o++] = '"';
    for (size_t i = 0; i < len && i < 32 && o + 6 < size; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\')
            buf[o++] = (char)c;
        else
            o += (size_t)snprintf(buf + o, size - o, "\\x%02x", c);
    }
    if (len > 32 && o + 5 < size)
        o += (size_t)snprintf(buf + o, size - o, "...");
    buf[o++] = '"';
    buf[o] = 0;
}

/* the vocabularies of a and b are the same token for token; else OB_EFORMAT naming the first
 * difference (a is the target's, b the draft's) */
static int same_vocab(const struct ob_tok *a, const struct ob_tok *b)
{
    uint32_t na = ob_tok_n_vocab(a), nb = ob_tok_n_vocab(b);
    if (na != nb)
        return ob_seterr(OB_EFORMAT, "its vocabulary has %u tokens, the model's %u", nb, na);
    for (uint32_t id = 0; id < na; id++) {
        const char *ta, *tb;
        size_t la, lb;
        ob_tok_text(a, (int32_t)id, &ta, &la);
        ob_tok_text(b, (int32_t)id, &tb, &lb);
        if (la != lb || memcmp(ta, tb, la)) {
            char sa[160], sb[160];
            show(sa, sizeof sa, ta, la);
            show(sb, sizeof sb, tb, lb);
            return ob_seterr(OB_EFORMAT, "its vocabulary is not the model's: token %u is %s, "
                             "the model's is %s", id, sb, sa);
        }
        if (ob_tok_type(a, (int32_t)id) != ob_tok_type(b, (int32_t)id))
            return ob_seterr(OB_EFORMAT, "its vocabulary is not the model's: token %u is of "
                             "another kind (type %d, the model's %d)", id,
                             ob_tok_type(b, (int32_t)id), ob_tok_type(a, (int32_t)id));
    }
    return 0;
}

int ob_drafter_open(const struct ob_drafter_params *p, const struct ob_tok *target,
                    struct ob_drafter **out)
{
    *out = NULL;
    if (!p->model)
        return ob_seterr(OB_EUSAGE, "no draft model");
    if (p->n_slots < 1 || p->n_ctx < 2 || p->threads < 1)
        return ob_seterr(OB_EUSAGE, "draft model: %d slots of %d positions on %d threads",
                         p->n_slots, p->n_ctx, p->threads);
    struct ob_drafter *d = calloc(1, sizeof *d);
    if (!d)
        return ob_seterr(OB_ENOMEM, "out of memory");
    int e = ob_model_open(p->model, &d->m);
    if (e)
        ob_errprefix(e, "draft model");
    else if ((e = same_vocab(target, ob_model_tok(d->m))))
        ob_errprefix(e, "draft model %s", p->model);
    if (!e) {
        struct ob_ctx_params cp = {
            .route = p->route ? p->route : "cpu", .n_threads = p->threads,
            .n_slots = p->n_slots, .n_ctx = p->n_ctx, .max_batch = 512,
            .dev = {.index = p->device},
        };
        if ((e = ob_ctx_new(d->m, &cp, &d->ctx)))
            ob_errprefix(e, "draft model");
    }
    if (!e) {
        d->n_slots = p->n_slots;
        d->n_ctx = p->n_ctx;
        d->n_vocab = ob_model_hparams(d->m)->n_vocab;
        d->slots = calloc((size_t)d->n_slots, sizeof *d->slots);
        d->tok = malloc((size_t)d->n_ctx * sizeof(int32_t));
        d->pos = malloc((size_t)d->n_ctx * sizeof(int32_t));
        d->seq = malloc((size_t)d->n_ctx * sizeof(int32_t));
        d->logits = malloc((size_t)d->n_vocab * sizeof(float));
        bool oom = !d->slots || !d->tok || !d->pos || !d->seq || !d->logits;
        for (int i = 0; i < d->n_slots && !oom; i++)
            oom = !(d->slots[i].tok = malloc((size_t)d->n_ctx * sizeof(int32_t)));
        if (oom)
            e = ob_seterr(OB_ENOMEM, "out of memory");
    }
    if (e) {
        ob_drafter_free(d);
        return e;
    }
    *out = d;
    return 0;
}

void ob_drafter_free(struct ob_drafter *d)
{
    if (!d)
        return;
    for (int i = 0; d->slots && i < d->n_slots; i++)
        free(d->slots[i].tok);
    free(d->slots);
    free(d->tok);
    free(d->pos);
    free(d->seq);
    free(d->logits);
    ob_ctx_free(d->ctx);
    ob_model_close(d->m);
    free(d);
}

/* the slot to draft t[0..n) in and how many of its tokens are t's */
static int pick_slot(struct ob_drafter *d, const int32_t *t, int n, int *common)
{
    int best = 0, best_len = -1;
    for (int i = 0; i < d->n_slots; i++) {
        const struct dslot *s = &d->slots[i];
        int len = 0;
        while (len < s->n && len < n && s->tok[len] == t[len])
            len++;
        if (len > best_len || (len == best_len && s->used < d->slots[best].used)) {
            best = i;
            best_len = len;
        }
    }
    *common = best_len;
    return best;
}

/* rows t[0..n) at positions p0.. of slot `slot`, and the greedy pick after the last */
static int run(struct ob_drafter *d, int slot, const int32_t *t, int n, int p0, int32_t *pick)
{
    for (int i = 0; i < n; i++) {
        d->tok[i] = t[i];
        d->pos[i] = p0 + i;
        d->seq[i] = slot;
    }
    int32_t want = n - 1;
    int e = ob_ctx_forward(d->ctx, n, d->tok, d->pos, d->seq, &want, 1, d->logits, NULL);
    if (!e)
        e = ob_argmax(d->logits, d->n_vocab, pick);
    return e;
}

int ob_drafter_draft(void *user, const int32_t *t, int n, int k, int32_t *out)
{
    struct ob_drafter *d = user;
    if (d->error[0])
        return -1;
    if (k > d->n_ctx - n + 1)                    /* the last guess is not fed */
        k = d->n_ctx - n + 1;
    if (n < 1 || k < 1)
        return 0;
    int common, i = pick_slot(d, t, n, &common);
    struct dslot *s = &d->slots[i];
    s->used = ++d->tick;
    int from = common < n ? common : n - 1;      /* the last token is fed for its logits */
    s->n = from;                                 /* K/V past it are stale now */
    int m = 0, e = run(d, i, t + from, n - from, from, &out[0]);
    if (!e) {
        memcpy(s->tok + from, t + from, (size_t)(n - from) * sizeof *t);
        s->n = n;
        m = 1;
    }
    const struct ob_tok *tok = ob_model_tok(d->m);
    while (!e && m < k && !ob_tok_is_special(tok, out[m - 1])) {
        if (!(e = run(d, i, &out[m - 1], 1, n + m - 1, &out[m]))) {
            s->tok[s->n++] = out[m - 1];
            m++;
        }
    }
    if (e) {
        snprintf(d->error, sizeof d->error, "draft model: %s", ob_errmsg());
        return -1;
    }
    return m;
}

const char *ob_drafter_error(const struct ob_drafter *d)
{
    return d->error[0] ? d->error : NULL;
}

struct ob_model *ob_drafter_model(const struct ob_drafter *d)
{
    return d->m;
}

const char *ob_drafter_route(const struct ob_drafter *d)
{
    return ob_ctx_route(d->ctx);
}
