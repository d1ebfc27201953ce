/*
 * agree.c — token streams read from result records, compared position by position (the
 * definitions are in agree.h), and the two reports built on that: 1b-agree's (inputs,
 * repetition, pairs) and 1b-batchrep's (states over rounds of identical copies).
 *
 * Numbers in the reports: counts are exact integers; |dlogp| is the difference of the two
 * float32 values taken in double (exact unless their magnitudes are more than 2^29 apart),
 * summed in a fixed order (records in input order, positions ascending), so a report is itself
 * reproducible.
 */
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "agree.h"
#include "sb.h"
#include "strmap.h"

const struct ob_opt_word ob_agree_match_words[] = {
    {"id", OB_MATCH_ID}, {"text", OB_MATCH_TEXT}, {NULL, 0},
};

/* ---- reading streams ------------------------------------------------------------------------- */

void ob_agree_rec_free(struct ob_agree_rec *r)
{
    if (!r)
        return;
    for (int i = 0; i < r->n; i++) {
        free(r->t[i].key);
        for (int k = 0; k < r->t[i].n_top; k++)
            free(r->t[i].top[k].key);
        free(r->t[i].top);
    }
    free(r->t);
    free(r->id);
    free(r->route);
    free(r->error);
    memset(r, 0, sizeof *r);
}

static int oom(void)
{
    return ob_seterr(OB_ENOMEM, "out of memory");
}

static const cJSON *field(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return v && !cJSON_IsNull(v) ? v : NULL;
}

/* "id": an integer token id in [0, 2^31) */
static int read_id(const cJSON *o, int32_t *id, const char *where)
{
    const cJSON *v = field(o, "id");
    *id = -1;
    if (!v)
        return 0;
    if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble) || v->valuedouble < 0 ||
        v->valuedouble > 2147483647.0)
        return ob_seterr(OB_EFORMAT, "%s: 'id' is not a token id", where);
    *id = (int32_t)v->valuedouble;
    return 0;
}

/* the matching key of a token: its "bytes" when given (exact, even for part of a UTF-8
 * sequence), else its "text" */
static int read_key(const cJSON *o, char **key, size_t *len, bool *has, const char *where)
{
    const cJSON *b = field(o, "bytes"), *t = field(o, "text");
    if (!t)
        t = field(o, "token");     /* the wire's name, should a record carry it */
    *key = NULL;
    *len = 0;
    *has = false;
    if (b) {
        if (!cJSON_IsArray(b))
            return ob_seterr(OB_EFORMAT, "%s: 'bytes' is not an array", where);
        int n = cJSON_GetArraySize(b);
        char *k = malloc((size_t)n + 1);
        if (!k)
            return oom();
        int i = 0;
        const cJSON *it;
        cJSON_ArrayForEach(it, b) {
            if (!cJSON_IsNumber(it) || it->valuedouble != floor(it->valuedouble) ||
                it->valuedouble < 0 || it->valuedouble > 255) {
                free(k);
                return ob_seterr(OB_EFORMAT, "%s: 'bytes' holds a value that is not a byte",
                                 where);
            }
            k[i++] = (char)(unsigned char)it->valuedouble;
        }
        k[i] = 0;
        *key = k;
        *len = (size_t)i;
        *has = true;
        return 0;
    }
    if (t) {
        if (!cJSON_IsString(t))
            return ob_seterr(OB_EFORMAT, "%s: 'text' is not a string", where);
        if (!(*key = strdup(t->valuestring)))
            return oom();
        *len = strlen(t->valuestring);
        *has = true;
    }
    return 0;
}

static uint32_t f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

/* "logprob" (a decimal) and "bits" (8 hex digits): the bits win, and must be the decimal's
 * float32 when both are given; a decimal that is not exactly a float32 is counted */
static int read_lp(const cJSON *o, bool *has, float *lp, int64_t *nonf32, const char *where)
{
    const cJSON *l = field(o, "logprob"), *b = field(o, "bits");
    *has = false;
    *lp = 0;
    if (!l && !b)
        return 0;
    float fl = 0, fb = 0;
    bool exact = true;
    if (l && ob_json_get_f32(l, &fl, &exact))
        return ob_errprefix(OB_EFORMAT, "%s: 'logprob'", where);
    if (b && (!cJSON_IsString(b) || ob_f32_from_hex(b->valuestring, &fb)))
        return ob_seterr(OB_EFORMAT, "%s: 'bits' is not 8 hex digits", where);
    if (l && b && f32_bits(fl) != f32_bits(fb) && !(isnan(fl) && isnan(fb)))
        return ob_seterr(OB_EFORMAT, "%s: 'logprob' %.9g does not match 'bits' %s", where,
                         (double)fl, b->valuestring);
    /* without bits the decimal is the value: it is a float32 when it is one exactly (a
     * float32 widened to double, as servers print) or is the shortest decimal of one (as 1b's
     * records print); anything else was computed or printed in more precision, and is counted */
    if (!b && !exact && isfinite(fl)) {
        char buf[OB_F32_BUFSZ];
        exact = strtod(ob_f32_str(fl, buf), NULL) == l->valuedouble;
    }
    if (!b && !exact)
        (*nonf32)++;
    *has = true;
    *lp = b ? fb : fl;
    return 0;
}

