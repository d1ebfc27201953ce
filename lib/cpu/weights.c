/*
 * weights.c — the cpu route's copy of the weights (weights.h ob_model_weights): the GGUF's
 * tensor data on 2 MB pages, the matrices of the kernels' panel types packed in panels.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "cpu/weights.h"
#include "matrix.h"

struct ob_wcopy {
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

static void wcopy_free(void *p)
{
    struct ob_wcopy *c = p;
    if (!c)
        return;
    if (c->map)
        munmap(c->map, c->map_len);
    free(c->panels);
    free(c->msg);
    free(c);
}

int ob_model_weights(const struct ob_model *m, uint64_t panels, struct ob_weights *v)
{
    struct ob_model_att *att = m->att;
    pthread_mutex_lock(&att->mu);
    if (!att->p) {
        if (!(att->p = calloc(1, sizeof(struct ob_wcopy)))) {
            pthread_mutex_unlock(&att->mu);
            return ob_seterr(OB_ENOMEM, "out of memory");
        }
        att->free = wcopy_free;
    }
    struct ob_wcopy *c = att->p;
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
    pthread_mutex_unlock(&att->mu);
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
