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
    int32_t *tok, *pos, *seq;      /* one pass's rows, [cap_rows] */
    int cap_rows;
    int32_t *want;                 /* [n_slots] */
    float *logits;                 /* a row per slot, [n_slots * n_vocab] */
    bool *taken;                   /* [n_slots]: a slot of a sequence of this call */
    int *batch_slot, *batch_active;   /* [n_slots]: each sequence's slot, whether it guesses */
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
        d->want = malloc((size_t)d->n_slots * sizeof *d->want);
        d->logits = malloc((size_t)d->n_slots * d->n_vocab * sizeof *d->logits);
        d->taken = malloc((size_t)d->n_slots * sizeof *d->taken);
        d->batch_slot = malloc((size_t)d->n_slots * sizeof *d->batch_slot);
        d->batch_active = malloc((size_t)d->n_slots * sizeof *d->batch_active);
        bool oom = !d->slots || !d->want || !d->logits || !d->taken || !d->batch_slot ||
                   !d->batch_active;
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
    free(d->want);
    free(d->logits);
    free(d->taken);
    free(d->batch_slot);
    free(d->batch_active);
    ob_ctx_free(d->ctx);
    ob_model_close(d->m);
    free(d);
}

/* the slot to draft t[0..n) in (not one of taken[]) and how many of its tokens are t's */
static int pick_slot(struct ob_drafter *d, const int32_t *t, int n, const bool *taken,
                     int *common)
{
    int best = -1, best_len = -1;
    for (int i = 0; i < d->n_slots; i++) {
        const struct dslot *s = &d->slots[i];
        if (taken[i])
            continue;
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

/* room for n rows in the row arrays */
static int rows_fit(struct ob_drafter *d, int n)
{
    if (n <= d->cap_rows)
        return 0;
    int32_t *tok = realloc(d->tok, (size_t)n * sizeof *tok);
    if (tok)
        d->tok = tok;
    int32_t *pos = realloc(d->pos, (size_t)n * sizeof *pos);
    if (pos)
        d->pos = pos;
    int32_t *seq = realloc(d->seq, (size_t)n * sizeof *seq);
    if (seq)
        d->seq = seq;
    if (!tok || !pos || !seq)
        return ob_seterr(OB_ENOMEM, "out of memory");
    d->cap_rows = n;
    return 0;
}

static void add_row(struct ob_drafter *d, int *n, int32_t tok, int pos, int slot)
{
    d->tok[*n] = tok;
    d->pos[*n] = pos;
    d->seq[*n] = slot;
    (*n)++;
}

/*
 * Every sequence's guesses in lockstep, one forward pass a guess: the first pass feeds each
 * sequence's tokens its slot does not hold yet (at least its last one), the next ones each
 * active sequence's last guess; a sequence stops at k guesses or after a special token.
 */
int ob_drafter_draft_many(void *user, struct ob_draft_seq *q, int n_seq)
{
    struct ob_drafter *d = user;
    if (d->error[0])
        return -1;
    int rows = 0, kmax = 0;
    int *slot = d->batch_slot, *active = d->batch_active;
    for (int i = d->n_slots; i < n_seq; i++)      /* no slot left for these */
        q[i].m = 0;
    n_seq = n_seq < d->n_slots ? n_seq : d->n_slots;
    memset(d->taken, 0, (size_t)d->n_slots * sizeof *d->taken);
    for (int i = 0; i < n_seq; i++) {
        struct ob_draft_seq *x = &q[i];
        x->m = 0;
        slot[i] = -1;
        if (x->k > d->n_ctx - x->n + 1)          /* the last guess is not fed */
            x->k = d->n_ctx - x->n + 1;
        if (x->n < 1 || x->n > d->n_ctx || x->k < 0)
            continue;
        int common;
        slot[i] = pick_slot(d, x->t, x->n, d->taken, &common);
        d->taken[slot[i]] = true;
        struct dslot *s = &d->slots[slot[i]];
        s->used = ++d->tick;
        s->n = common < x->n ? common : x->n - 1;   /* the last token is fed for its logits;
                                                       K/V past it are stale now */
        rows += x->n - s->n;
        kmax = x->k > kmax ? x->k : kmax;
    }
    if (rows_fit(d, rows > n_seq ? rows : n_seq))
        goto fail;
    /* the first pass: the tokens each slot lacks (k = 0: only those) */
    int n = 0, n_want = 0;
    for (int i = 0; i < n_seq; i++) {
        active[i] = false;
        if (slot[i] < 0)
            continue;
        struct dslot *s = &d->slots[slot[i]];
        for (int p = s->n; p < q[i].n; p++)
            add_row(d, &n, q[i].t[p], p, slot[i]);
        memcpy(s->tok + s->n, q[i].t + s->n, (size_t)(q[i].n - s->n) * sizeof *q[i].t);
        s->n = q[i].n;
        active[i] = q[i].k > 0;
        if (active[i])
            d->want[n_want++] = n - 1;
    }
    const struct ob_tok *tok = ob_model_tok(d->m);
    for (int g = 0; g < (kmax > 0 ? kmax : 1) && n > 0; g++) {
        if (ob_ctx_forward(d->ctx, n, d->tok, d->pos, d->seq, d->want, n_want, d->logits, NULL))
            goto fail;
        int w = 0;
        n = n_want = 0;
        for (int i = 0; i < n_seq; i++) {
            if (!active[i])
                continue;
            struct ob_draft_seq *x = &q[i];
            if (ob_argmax(d->logits + (size_t)w++ * d->n_vocab, d->n_vocab, &x->out[x->m]))
                goto fail;
            x->m++;
            active[i] = x->m < x->k && !ob_tok_is_special(tok, x->out[x->m - 1]);
            if (!active[i])
                continue;
            struct dslot *s = &d->slots[slot[i]];   /* the next pass feeds this guess */
            s->tok[s->n++] = x->out[x->m - 1];
            d->want[n_want++] = n;
            add_row(d, &n, x->out[x->m - 1], s->n - 1, slot[i]);
        }
    }
    return 0;
fail:   /* the call that failed left its message for ob_errmsg() */
    snprintf(d->error, sizeof d->error, "draft model: %s", ob_errmsg());
    return -1;
}

int ob_drafter_draft(void *user, const int32_t *t, int n, int k, int32_t *out)
{
    struct ob_draft_seq q = {.t = t, .n = n, .k = k, .out = out};
    return ob_drafter_draft_many(user, &q, 1) < 0 ? -1 : q.m;
}

const char *ob_drafter_error(const struct ob_drafter *d)
{
    return d->error[0] ? d->error : NULL;
}