static int read_token(const cJSON *o, struct ob_agree_tok *t, int64_t *nonf32, int pos)
{
    char where[64];
    snprintf(where, sizeof where, "token %d", pos);
    if (!cJSON_IsObject(o))
        return ob_seterr(OB_EFORMAT, "%s is not an object", where);
    int e;
    if ((e = read_id(o, &t->id, where)) || (e = read_key(o, &t->key, &t->key_len, &t->has_key,
                                                         where)))
        return e;
    if (t->id < 0 && !t->has_key)
        return ob_seterr(OB_EFORMAT, "%s has neither an 'id' nor a 'text'", where);
    if ((e = read_lp(o, &t->has_lp, &t->lp, nonf32, where)))
        return e;
    const cJSON *top = field(o, "top");
    if (!top)
        top = field(o, "top_logprobs");
    if (!top)
        return 0;
    if (!cJSON_IsArray(top))
        return ob_seterr(OB_EFORMAT, "%s: 'top' is not an array", where);
    int n = cJSON_GetArraySize(top);
    if (n == 0)
        return 0;
    if (!(t->top = calloc((size_t)n, sizeof *t->top)))
        return oom();
    const cJSON *it;
    cJSON_ArrayForEach(it, top) {
        struct ob_agree_top *x = &t->top[t->n_top];
        snprintf(where, sizeof where, "token %d top %d", pos, t->n_top);
        if (!cJSON_IsObject(it))
            return ob_seterr(OB_EFORMAT, "%s is not an object", where);
        bool has_key, has_lp;
        if ((e = read_id(it, &x->id, where)) ||
            (e = read_key(it, &x->key, &x->key_len, &has_key, where)))
            return e;
        t->n_top++;
        if (x->id < 0 && !has_key)
            return ob_seterr(OB_EFORMAT, "%s has neither an 'id' nor a 'text'", where);
        if ((e = read_lp(it, &has_lp, &x->lp, nonf32, where)))
            return e;
        if (!has_lp)
            return ob_seterr(OB_EFORMAT, "%s has no 'logprob'", where);
    }
    return 0;
}

int ob_agree_tokens_from_json(const cJSON *toks, struct ob_agree_rec *r)
{
    if (!cJSON_IsArray(toks))
        return ob_seterr(OB_EFORMAT, "'tokens' is not an array");
    int n = cJSON_GetArraySize(toks);
    if (n > 0 && !(r->t = calloc((size_t)n, sizeof *r->t)))
        return oom();
    const cJSON *it;
    cJSON_ArrayForEach(it, toks) {
        struct ob_agree_tok *t = &r->t[r->n++];
        int e = read_token(it, t, &r->nonf32, r->n - 1);
        if (e)
            return e;
        r->missing_lp += !t->has_lp;
        r->no_id += t->id < 0;
    }
    return 0;
}

int ob_agree_rec_from_json(const cJSON *rec, struct ob_agree_rec *r)
{
    memset(r, 0, sizeof *r);
    const cJSON *id = field(rec, "id"), *rep = field(rec, "repeat"), *route = field(rec, "route");
    const cJSON *err = field(rec, "error"), *toks = field(rec, "tokens");
    const cJSON *nf = field(rec, "nonf32_values");
    char buf[OB_F32_BUFSZ];
    if (cJSON_IsString(id))
        r->id = strdup(id->valuestring);
    else if (cJSON_IsNumber(id))
        r->id = strdup(ob_f64_str(id->valuedouble, buf));
    else
        return ob_seterr(OB_EFORMAT, "no 'id' (a string or a number)");
    if (!r->id)
        return oom();
    int e = OB_EFORMAT;
    if (rep && (!cJSON_IsNumber(rep) || rep->valuedouble != floor(rep->valuedouble) ||
                rep->valuedouble < 0 || rep->valuedouble > 1e15)) {
        ob_seterr(e, "id %s: 'repeat' is not a whole number", r->id);
        goto fail;
    }
    r->repeat = rep ? (int64_t)rep->valuedouble : 0;
    if (route && cJSON_IsString(route) && !(r->route = strdup(route->valuestring))) {
        e = oom();
        goto fail;
    }
    if (err) {
        if (cJSON_IsString(err)) {
            r->error = strdup(err->valuestring);
        } else {
            char *s = cJSON_PrintUnformatted(err);
            r->error = s ? strdup(s) : NULL;
            cJSON_free(s);
        }
        if (!r->error) {
            e = oom();
            goto fail;
        }
    }
    if (nf) {
        if (!cJSON_IsNumber(nf) || nf->valuedouble < 0 || nf->valuedouble > 1e15 ||
            nf->valuedouble != floor(nf->valuedouble)) {
            ob_seterr(e, "id %s: 'nonf32_values' is not a count", r->id);
            goto fail;
        }
        r->nonf32 = (int64_t)nf->valuedouble;
    }
    if (!toks) {
        if (r->error)
            return 0;                  /* a failed request: no tokens, counted as such */
        ob_seterr(e, "id %s: no 'tokens' (not a result record)", r->id);
        goto fail;
    }
    if ((e = ob_agree_tokens_from_json(toks, r))) {
        if (e == OB_EFORMAT)
            ob_errprefix(e, "id %s", r->id);
        goto fail;
    }
    return 0;
fail:
    ob_agree_rec_free(r);
    return e;
}

