/*
 * strmap.c — a map from byte strings to int64 values (open addressing, FNV-1a, linear
 * probing). Keys are copied into an arena owned by the map. Used wherever a vocabulary of
 * ~150k strings must be looked up in O(1).
 */
#include <stdlib.h>
#include <string.h>

#include "sb.h"
#include "strmap.h"

struct slot {
    uint64_t hash;
    const char *key;               /* into the arena; NULL = empty */
    size_t len;
    int64_t val;
};

struct ob_strmap {
    struct slot *s;
    size_t cap, n;
    char **arena;                  /* chunks */
    size_t n_arena, cap_arena, arena_left;
    char *arena_at;
};

static uint64_t hash(const char *k, size_t len)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < len; i++)
        h = (h ^ (unsigned char)k[i]) * 1099511628211ull;
    return h;
}

struct ob_strmap *ob_strmap_new(size_t expect)
{
    struct ob_strmap *m = calloc(1, sizeof *m);
    if (!m)
        return NULL;
    m->cap = 64;
    while (m->cap < 2 * expect)
        m->cap *= 2;
    if (!(m->s = calloc(m->cap, sizeof *m->s))) {
        free(m);
        return NULL;
    }
    return m;
}

void ob_strmap_free(struct ob_strmap *m)
{
    if (!m)
        return;
    for (size_t i = 0; i < m->n_arena; i++)
        free(m->arena[i]);
    free(m->arena);
    free(m->s);
    free(m);
}

static struct slot *find(const struct ob_strmap *m, const char *k, size_t len, uint64_t h)
{
    size_t i = h & (m->cap - 1);
    while (m->s[i].key && !(m->s[i].hash == h && m->s[i].len == len &&
                            memcmp(m->s[i].key, k, len) == 0))
        i = (i + 1) & (m->cap - 1);
    return &m->s[i];
}

static int grow(struct ob_strmap *m)
{
    struct slot *old = m->s;
    size_t oc = m->cap;
    m->cap *= 2;
    if (!(m->s = calloc(m->cap, sizeof *m->s))) {
        m->s = old;
        m->cap = oc;
        return -1;
    }
    for (size_t i = 0; i < oc; i++)
        if (old[i].key)
            *find(m, old[i].key, old[i].len, old[i].hash) = old[i];
    free(old);
    return 0;
}

static const char *copy_key(struct ob_strmap *m, const char *k, size_t len)
{
    if (len + 1 > m->arena_left) {
        size_t sz = len + 1 > 65536 ? len + 1 : 65536;
        if (!OB_GROW(m->arena, m->cap_arena, m->n_arena + 1))
            return NULL;
        if (!(m->arena_at = malloc(sz)))
            return NULL;
        m->arena[m->n_arena++] = m->arena_at;
        m->arena_left = sz;
    }
    char *p = m->arena_at;
    memcpy(p, k, len);
    p[len] = 0;
    m->arena_at += len + 1;
    m->arena_left -= len + 1;
    return p;
}

int ob_strmap_put(struct ob_strmap *m, const char *k, size_t len, int64_t val, bool replace)
{
    if (2 * (m->n + 1) > m->cap && grow(m))
        return -1;
    uint64_t h = hash(k, len);
    struct slot *s = find(m, k, len, h);
    if (s->key) {
        if (replace)
            s->val = val;
        return 1;
    }
    const char *c = copy_key(m, k, len);
    if (!c)
        return -1;
    *s = (struct slot){h, c, len, val};
    m->n++;
    return 0;
}

bool ob_strmap_get(const struct ob_strmap *m, const char *k, size_t len, int64_t *val)
{
    const struct slot *s = find(m, k, len, hash(k, len));
    if (!s->key)
        return false;
    if (val)
        *val = s->val;
    return true;
}

size_t ob_strmap_size(const struct ob_strmap *m)
{
    return m->n;
}