int ob_agree_rec_from_info(const struct ob_token_info *ti, int n, bool logprobs,
                           struct ob_agree_rec *r)
{
    memset(r, 0, sizeof *r);
    if (!(r->id = strdup("")))
        return oom();
    if (n > 0 && !(r->t = calloc((size_t)n, sizeof *r->t))) {
        ob_agree_rec_free(r);
        return oom();
    }
    for (int i = 0; i < n; i++) {
        struct ob_agree_tok *t = &r->t[r->n++];
        t->id = ti[i].id;
        t->has_lp = logprobs;
        t->lp = logprobs ? ti[i].logprob : 0;
        r->missing_lp += !logprobs;
        int k = logprobs ? ti[i].n_top : 0;
        if (k > 0 && !(t->top = calloc((size_t)k, sizeof *t->top))) {
            ob_agree_rec_free(r);
            return oom();
        }
        for (int j = 0; j < k; j++)
            t->top[j] = (struct ob_agree_top){.id = ti[i].top[j].id, .lp = ti[i].top[j].logprob};
        t->n_top = k;
    }
    return 0;
}

void ob_agree_set_free(struct ob_agree_set *s)
{
    if (!s)
        return;
    for (int i = 0; i < s->n; i++)
        ob_agree_rec_free(&s->recs[i]);
    free(s->recs);
    free(s->name);
    free(s);
}

int ob_agree_read(FILE *f, const char *name, struct ob_agree_set **out)
{
    *out = NULL;
    struct ob_agree_set *s = calloc(1, sizeof *s);
    if (!s || !(s->name = strdup(name))) {
        free(s);
        return oom();
    }
    struct ob_jsonl *in;
    int e = ob_jsonl_open(f, name, &in);
    if (e) {
        ob_agree_set_free(s);
        return e;
    }
    size_t cap = 0;
    for (;;) {
        cJSON *rec;
        int r = ob_jsonl_next(in, &rec);
        if (r <= 0) {
            e = r;
            break;
        }
        if (!OB_GROW(s->recs, cap, (size_t)s->n + 1)) {
            cJSON_Delete(rec);
            e = oom();
            break;
        }
        e = ob_agree_rec_from_json(rec, &s->recs[s->n]);
        cJSON_Delete(rec);
        if (e) {
            if (e == OB_EFORMAT)
                ob_errprefix(e, "%s:%llu", name, (unsigned long long)ob_jsonl_line(in));
            break;
        }
        s->recs[s->n++].line = ob_jsonl_line(in);
    }
    ob_jsonl_close(in);
    if (e) {
        ob_agree_set_free(s);
        return e;
    }
    *out = s;
    return 0;
}

/* ---- comparing ------------------------------------------------------------------------------- */

static bool same_key(const char *a, size_t na, const char *b, size_t nb)
{
    return na == nb && (na == 0 || memcmp(a, b, na) == 0);
}

bool ob_agree_same_token(const struct ob_agree_tok *a, const struct ob_agree_tok *b, int match)
{
    if (match == OB_MATCH_ID)
        return a->id >= 0 && a->id == b->id;
    return a->has_key && b->has_key && same_key(a->key, a->key_len, b->key, b->key_len);
}

static bool same_top_token(const struct ob_agree_top *a, const struct ob_agree_top *b, int match)
{
    if (match == OB_MATCH_ID)
        return a->id >= 0 && a->id == b->id;
    return a->key && b->key && same_key(a->key, a->key_len, b->key, b->key_len);
}

static bool same_bits(float a, float b)
{
    return f32_bits(a) == f32_bits(b);
}

/* the top lists agree on every entry both have, and have as many */
static bool same_top(const struct ob_agree_tok *a, const struct ob_agree_tok *b, int match)
{
    if (a->n_top != b->n_top)
        return false;
    for (int k = 0; k < a->n_top; k++)
        if (!same_top_token(&a->top[k], &b->top[k], match) || !same_bits(a->top[k].lp,
                                                                          b->top[k].lp))
            return false;
    return true;
}

/* identity of one position: for repetition a token without an id is compared by its text
 * even under OB_MATCH_ID, so that a route without ids can still be checked against itself */
static bool same_position(const struct ob_agree_tok *a, const struct ob_agree_tok *b, int match)
{
    int m = match == OB_MATCH_ID && a->id < 0 && b->id < 0 ? OB_MATCH_TEXT : match;
    if (!ob_agree_same_token(a, b, m) || a->has_lp != b->has_lp)
        return false;
    if (a->has_lp && !same_bits(a->lp, b->lp))
        return false;
    if (a->n_top != b->n_top)
        return false;
    for (int k = 0; k < a->n_top; k++) {
        const struct ob_agree_top *x = &a->top[k], *y = &b->top[k];
        int mt = match == OB_MATCH_ID && x->id < 0 && y->id < 0 ? OB_MATCH_TEXT : match;
        if (!same_top_token(x, y, mt) || !same_bits(x->lp, y->lp))
            return false;
    }
    return true;
}

bool ob_agree_identical(const struct ob_agree_rec *a, const struct ob_agree_rec *b, int match)
{
    if (a->n != b->n)
        return false;
    for (int i = 0; i < a->n; i++)
        if (!same_position(&a->t[i], &b->t[i], match))
            return false;
    return true;
}

/* FNV-1a, 64 bit */
static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) {
        h ^= b[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

static uint64_t fnv_token(uint64_t h, int32_t id, const char *key, size_t len, int match)
{
    if (match == OB_MATCH_ID && id >= 0)
        return fnv(fnv(h, "i", 1), &id, sizeof id);
    uint64_t l = len;
    h = fnv(fnv(h, "t", 1), &l, sizeof l);
    return key ? fnv(h, key, len) : h;
}

uint64_t ob_agree_fingerprint(const struct ob_agree_rec *r, int match)
{
    uint64_t h = 0xcbf29ce484222325ull;
    int32_t n = r->n;
    h = fnv(h, &n, sizeof n);
    for (int i = 0; i < r->n; i++) {
        const struct ob_agree_tok *t = &r->t[i];
        h = fnv_token(h, t->id, t->key, t->key_len, match);
        uint32_t bits = t->has_lp ? f32_bits(t->lp) : 0;
        unsigned char has = t->has_lp;
        h = fnv(fnv(h, &has, 1), &bits, 4);
        int32_t k = t->n_top;
        h = fnv(h, &k, sizeof k);
        for (int j = 0; j < t->n_top; j++) {
            h = fnv_token(h, t->top[j].id, t->top[j].key, t->top[j].key_len, match);
            bits = f32_bits(t->top[j].lp);
            h = fnv(h, &bits, 4);
        }
    }
    return h;
}

bool ob_agree_margin(const struct ob_agree_tok *t, double *margin)
{
    if (t->n_top < 2)
        return false;
    *margin = (double)t->top[0].lp - (double)t->top[1].lp;
    return true;
}

/* |a - b| in double; identical bits are 0 (so NaN == NaN), other non-finite pairs infinite */
static double abs_delta(float a, float b)
{
    if (same_bits(a, b))
        return 0;
    if (!isfinite(a) || !isfinite(b))
        return INFINITY;
    return fabs((double)a - (double)b);
}

void ob_agree_cmp_recs(const struct ob_agree_rec *a, const struct ob_agree_rec *b, int match,
                       struct ob_agree_cmp *c)
{
    memset(c, 0, sizeof *c);
    c->len_a = a->n;
    c->len_b = b->n;
    c->aligned = a->n < b->n ? a->n : b->n;
    c->max_pos = -1;
    c->div_pos = -1;
    for (int64_t i = 0; i < c->aligned; i++) {
        const struct ob_agree_tok *x = &a->t[i], *y = &b->t[i];
        if (!ob_agree_same_token(x, y, match)) {
            if (c->div_pos < 0)
                c->div_pos = i;
            continue;
        }
        c->common++;
        if (!same_top(x, y, match))
            c->top_diff++;
        if (!x->has_lp || !y->has_lp)
            continue;
        c->n_lp++;
        c->exact += same_bits(x->lp, y->lp);
        double d = abs_delta(x->lp, y->lp);
        c->sum_abs += d;
        if (c->max_pos < 0 || d > c->max_abs) {
            c->max_abs = d;
            c->max_pos = i;
        }
    }
    if (c->div_pos < 0 && a->n != b->n)
        c->div_pos = c->aligned;
    c->identical = ob_agree_identical(a, b, match);
}

/* ---- JSON helpers ---------------------------------------------------------------------------- */

static void add_f64(cJSON *o, const char *k, double v)
{
    cJSON_AddItemToObject(o, k, ob_json_f64(v));
}

static void add_rate(cJSON *o, const char *k, int64_t num, int64_t den)
{
    if (den > 0)
        add_f64(o, k, (double)num / (double)den);
    else
        cJSON_AddNullToObject(o, k);
}

static cJSON *token_json(const struct ob_agree_tok *t)
{
    cJSON *o = cJSON_CreateObject();
    if (t->id >= 0)
        ob_json_add_int(o, "id", t->id);
    if (t->has_key) {
        char *s = ob_utf8_sanitize(t->key, t->key_len);
        cJSON_AddStringToObject(o, "text", s ? s : "");
        free(s);
    }
    if (t->has_lp)
        cJSON_AddItemToObject(o, "logprob", ob_json_f32(t->lp));
    double m;
    if (ob_agree_margin(t, &m))
        add_f64(o, "margin", m);
    else
        cJSON_AddNullToObject(o, "margin");
    return o;
}

/* names of inputs and states: A to Z, then S27, S28, ... */
static void label(int i, char out[16])
{
    if (i < 26)
        snprintf(out, 16, "%c", 'A' + i);
    else
        snprintf(out, 16, "S%d", i + 1);
}

/* ---- 1b-agree ---------------------------------------------------------------------------------- */

/* an input indexed by id: groups of records (indices into recs) sorted by repeat */
struct group {
    int *idx;
    int n;
    size_t cap;
};
struct indexed {
    const struct ob_agree_set *s;
    struct ob_strmap *ids;         /* id -> group */
    struct group *g;
    int ng;
};

static void index_free(struct indexed *x)
{
    for (int i = 0; i < x->ng; i++)
        free(x->g[i].idx);
    free(x->g);
    ob_strmap_free(x->ids);
}

static int by_repeat(const void *a, const void *b, void *set)
{
    const struct ob_agree_set *s = set;
    const struct ob_agree_rec *x = &s->recs[*(const int *)a];
    const struct ob_agree_rec *y = &s->recs[*(const int *)b];
    return x->repeat < y->repeat ? -1 : x->repeat > y->repeat;
}

static int index_set(const struct ob_agree_set *s, struct indexed *x)
{
    *x = (struct indexed){.s = s};
    if (!(x->ids = ob_strmap_new((size_t)s->n + 1)) ||
        (s->n && !(x->g = calloc((size_t)s->n, sizeof *x->g))))
        return oom();
    for (int i = 0; i < s->n; i++) {
        const struct ob_agree_rec *r = &s->recs[i];
        int64_t gi;
        if (!ob_strmap_get(x->ids, r->id, strlen(r->id), &gi)) {
            gi = x->ng++;
            if (ob_strmap_put(x->ids, r->id, strlen(r->id), gi, false) < 0)
                return oom();
        }
        struct group *g = &x->g[gi];
        if (!OB_GROW(g->idx, g->cap, (size_t)g->n + 1))
            return oom();
        g->idx[g->n++] = i;
    }
    /* sort each group by repeat (stable enough: repeats are unique, checked next) */
    for (int i = 0; i < x->ng; i++) {
        qsort_r(x->g[i].idx, (size_t)x->g[i].n, sizeof(int), by_repeat, (void *)s);
        for (int k = 1; k < x->g[i].n; k++) {
            const struct ob_agree_rec *a = &s->recs[x->g[i].idx[k - 1]];
            const struct ob_agree_rec *b = &s->recs[x->g[i].idx[k]];
            if (a->repeat == b->repeat)
                return ob_seterr(OB_EFORMAT, "%s:%llu: id %s repeat %lld also on line %llu",
                                 s->name, (unsigned long long)(a->line > b->line ? a->line : b->line),
                                 a->id, (long long)a->repeat,
                                 (unsigned long long)(a->line > b->line ? b->line : a->line));
        }
    }
    return 0;
}

static const struct group *find_group(const struct indexed *x, const char *id)
{
    int64_t gi;
    return ob_strmap_get(x->ids, id, strlen(id), &gi) ? &x->g[gi] : NULL;
}

/* the input's own checks: repetition, missing log-probabilities, values not float32 */
static cJSON *input_report(const struct indexed *x, int idx, int match, bool *differs)
{
    const struct ob_agree_set *s = x->s;
    cJSON *o = cJSON_CreateObject();
    char lab[16];
    label(idx, lab);
    cJSON_AddStringToObject(o, "name", lab);
    cJSON_AddStringToObject(o, "file", s->name);
    const char *route = NULL;
    int64_t nonf32 = 0, no_lp = 0, no_id = 0, toks = 0, max_rep = 0;
    for (int i = 0; i < s->n; i++) {
        const struct ob_agree_rec *r = &s->recs[i];
        if (!route && r->route)
            route = r->route;
        nonf32 += r->nonf32;
        no_lp += r->error || r->missing_lp > 0;
        no_id += r->no_id;
        toks += r->n;
        if (r->repeat + 1 > max_rep)
            max_rep = r->repeat + 1;
    }
    if (route)
        cJSON_AddStringToObject(o, "route", route);
    else
        cJSON_AddNullToObject(o, "route");
    ob_json_add_int(o, "records", s->n);
    ob_json_add_int(o, "ids", x->ng);
    ob_json_add_int(o, "tokens", toks);
    ob_json_add_int(o, "repeats", max_rep);
    /* repetition: every repeat of an id identical to its lowest */
    int64_t checked = 0, bad = 0;
    cJSON *nr = cJSON_CreateArray();
    for (int gi = 0; gi < x->ng; gi++) {
        const struct group *g = &x->g[gi];
        if (g->n < 2)
            continue;
        checked++;
        const struct ob_agree_rec *a = &s->recs[g->idx[0]];
        for (int k = 1; k < g->n; k++) {
            const struct ob_agree_rec *b = &s->recs[g->idx[k]];
            if (ob_agree_identical(a, b, match))
                continue;
            bad++;
            int64_t pos = 0;
            while (pos < a->n && pos < b->n && same_position(&a->t[pos], &b->t[pos], match))
                pos++;
            cJSON *d = cJSON_CreateObject();
            cJSON_AddStringToObject(d, "id", a->id);
            ob_json_add_int(d, "repeat", b->repeat);
            ob_json_add_int(d, "against", a->repeat);
            ob_json_add_int(d, "pos", pos);
            cJSON_AddItemToArray(nr, d);
            break;                     /* one report per id */
        }
    }
    if (checked == 0)
        cJSON_AddNullToObject(o, "repeatable");
    else
        cJSON_AddBoolToObject(o, "repeatable", bad == 0);
    ob_json_add_int(o, "ids_repeated", checked);
    cJSON_AddItemToObject(o, "not_repeatable", nr);
    ob_json_add_int(o, "nonf32_values", nonf32);
    ob_json_add_int(o, "records_without_logprobs", no_lp);
    ob_json_add_int(o, "tokens_without_id", no_id);
    cJSON *errs = cJSON_CreateArray();
    for (int i = 0; i < s->n && cJSON_GetArraySize(errs) < 5; i++)
        if (s->recs[i].error) {
            cJSON *e = cJSON_CreateObject();
            cJSON_AddStringToObject(e, "id", s->recs[i].id);
            cJSON_AddStringToObject(e, "error", s->recs[i].error);
            cJSON_AddItemToArray(errs, e);
        }
    cJSON_AddItemToObject(o, "errors", errs);
    /* an empty input is most often a generator that failed upstream in a pipe: nothing was
     * shown to agree */
    if (bad || no_lp || s->n == 0)
        *differs = true;
    return o;
}

/* one prompt of a pair */
static cJSON *prompt_report(const struct ob_agree_rec *a, const struct ob_agree_rec *b,
                            const struct ob_agree_cmp *c)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "id", a->id);
    ob_json_add_int(o, "repeat", a->repeat);
    ob_json_add_int(o, "len_a", c->len_a);
    ob_json_add_int(o, "len_b", c->len_b);
    ob_json_add_int(o, "aligned", c->aligned);
    ob_json_add_int(o, "common", c->common);
    ob_json_add_int(o, "exact_bits", c->exact);
    add_f64(o, "max_abs_dlogp", c->max_abs);
    add_f64(o, "mean_abs_dlogp", c->n_lp ? c->sum_abs / (double)c->n_lp : 0);
    cJSON_AddBoolToObject(o, "identical", c->identical);
    if (c->div_pos < 0) {
        cJSON_AddNullToObject(o, "first_divergence");
        return o;
    }
    cJSON *d = cJSON_CreateObject();
    ob_json_add_int(d, "pos", c->div_pos);
    if (c->div_pos < a->n)
        cJSON_AddItemToObject(d, "a", token_json(&a->t[c->div_pos]));
    else
        cJSON_AddStringToObject(d, "a", "end");
    if (c->div_pos < b->n)
        cJSON_AddItemToObject(d, "b", token_json(&b->t[c->div_pos]));
    else
        cJSON_AddStringToObject(d, "b", "end");
    cJSON_AddItemToObject(o, "first_divergence", d);
    return o;
}

static cJSON *pair_report(const struct indexed *xa, const struct indexed *xb, int ia, int ib,
                          const struct ob_agree_opts *opt, bool *differs)
{
    const struct ob_agree_set *A = xa->s, *B = xb->s;
    cJSON *o = cJSON_CreateObject();
    char la[16], lb[16], pn[40];
    label(ia, la);
    label(ib, lb);
    snprintf(pn, sizeof pn, "%s-%s", la, lb);
    cJSON_AddStringToObject(o, "pair", pn);
    cJSON_AddStringToObject(o, "a", la);
    cJSON_AddStringToObject(o, "b", lb);
    int64_t records = 0, aligned = 0, common = 0, exact = 0, n_lp = 0, top_diff = 0;
    int64_t identical = 0, diverged = 0, no_id = 0;
    double sum = 0, max = 0;
    cJSON *max_at = NULL;
    cJSON *prompts = cJSON_CreateArray(), *only_a = cJSON_CreateArray();
    cJSON *only_b = cJSON_CreateArray();
    int64_t n_only_a = 0, n_only_b = 0;
    for (int gi = 0; gi < xa->ng; gi++) {
        const struct group *ga = &xa->g[gi];
        const char *id = A->recs[ga->idx[0]].id;
        const struct group *gb = find_group(xb, id);
        if (!gb) {
            if (n_only_a++ < 10)
                cJSON_AddItemToArray(only_a, cJSON_CreateString(id));
            continue;
        }
        /* each side's lowest repeat (its other repeats were checked identical to it), or with
         * all_repeats every repeat index both have, in increasing order */
        int ka = 0, kb = 0;
        while (ka < ga->n && kb < gb->n) {
            const struct ob_agree_rec *a = &A->recs[ga->idx[ka]], *b = &B->recs[gb->idx[kb]];
            if (opt->all_repeats && a->repeat < b->repeat) {
                ka++;
                continue;
            }
            if (opt->all_repeats && b->repeat < a->repeat) {
                kb++;
                continue;
            }
            struct ob_agree_cmp c;
            ob_agree_cmp_recs(a, b, opt->match, &c);
            records++;
            aligned += c.aligned;
            common += c.common;
            exact += c.exact;
            n_lp += c.n_lp;
            top_diff += c.top_diff;
            identical += c.identical;
            diverged += c.div_pos >= 0;
            sum += c.sum_abs;
            no_id += a->no_id + b->no_id;
            if (c.max_pos >= 0 && (!max_at || c.max_abs > max)) {
                max = c.max_abs;
                cJSON_Delete(max_at);
                max_at = cJSON_CreateObject();
                cJSON_AddStringToObject(max_at, "id", a->id);
                ob_json_add_int(max_at, "repeat", a->repeat);
                ob_json_add_int(max_at, "pos", c.max_pos);
                cJSON_AddItemToObject(max_at, "a", token_json(&a->t[c.max_pos]));
                cJSON_AddItemToObject(max_at, "b", token_json(&b->t[c.max_pos]));
            }
            cJSON_AddItemToArray(prompts, prompt_report(a, b, &c));
            ka++;
            kb++;
            if (!opt->all_repeats)
                break;
        }
    }
    for (int gi = 0; gi < xb->ng; gi++) {
        const char *id = B->recs[xb->g[gi].idx[0]].id;
        if (!find_group(xa, id) && n_only_b++ < 10)
            cJSON_AddItemToArray(only_b, cJSON_CreateString(id));
    }
    ob_json_add_int(o, "records", records);
    ob_json_add_int(o, "only_a", n_only_a);
    ob_json_add_int(o, "only_b", n_only_b);
    cJSON_AddItemToObject(o, "only_a_ids", only_a);
    cJSON_AddItemToObject(o, "only_b_ids", only_b);
    ob_json_add_int(o, "aligned", aligned);
    ob_json_add_int(o, "common", common);
    add_rate(o, "token_match", common, aligned);
    ob_json_add_int(o, "exact_bits", exact);
    add_rate(o, "exact_bit_rate", exact, common);
    if (n_lp > 0) {
        add_f64(o, "max_abs_dlogp", max);
        add_f64(o, "mean_abs_dlogp", sum / (double)n_lp);
    } else {
        cJSON_AddNullToObject(o, "max_abs_dlogp");
        cJSON_AddNullToObject(o, "mean_abs_dlogp");
    }
    if (max_at)
        cJSON_AddItemToObject(o, "max_at", max_at);
    else
        cJSON_AddNullToObject(o, "max_at");
    ob_json_add_int(o, "top_diff", top_diff);
    ob_json_add_int(o, "identical_records", identical);
    ob_json_add_int(o, "diverged_records", diverged);
    ob_json_add_int(o, "tokens_without_id", no_id);
    bool is_exact = n_only_a == 0 && n_only_b == 0 && identical == records;
    bool pass = is_exact;
    if (opt->gated) {
        double mean = n_lp > 0 ? sum / (double)n_lp : 0;
        pass = n_only_a == 0 && n_only_b == 0 && (n_lp > 0 || identical == records);
        if (pass && opt->max_abs >= 0 && n_lp > 0)
            pass = max <= opt->max_abs;
        if (pass && opt->mean_abs >= 0 && n_lp > 0)
            pass = mean <= opt->mean_abs;
        if (pass && opt->min_match >= 0 && aligned > 0)
            pass = (double)common / (double)aligned >= opt->min_match;
    }
    cJSON_AddBoolToObject(o, "exact", is_exact);
    cJSON_AddBoolToObject(o, "pass", pass);
    cJSON_AddItemToObject(o, "prompts", prompts);
    if (!pass)
        *differs = true;
    return o;
}

int ob_agree_compare(struct ob_agree_set *const *sets, int n, const struct ob_agree_opts *opt,
                     cJSON **report, bool *differs)
{
    *report = NULL;
    *differs = false;
    if (n < 1)
        return ob_seterr(OB_EUSAGE, "nothing to compare");
    struct indexed *x = calloc((size_t)n, sizeof *x);
    if (!x)
        return oom();
    int e = 0;
    for (int i = 0; i < n && !e; i++)
        e = index_set(sets[i], &x[i]);
    cJSON *o = NULL;
    if (!e) {
        o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "match_by", opt->match == OB_MATCH_TEXT ? "text" : "id");
        cJSON_AddBoolToObject(o, "all_repeats", opt->all_repeats);
        cJSON *g = cJSON_CreateObject();
        if (opt->max_abs >= 0)
            add_f64(g, "max_abs_dlogp", opt->max_abs);
        if (opt->mean_abs >= 0)
            add_f64(g, "mean_abs_dlogp", opt->mean_abs);
        if (opt->min_match >= 0)
            add_f64(g, "token_match", opt->min_match);
        cJSON_AddItemToObject(o, "gates", g);
        cJSON *ins = cJSON_CreateArray();
        for (int i = 0; i < n; i++)
            cJSON_AddItemToArray(ins, input_report(&x[i], i, opt->match, differs));
        cJSON_AddItemToObject(o, "inputs", ins);
        cJSON *ps = cJSON_CreateArray();
        for (int i = 0; i < n; i++)
            for (int j = i + 1; j < n; j++)
                cJSON_AddItemToArray(ps, pair_report(&x[i], &x[j], i, j, opt, differs));
        cJSON_AddItemToObject(o, "pairs", ps);
        cJSON_AddStringToObject(o, "verdict", *differs ? "differ" : "agree");
    }
    for (int i = 0; i < n; i++)
        index_free(&x[i]);
    free(x);
    if (e)
        return e;
    *report = o;
    return 0;
}

/* ---- 1b-batchrep ------------------------------------------------------------------------------- */

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* {min, median, max} of n values (sorted in place); the median of an even count is the mean
 * of the two middle values */
static cJSON *spread(double *v, int n)
{
    cJSON *o = cJSON_CreateObject();
    if (n == 0) {
        cJSON_AddNullToObject(o, "min");
        cJSON_AddNullToObject(o, "median");
        cJSON_AddNullToObject(o, "max");
        return o;
    }
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    add_f64(o, "min", v[0]);
    add_f64(o, "median", n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2);
    add_f64(o, "max", v[n - 1]);
    return o;
}

static void hex64(uint64_t h, char out[17])
{
    snprintf(out, 17, "%016llx", (unsigned long long)h);
}

int ob_batchrep_report(const struct ob_agree_rec *copies, int width, int rounds,
                       const struct ob_agree_rec *solo, int match, cJSON **report, int *states,
                       int *solo_identical)
{
    *report = NULL;
    if (width < 1 || rounds < 1)
        return ob_seterr(OB_EUSAGE, "width and rounds must be at least 1");
    if (rounds > INT_MAX / width)
        return ob_seterr(OB_EUSAGE, "width %d times rounds %d is too many copies", width, rounds);
    int total = width * rounds;
    int *state = malloc((size_t)total * sizeof *state);
    int *rep = malloc((size_t)total * sizeof *rep);        /* state -> its first copy */
    int *count = calloc((size_t)total, sizeof *count);
    double *v1 = malloc((size_t)total * sizeof *v1), *v2 = malloc((size_t)total * sizeof *v2);
    int *grp = calloc((size_t)total, sizeof *grp);
    if (!state || !rep || !count || !v1 || !v2 || !grp) {
        free(state), free(rep), free(count), free(v1), free(v2), free(grp);
        return oom();
    }
    int ns = 0;
    for (int r = 0; r < rounds; r++)         /* every copy, in order: i = r * width + k */
        for (int k = 0, i = r * width; k < width; k++, i++) {
            int s = 0;
            while (s < ns && !ob_agree_identical(&copies[rep[s]], &copies[i], match))
                s++;
            if (s == ns)
                rep[ns++] = i;
            state[i] = s;
            count[s]++;
        }
    cJSON *o = cJSON_CreateObject();
    ob_json_add_int(o, "width", width);
    ob_json_add_int(o, "rounds", rounds);
    ob_json_add_int(o, "copies", total);
    ob_json_add_int(o, "states", ns);
    cJSON_AddBoolToObject(o, "repeatable", ns == 1);
    /* per round: each copy's state, the distinct ones, the largest identical group */
    cJSON *rd = cJSON_CreateArray();
    for (int r = 0; r < rounds; r++) {
        cJSON *x = cJSON_CreateObject(), *ls = cJSON_CreateArray();
        ob_json_add_int(x, "round", r);
        memset(grp, 0, (size_t)total * sizeof *grp);
        int distinct = 0, largest = 0;
        for (int k = 0; k < width; k++) {
            int s = state[r * width + k];
            char lab[16];
            label(s, lab);
            cJSON_AddItemToArray(ls, cJSON_CreateString(lab));
            distinct += grp[s]++ == 0;
            if (grp[s] > largest)
                largest = grp[s];
        }
        cJSON_AddItemToObject(x, "states", ls);
        ob_json_add_int(x, "distinct", distinct);
        ob_json_add_int(x, "identical", largest);
        cJSON_AddItemToArray(rd, x);
    }
    cJSON_AddItemToObject(o, "per_round", rd);
    /* same-index pairs between consecutive rounds */
    int same = 0;
    for (int r = 1; r < rounds; r++)
        for (int k = 0; k < width; k++)
            same += state[r * width + k] == state[(r - 1) * width + k];
    cJSON *rr = cJSON_CreateObject();
    ob_json_add_int(rr, "identical", same);
    ob_json_add_int(rr, "pairs", (int64_t)(rounds - 1) * width);
    cJSON_AddItemToObject(o, "round_to_round", rr);
    /* the worst |dlogp| between two states, over their common positions */
    double worst = 0;
    cJSON *worst_at = NULL;
    for (int a = 0; a < ns; a++)
        for (int b = a + 1; b < ns; b++) {
            struct ob_agree_cmp c;
            ob_agree_cmp_recs(&copies[rep[a]], &copies[rep[b]], match, &c);
            if (c.max_pos >= 0 && (!worst_at || c.max_abs > worst)) {
                worst = c.max_abs;
                cJSON_Delete(worst_at);
                worst_at = cJSON_CreateObject();
                char la[16], lb[16];
                label(a, la);
                label(b, lb);
                cJSON_AddStringToObject(worst_at, "a", la);
                cJSON_AddStringToObject(worst_at, "b", lb);
                ob_json_add_int(worst_at, "pos", c.max_pos);
            }
        }
    add_f64(o, "worst_abs_dlogp", worst);
    if (worst_at)
        cJSON_AddItemToObject(o, "worst_at", worst_at);
    else
        cJSON_AddNullToObject(o, "worst_at");
    /* the states, and each against the solo stream */
    int n_same_solo = 0, nv = 0;
    cJSON *sl = cJSON_CreateArray();
    for (int s = 0; s < ns; s++) {
        const struct ob_agree_rec *x = &copies[rep[s]];
        cJSON *so = cJSON_CreateObject();
        char lab[16], fp[17];
        label(s, lab);
        hex64(ob_agree_fingerprint(x, match), fp);
        cJSON_AddStringToObject(so, "state", lab);
        cJSON_AddStringToObject(so, "fingerprint", fp);
        ob_json_add_int(so, "copies", count[s]);
        ob_json_add_int(so, "first_round", rep[s] / width);
        ob_json_add_int(so, "first_copy", rep[s] % width);
        ob_json_add_int(so, "tokens", x->n);
        if (solo) {
            struct ob_agree_cmp c;
            ob_agree_cmp_recs(solo, x, match, &c);
            double mean = c.n_lp ? c.sum_abs / (double)c.n_lp : 0;
            double keep = c.aligned ? (double)c.common / (double)c.aligned
                                    : (solo->n == x->n ? 1.0 : 0.0);
            cJSON *vs = cJSON_CreateObject();
            cJSON_AddBoolToObject(vs, "identical", c.identical);
            add_f64(vs, "mean_abs_dlogp", mean);
            add_f64(vs, "max_abs_dlogp", c.max_abs);
            add_f64(vs, "same_token", keep);
            ob_json_add_int(vs, "first_divergence", c.div_pos);
            cJSON_AddItemToObject(so, "vs_solo", vs);
            if (c.identical)
                n_same_solo += count[s];
            for (int k = 0; k < count[s]; k++) {
                v1[nv] = mean;
                v2[nv++] = keep;
            }
        }
        cJSON_AddItemToArray(sl, so);
    }
    cJSON_AddItemToObject(o, "state_list", sl);
    if (solo) {
        cJSON *vs = cJSON_CreateObject();
        char fp[17];
        hex64(ob_agree_fingerprint(solo, match), fp);
        cJSON_AddStringToObject(vs, "fingerprint", fp);
        ob_json_add_int(vs, "tokens", solo->n);
        ob_json_add_int(vs, "identical", n_same_solo);
        ob_json_add_int(vs, "copies", total);
        cJSON_AddItemToObject(vs, "mean_abs_dlogp", spread(v1, nv));
        cJSON_AddItemToObject(vs, "same_token", spread(v2, nv));
        cJSON_AddItemToObject(o, "vs_solo", vs);
    } else {
        cJSON_AddNullToObject(o, "vs_solo");
    }
    if (states)
        *states = ns;
    if (solo_identical)
        *solo_identical = n_same_solo;
    free(state), free(rep), free(count), free(v1), free(v2), free(grp);
    *report = o;
    return 0;
}
