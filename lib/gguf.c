/*
 * gguf.c — GGUF reader (versions 2 and 3, little-endian).
 *
 * File layout:
 *   "GGUF" | u32 version | u64 n_tensors | u64 n_kv
 *   n_kv    × { string key | u32 vtype | value }
 *   n_tensors × { string name | u32 n_dims | u64 ne[n_dims] | u32 type | u64 offset }
 *   padding to general.alignment (default 32)
 *   data section: each tensor at data_offset + offset, offset % alignment == 0
 * with string = u64 len | bytes (no NUL) and array = u32 elem_vtype | u64 n | elements.
 *
 * Safety: the file is read through a cursor that checks every length against the bytes left
 * before it is used, with overflow-checked arithmetic. Counts are bounded by the smallest
 * encoding of their elements before anything is allocated, so a hostile header cannot ask for
 * more memory than a constant times the file size. Nested arrays are limited in depth.
 *
 * Alignment: general.alignment may be any power of two (the GGUF rule, as in llama.cpp and the
 * gguf Python package, whose default is 32), but the kernels read a tensor through pointers to
 * its elements or blocks (float, ggml_half, struct ob_block_q8_0, ...), which C requires to be
 * aligned to their type. So every tensor must start at a file offset that is a multiple of
 * type_align() below (its block size's largest power-of-two divisor, at most 8: 4 for F32, 2
 * for F16 and the fp16-scaled blocks); the mapping itself is page-aligned. A file written
 * with general.alignment = 1 or 2 passes only when its tensors happen to land aligned.
 *
 * Prefix mode (ob_gguf_scan): the same parser runs over the first bytes of a file that is
 * still arriving (an archive member being extracted). A check that fails only for want of
 * bytes marks the scan short instead of failing it, and the data section is not looked at:
 * the scan returns the file size the header implies, which bounds what extraction may write.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "1b.h"
#include "sb.h"

#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the GGUF reader maps files in place and needs a little-endian host"
#endif

#define GGUF_MAX_DEPTH 8           /* arrays of arrays of ... */
#define GGUF_DEFAULT_ALIGNMENT 32

struct ob_gguf {
    const uint8_t *base;           /* whole file */
    uint64_t size;
    bool mapped;                   /* base is our mmap */
    bool prefix;                   /* base holds only the first `size` bytes (ob_gguf_scan) */
    bool short_read;               /* prefix mode: a check failed for want of bytes */
    uint64_t end_min;              /* prefix mode: the end of the last tensor's data */
    uint32_t version;
    uint32_t alignment;
    uint64_t data_offset;
    uint64_t n_kv, n_tensors;
    struct ob_gguf_kv *kv;
    struct ob_gguf_tensor *tensors;
    /* all decoded string/array element tables, freed on close */
    struct ob_gguf_value **pools;
    size_t n_pools, cap_pools;
    char *names;                   /* NUL-terminated keys and tensor names */
    size_t names_len, names_cap;
    /* open-addressing name -> index+1 tables (0 = empty), power-of-two sizes */
    uint64_t *kv_hash, *t_hash;
    uint64_t kv_hmask, t_hmask;
};

struct cursor {
    struct ob_gguf *g;
    uint64_t pos;
};

static const uint8_t vsize[13] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
static const char *const vname[13] = {"u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool",
                                      "string", "array", "u64", "i64", "f64"};

size_t ob_gguf_vtype_size(uint32_t t)
{
    return t < 13 ? vsize[t] : 0;
}

const char *ob_gguf_vtype_name(uint32_t t)
{
    return t < 13 ? vname[t] : "invalid";
}

static uint64_t left(const struct cursor *c)
{
    return c->g->size - c->pos;
}

/* A length runs past the bytes there are: in prefix mode, more bytes may satisfy it (the
 * check still fails; the flag tells ob_gguf_scan to read on). Always true. */
static bool mark_short(struct cursor *c)
{
    c->g->short_read |= c->g->prefix;
    return true;
}

static int need(struct cursor *c, uint64_t n, const char *what, const char *ctx)
{
    if (n > left(c) && mark_short(c))
        return ob_seterr(OB_EFORMAT,
                         "offset %llu: %s%s%s needs %llu bytes but only %llu remain in the file",
                         (unsigned long long)c->pos, what, ctx[0] ? " of " : "", ctx,
                         (unsigned long long)n, (unsigned long long)left(c));
    return 0;
}

static int rd_u32(struct cursor *c, uint32_t *v, const char *what, const char *ctx)
{
    int e = need(c, 4, what, ctx);
    if (e)
        return e;
    memcpy(v, c->g->base + c->pos, 4);
    c->pos += 4;
    return 0;
}

static int rd_u64(struct cursor *c, uint64_t *v, const char *what, const char *ctx)
{
    int e = need(c, 8, what, ctx);
    if (e)
        return e;
    memcpy(v, c->g->base + c->pos, 8);
    c->pos += 8;
    return 0;
}

/* A string in place: length checked against what is left. */
static int rd_str(struct cursor *c, const char **p, uint64_t *len, const char *what,
                  const char *ctx)
{
    uint64_t at = c->pos;
    int e = rd_u64(c, len, what, ctx);
    if (e)
        return e;
    if (*len > left(c) && mark_short(c))
        return ob_seterr(OB_EFORMAT,
                         "offset %llu: %s%s%s has length %llu but only %llu bytes remain",
                         (unsigned long long)at, what, ctx[0] ? " of " : "", ctx,
                         (unsigned long long)*len, (unsigned long long)left(c));
    *p = (const char *)c->g->base + c->pos;
    c->pos += *len;
    return 0;
}

static struct ob_gguf_value *pool_alloc(struct ob_gguf *g, uint64_t n)
{
    if (!OB_GROW(g->pools, g->cap_pools, g->n_pools + 1))
        return NULL;
    struct ob_gguf_value *v = calloc(n ? n : 1, sizeof *v);
    if (v)
        g->pools[g->n_pools++] = v;
    return v;
}

/* Copy a name into the name arena; returns its offset (pointers are fixed up at the end,
 * since the arena may move while it grows). */
static int intern(struct ob_gguf *g, const char *s, uint64_t len, size_t *off)
{
    if (memchr(s, 0, len))
        return ob_seterr(OB_EFORMAT, "a name contains a NUL byte");
    if (!OB_GROW(g->names, g->names_cap, g->names_len + len + 1))
        return ob_seterr(OB_ENOMEM, "out of memory for names");
    *off = g->names_len;
    memcpy(g->names + g->names_len, s, len);
    g->names[g->names_len + len] = 0;
    g->names_len += len + 1;
    return 0;
}

/* Smallest encoding of one element of an array of vtype t: bounds n before allocating. */
static uint64_t min_elem_size(uint32_t t)
{
    if (t == OB_GGUF_STRING)
        return 8;
    if (t == OB_GGUF_ARRAY)
        return 12;
    return vsize[t];
}

/* The alignment a tensor's first byte needs: the largest power of two that divides its block
 * size, capped at 8 (alignof of every element and block struct divides its size, and none is
 * above 8). */
static uint32_t type_align(uint32_t type)
{
    uint32_t size = ob_type_size(type);
    uint32_t a = size & -size;
    return a > 8 ? 8 : a ? a : 1;
}

static int rd_value(struct cursor *c, uint32_t type, struct ob_gguf_value *v, int depth,
                    const char *key)
{
    int e;
    v->type = type;
    if (type > OB_GGUF_F64)
        return ob_seterr(OB_EFORMAT, "offset %llu: key '%s' has invalid value type %u",
                         (unsigned long long)c->pos, key, type);
    if (type == OB_GGUF_STRING)
        return rd_str(c, &v->str.ptr, &v->str.len, "string value", key);
    if (type != OB_GGUF_ARRAY) {
        uint64_t n = vsize[type];
        if ((e = need(c, n, "value", key)))
            return e;
        const uint8_t *p = c->g->base + c->pos;
        switch (type) {
        case OB_GGUF_U8: v->u = p[0]; break;
        case OB_GGUF_I8: v->i = (int8_t)p[0]; break;
        case OB_GGUF_U16: { uint16_t x; memcpy(&x, p, 2); v->u = x; break; }
        case OB_GGUF_I16: { int16_t x; memcpy(&x, p, 2); v->i = x; break; }
        case OB_GGUF_U32: { uint32_t x; memcpy(&x, p, 4); v->u = x; break; }
        case OB_GGUF_I32: { int32_t x; memcpy(&x, p, 4); v->i = x; break; }
        case OB_GGUF_F32: { float x; memcpy(&x, p, 4); v->f = x; break; }
        case OB_GGUF_BOOL:
            if (p[0] > 1)
                return ob_seterr(OB_EFORMAT, "offset %llu: key '%s': bool value %u is not 0 or 1",
                                 (unsigned long long)c->pos, key, p[0]);
            v->u = p[0];
            break;
        case OB_GGUF_U64: memcpy(&v->u, p, 8); break;
        case OB_GGUF_I64: memcpy(&v->i, p, 8); break;
        case OB_GGUF_F64: memcpy(&v->f, p, 8); break;
        }
        c->pos += n;
        return 0;
    }
    /* array */
    if (depth >= GGUF_MAX_DEPTH)
        return ob_seterr(OB_EFORMAT, "offset %llu: key '%s': arrays nested deeper than %d",
                         (unsigned long long)c->pos, key, GGUF_MAX_DEPTH);
    uint64_t at = c->pos;
    uint32_t et;
    uint64_t n;
    if ((e = rd_u32(c, &et, "array element type", key)) || (e = rd_u64(c, &n, "array length", key)))
        return e;
    if (et > OB_GGUF_F64)
        return ob_seterr(OB_EFORMAT, "offset %llu: key '%s': invalid array element type %u",
                         (unsigned long long)at, key, et);
    v->arr.elem_type = et;
    v->arr.n = n;
    v->arr.data = NULL;
    v->arr.elems = NULL;
    uint64_t minsz = min_elem_size(et);
    if (n > left(c) / minsz && mark_short(c))
        return ob_seterr(OB_EFORMAT,
                         "offset %llu: key '%s': array of %llu %s elements cannot fit in the %llu "
                         "bytes that remain", (unsigned long long)at, key, (unsigned long long)n,
                         vname[et], (unsigned long long)left(c));
    if (et != OB_GGUF_STRING && et != OB_GGUF_ARRAY) {
        if (et == OB_GGUF_BOOL)
            for (uint64_t i = 0; i < n; i++)
                if (c->g->base[c->pos + i] > 1)
                    return ob_seterr(OB_EFORMAT, "offset %llu: key '%s': bool element %llu is "
                                     "not 0 or 1", (unsigned long long)(c->pos + i), key,
                                     (unsigned long long)i);
        v->arr.data = c->g->base + c->pos;
        c->pos += n * minsz;
        return 0;
    }
    struct ob_gguf_value *elems = pool_alloc(c->g, n);
    if (!elems)
        return ob_seterr(OB_ENOMEM, "out of memory for %llu elements of key '%s'",
                         (unsigned long long)n, key);
    v->arr.elems = elems;
    for (uint64_t i = 0; i < n; i++) {
        if (et == OB_GGUF_STRING) {
            elems[i].type = OB_GGUF_STRING;
            if ((e = rd_str(c, &elems[i].str.ptr, &elems[i].str.len, "string element", key)))
                return e;
        } else if ((e = rd_value(c, OB_GGUF_ARRAY, &elems[i], depth + 1, key))) {
            return e;
        }
    }
    return 0;
}

/* ---- name tables: duplicate detection at load, O(1) lookup afterwards ---------------------- */

static uint64_t name_hash(const char *s)
{
    uint64_t h = 1469598103934665603ull;          /* FNV-1a */
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

static uint64_t *htab_new(uint64_t n, uint64_t *mask)
{
    uint64_t cap = 16;
    while (cap < 2 * n)
        cap *= 2;
    *mask = cap - 1;
    return calloc(cap, sizeof(uint64_t));
}

/* Find `name` in a table whose entries index names[] (entry - 1); returns the slot. */
static uint64_t htab_slot(const uint64_t *tab, uint64_t mask, const char *name,
                          const char *(*name_of)(const struct ob_gguf *, uint64_t),
                          const struct ob_gguf *g)
{
    uint64_t i = name_hash(name) & mask;
    while (tab[i] && strcmp(name_of(g, tab[i] - 1), name) != 0)
        i = (i + 1) & mask;
    return i;
}

static const char *kv_name(const struct ob_gguf *g, uint64_t i) { return g->kv[i].key; }
static const char *t_name(const struct ob_gguf *g, uint64_t i) { return g->tensors[i].name; }

static int parse(struct ob_gguf *g)
{
    struct cursor c = {g, 0};
    int e;
    if ((g->size < 4 && mark_short(&c)) || memcmp(g->base, "GGUF", 4) != 0)
        return ob_seterr(OB_EFORMAT, "offset 0: not a GGUF file (bad magic)");
    c.pos = 4;
    if ((e = rd_u32(&c, &g->version, "version", "header")))
        return e;
    if (g->version == 1)
        return ob_seterr(OB_EUNSUPP, "offset 4: GGUF version 1 is not supported (only 2 and 3)");
    if (g->version != 2 && g->version != 3) {
        uint32_t sw = __builtin_bswap32(g->version);
        if (sw == 2 || sw == 3)
            return ob_seterr(OB_EUNSUPP, "offset 4: big-endian GGUF files are not supported");
        return ob_seterr(OB_EFORMAT, "offset 4: unknown GGUF version %u", g->version);
    }
    if ((e = rd_u64(&c, &g->n_tensors, "tensor count", "header")) ||
        (e = rd_u64(&c, &g->n_kv, "metadata count", "header")))
        return e;
    /* smallest kv: 8 (key len) + 4 (type) + 1 (u8); smallest tensor info: 8+4+8+4+8 */
    if (g->n_kv > left(&c) / 13 && mark_short(&c))
        return ob_seterr(OB_EFORMAT, "offset 16: metadata count %llu cannot fit in the file",
                         (unsigned long long)g->n_kv);
    if (g->n_tensors > left(&c) / 32 && mark_short(&c))
        return ob_seterr(OB_EFORMAT, "offset 8: tensor count %llu cannot fit in the file",
                         (unsigned long long)g->n_tensors);
    g->kv = calloc(g->n_kv ? g->n_kv : 1, sizeof *g->kv);
    g->tensors = calloc(g->n_tensors ? g->n_tensors : 1, sizeof *g->tensors);
    size_t *koff = calloc(g->n_kv + g->n_tensors + 1, sizeof *koff);
    if (!g->kv || !g->tensors || !koff) {
        free(koff);
        return ob_seterr(OB_ENOMEM, "out of memory for the file's index");
    }

    g->alignment = GGUF_DEFAULT_ALIGNMENT;
    for (uint64_t i = 0; i < g->n_kv; i++) {
        const char *k;
        uint64_t klen;
        char ctx[48];
        snprintf(ctx, sizeof ctx, "metadata pair %llu", (unsigned long long)i);
        g->kv[i].offset = c.pos;
        if ((e = rd_str(&c, &k, &klen, "key", ctx)))
            goto out;
        if ((e = intern(g, k, klen, &koff[i]))) {
            ob_errprefix(e, "offset %llu: key of %s", (unsigned long long)g->kv[i].offset, ctx);
            goto out;
        }
        const char *key = g->names + koff[i];
        uint32_t type;
        if ((e = rd_u32(&c, &type, "value type", key)) ||
            (e = rd_value(&c, type, &g->kv[i].val, 0, key)))
            goto out;
        if (strcmp(key, "general.alignment") == 0) {
            const struct ob_gguf_value *v = &g->kv[i].val;
            if (v->type != OB_GGUF_U32 || v->u == 0 || (v->u & (v->u - 1)) || v->u > (1u << 30)) {
                e = ob_seterr(OB_EFORMAT, "offset %llu: general.alignment must be a u32 power of "
                              "two, got %s %llu", (unsigned long long)g->kv[i].offset,
                              vname[v->type], (unsigned long long)v->u);
                goto out;
            }
            g->alignment = (uint32_t)v->u;
        }
    }

    for (uint64_t i = 0; i < g->n_tensors; i++) {
        struct ob_gguf_tensor *t = &g->tensors[i];
        const char *nm;
        uint64_t nlen, at = c.pos;
        char ctx[48];
        snprintf(ctx, sizeof ctx, "tensor info %llu", (unsigned long long)i);
        if ((e = rd_str(&c, &nm, &nlen, "name", ctx)))
            goto out;
        if ((e = intern(g, nm, nlen, &koff[g->n_kv + i]))) {
            ob_errprefix(e, "offset %llu: name of %s", (unsigned long long)at, ctx);
            goto out;
        }
        const char *name = g->names + koff[g->n_kv + i];
        if ((e = rd_u32(&c, &t->n_dims, "dimension count", name)))
            goto out;
        if (t->n_dims < 1 || t->n_dims > 4) {
            e = ob_seterr(OB_EFORMAT, "offset %llu: tensor '%s' has %u dimensions (1 to 4 allowed)",
                          (unsigned long long)(c.pos - 4), name, t->n_dims);
            goto out;
        }
        uint64_t nel = 1;
        for (uint32_t d = 0; d < 4; d++) {
            t->ne[d] = 1;
            if (d < t->n_dims && (e = rd_u64(&c, &t->ne[d], "dimension", name)))
                goto out;
            if (t->ne[d] == 0 || t->ne[d] > INT64_MAX || __builtin_mul_overflow(nel, t->ne[d], &nel)) {
                e = ob_seterr(OB_EFORMAT, "offset %llu: tensor '%s' dimension %u is %llu "
                              "(zero, or the element count overflows)",
                              (unsigned long long)(c.pos - 8), name, d,
                              (unsigned long long)t->ne[d]);
                goto out;
            }
        }
        if ((e = rd_u32(&c, &t->type, "type", name)) ||
            (e = rd_u64(&c, &t->offset, "data offset", name)))
            goto out;
        if (!ob_type_known(t->type)) {
            e = ob_seterr(OB_EFORMAT, "offset %llu: tensor '%s' has unknown type id %u",
                          (unsigned long long)(c.pos - 12), name, t->type);
            goto out;
        }
        uint64_t row;
        if (!ob_type_row_bytes(t->type, t->ne[0], &row)) {
            e = ob_seterr(OB_EFORMAT, "tensor '%s': row length %llu is not a multiple of the "
                          "%s block size %u", name, (unsigned long long)t->ne[0],
                          ob_type_name(t->type), ob_type_blck(t->type));
            goto out;
        }
        if (__builtin_mul_overflow(row, nel / t->ne[0], &t->nbytes)) {
            e = ob_seterr(OB_EFORMAT, "tensor '%s': byte size overflows", name);
            goto out;
        }
    }

    /* data section */
    uint64_t a = g->alignment, pad = (a - c.pos % a) % a;
    if (__builtin_add_overflow(c.pos, pad, &g->data_offset) ||
        (g->data_offset > g->size && !g->prefix)) {
        if (g->n_tensors == 0 && c.pos <= g->size) {
            g->data_offset = g->size;   /* a metadata-only file may end unpadded */
        } else {
            e = ob_seterr(OB_EFORMAT, "offset %llu: file ends before the data section "
                          "(alignment %u)", (unsigned long long)c.pos, g->alignment);
            goto out;
        }
    }
    if (g->prefix && g->n_tensors == 0)
        g->data_offset = c.pos;
    g->end_min = g->data_offset;
    uint64_t data_size = g->prefix ? UINT64_MAX - g->data_offset : g->size - g->data_offset;
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        struct ob_gguf_tensor *t = &g->tensors[i];
        t->name = g->names + koff[g->n_kv + i];
        if (t->offset % g->alignment) {
            e = ob_seterr(OB_EFORMAT, "tensor '%s': data offset %llu is not a multiple of the "
                          "alignment %u", t->name, (unsigned long long)t->offset, g->alignment);
            goto out;
        }
        uint64_t at = g->data_offset + t->offset;     /* no overflow: checked below first */
        if (t->offset <= data_size && at % type_align(t->type)) {
            e = ob_seterr(OB_EFORMAT, "tensor '%s' (%s) starts at file offset %llu, not a "
                          "multiple of %u as its blocks need (general.alignment = %u)", t->name,
                          ob_type_name(t->type), (unsigned long long)at, type_align(t->type),
                          g->alignment);
            goto out;
        }
        if (t->offset > data_size || t->nbytes > data_size - t->offset) {
            e = ob_seterr(OB_EFORMAT, "tensor '%s': data [%llu, +%llu) lies outside the %llu-byte "
                          "data section at file offset %llu (file truncated?)", t->name,
                          (unsigned long long)t->offset, (unsigned long long)t->nbytes,
                          (unsigned long long)data_size, (unsigned long long)g->data_offset);
            goto out;
        }
        if (g->prefix) {
            if (at + t->nbytes > g->end_min)
                g->end_min = at + t->nbytes;
            continue;
        }
        t->data = g->base + g->data_offset + t->offset;
    }
    for (uint64_t i = 0; i < g->n_kv; i++)
        g->kv[i].key = g->names + koff[i];
    /* names are final now: build the lookup tables, rejecting duplicates */
    g->kv_hash = htab_new(g->n_kv, &g->kv_hmask);
    g->t_hash = htab_new(g->n_tensors, &g->t_hmask);
    if (!g->kv_hash || !g->t_hash) {
        e = ob_seterr(OB_ENOMEM, "out of memory for the file's index");
        goto out;
    }
    for (uint64_t i = 0; i < g->n_kv; i++) {
        uint64_t s = htab_slot(g->kv_hash, g->kv_hmask, g->kv[i].key, kv_name, g);
        if (g->kv_hash[s]) {
            e = ob_seterr(OB_EFORMAT, "offset %llu: duplicate key '%s'",
                          (unsigned long long)g->kv[i].offset, g->kv[i].key);
            goto out;
        }
        g->kv_hash[s] = i + 1;
    }
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        uint64_t s = htab_slot(g->t_hash, g->t_hmask, g->tensors[i].name, t_name, g);
        if (g->t_hash[s]) {
            e = ob_seterr(OB_EFORMAT, "tensor '%s' appears twice", g->tensors[i].name);
            goto out;
        }
        g->t_hash[s] = i + 1;
    }
    e = 0;
out:
    free(koff);
    return e;
}

static int open_common(struct ob_gguf *g, struct ob_gguf **out)
{
    int e = parse(g);
    if (e) {
        ob_gguf_close(g);
        return e;
    }
    *out = g;
    return 0;
}

int ob_gguf_scan(const void *prefix, size_t n, uint64_t *min_size, uint64_t *max_size,
                 bool *more)
{
    *more = false;
    struct ob_gguf *g = calloc(1, sizeof *g);
    if (!g)
        return ob_seterr(OB_ENOMEM, "out of memory");
    g->base = prefix;
    g->size = n;
    g->prefix = true;
    int e = parse(g);
    if (e) {
        *more = g->short_read;
    } else {
        /* writers pad after every tensor, the last one included (gguf-py, ggml) or not (ours) */
        uint64_t a = g->alignment, pad = (a - g->end_min % a) % a;
        *min_size = g->end_min;
        *max_size = g->end_min > UINT64_MAX - pad ? UINT64_MAX : g->end_min + pad;
    }
    ob_gguf_close(g);
    return e;
}

int ob_gguf_open_mem(const void *data, size_t size, struct ob_gguf **out)
{
    struct ob_gguf *g = calloc(1, sizeof *g);
    if (!g)
        return ob_seterr(OB_ENOMEM, "out of memory");
    g->base = data;
    g->size = size;
    return open_common(g, out);
}

int ob_gguf_open(const char *path, struct ob_gguf **out)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return ob_seterr(ob_open_code(errno), "%s: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int en = errno;
        close(fd);
        return ob_seterr(OB_EIO, "%s: %s", path, strerror(en));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return ob_seterr(OB_EFORMAT, "%s: not a regular file", path);
    }
    if (st.st_size == 0) {
        close(fd);
        return ob_seterr(OB_EFORMAT, "%s: empty file", path);
    }
    void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    int en = errno;
    close(fd);
    if (p == MAP_FAILED)
        return ob_seterr(OB_EIO, "%s: mmap: %s", path, strerror(en));
    struct ob_gguf *g = calloc(1, sizeof *g);
    if (!g) {
        munmap(p, (size_t)st.st_size);
        return ob_seterr(OB_ENOMEM, "out of memory");
    }
    g->base = p;
    g->size = (uint64_t)st.st_size;
    g->mapped = true;
    int e = open_common(g, out);
    if (e)
        ob_errprefix(e, "%s", path);
    return e;
}

void ob_gguf_close(struct ob_gguf *g)
{
    if (!g)
        return;
    for (size_t i = 0; i < g->n_pools; i++)
        free(g->pools[i]);
    free(g->pools);
    free(g->names);
    free(g->kv_hash);
    free(g->t_hash);
    free(g->kv);
    free(g->tensors);
    if (g->mapped)
        munmap((void *)g->base, g->size);
    free(g);
}

uint32_t ob_gguf_version(const struct ob_gguf *g) { return g->version; }
uint64_t ob_gguf_file_size(const struct ob_gguf *g) { return g->size; }
uint64_t ob_gguf_data_offset(const struct ob_gguf *g) { return g->data_offset; }
uint32_t ob_gguf_alignment(const struct ob_gguf *g) { return g->alignment; }
uint64_t ob_gguf_n_kv(const struct ob_gguf *g) { return g->n_kv; }
uint64_t ob_gguf_n_tensors(const struct ob_gguf *g) { return g->n_tensors; }

const struct ob_gguf_kv *ob_gguf_kv_at(const struct ob_gguf *g, uint64_t i)
{
    return i < g->n_kv ? &g->kv[i] : NULL;
}

const struct ob_gguf_value *ob_gguf_get(const struct ob_gguf *g, const char *key)
{
    uint64_t s = htab_slot(g->kv_hash, g->kv_hmask, key, kv_name, g);
    return g->kv_hash[s] ? &g->kv[g->kv_hash[s] - 1].val : NULL;
}

const struct ob_gguf_tensor *ob_gguf_tensor_at(const struct ob_gguf *g, uint64_t i)
{
    return i < g->n_tensors ? &g->tensors[i] : NULL;
}

const struct ob_gguf_tensor *ob_gguf_tensor(const struct ob_gguf *g, const char *name)
{
    uint64_t s = htab_slot(g->t_hash, g->t_hmask, name, t_name, g);
    return g->t_hash[s] ? &g->tensors[g->t_hash[s] - 1] : NULL;
}

/* ---- typed getters ---------------------------------------------------------------------- */

static bool is_uint(uint32_t t)
{
    return t == OB_GGUF_U8 || t == OB_GGUF_U16 || t == OB_GGUF_U32 || t == OB_GGUF_U64;
}

static bool is_sint(uint32_t t)
{
    return t == OB_GGUF_I8 || t == OB_GGUF_I16 || t == OB_GGUF_I32 || t == OB_GGUF_I64;
}

static const struct ob_gguf_value *lookup(const struct ob_gguf *g, const char *key, int *e)
{
    const struct ob_gguf_value *v = ob_gguf_get(g, key);
    *e = v ? 0 : ob_seterr(OB_ENOTFOUND, "metadata key '%s' is missing", key);
    return v;
}

static int wrong_type(const char *key, const struct ob_gguf_value *v, const char *want)
{
    return ob_seterr(OB_EFORMAT, "metadata key '%s' is %s, expected %s", key, vname[v->type], want);
}

int ob_gguf_get_u64(const struct ob_gguf *g, const char *key, uint64_t *out)
{
    int e;
    const struct ob_gguf_value *v = lookup(g, key, &e);
    if (!v)
        return e;
    if (is_uint(v->type)) {
        *out = v->u;
        return 0;
    }
    if (is_sint(v->type)) {
        if (v->i < 0)
            return ob_seterr(OB_EFORMAT, "metadata key '%s' is negative (%lld)", key,
                             (long long)v->i);
        *out = (uint64_t)v->i;
        return 0;
    }
    return wrong_type(key, v, "an integer");
}

int ob_gguf_get_u32(const struct ob_gguf *g, const char *key, uint32_t *out)
{
    uint64_t u;
    int e = ob_gguf_get_u64(g, key, &u);
    if (e)
        return e;
    if (u > UINT32_MAX)
        return ob_seterr(OB_EFORMAT, "metadata key '%s' = %llu does not fit 32 bits", key,
                         (unsigned long long)u);
    *out = (uint32_t)u;
    return 0;
}

int ob_gguf_get_f32(const struct ob_gguf *g, const char *key, float *out)
{
    int e;
    const struct ob_gguf_value *v = lookup(g, key, &e);
    if (!v)
        return e;
    if (v->type == OB_GGUF_F32 || v->type == OB_GGUF_F64)
        *out = (float)v->f;
    else if (is_uint(v->type))
        *out = (float)v->u;
    else if (is_sint(v->type))
        *out = (float)v->i;
    else
        return wrong_type(key, v, "a number");
    return 0;
}

int ob_gguf_get_bool(const struct ob_gguf *g, const char *key, bool *out)
{
    int e;
    const struct ob_gguf_value *v = lookup(g, key, &e);
    if (!v)
        return e;
    if (v->type != OB_GGUF_BOOL)
        return wrong_type(key, v, "bool");
    *out = v->u != 0;
    return 0;
}

int ob_gguf_get_str(const struct ob_gguf *g, const char *key, char **out)
{
    int e;
    const struct ob_gguf_value *v = lookup(g, key, &e);
    if (!v)
        return e;
    if (v->type != OB_GGUF_STRING)
        return wrong_type(key, v, "string");
    char *s = malloc(v->str.len + 1);
    if (!s)
        return ob_seterr(OB_ENOMEM, "out of memory");
    memcpy(s, v->str.ptr, v->str.len);
    s[v->str.len] = 0;
    *out = s;
    return 0;
}

int ob_gguf_get_arr(const struct ob_gguf *g, const char *key, uint32_t elem_type,
                    const struct ob_gguf_value **out)
{
    int e;
    const struct ob_gguf_value *v = lookup(g, key, &e);
    if (!v)
        return e;
    if (v->type != OB_GGUF_ARRAY || v->arr.elem_type != elem_type)
        return ob_seterr(OB_EFORMAT, "metadata key '%s' is %s%s%s, expected an array of %s", key,
                         vname[v->type], v->type == OB_GGUF_ARRAY ? " of " : "",
                         v->type == OB_GGUF_ARRAY ? vname[v->arr.elem_type] : "",
                         ob_gguf_vtype_name(elem_type));
    *out = v;
    return 0;
}

uint64_t ob_gguf_arr_u(const struct ob_gguf_value *a, uint64_t i)
{
    const uint8_t *p = (const uint8_t *)a->arr.data + i * vsize[a->arr.elem_type];
    switch (a->arr.elem_type) {
    case OB_GGUF_U8: case OB_GGUF_BOOL: return p[0];
    case OB_GGUF_U16: { uint16_t x; memcpy(&x, p, 2); return x; }
    case OB_GGUF_U32: { uint32_t x; memcpy(&x, p, 4); return x; }
    case OB_GGUF_U64: { uint64_t x; memcpy(&x, p, 8); return x; }
    }
    return (uint64_t)ob_gguf_arr_i(a, i);
}

int64_t ob_gguf_arr_i(const struct ob_gguf_value *a, uint64_t i)
{
    const uint8_t *p = (const uint8_t *)a->arr.data + i * vsize[a->arr.elem_type];
    switch (a->arr.elem_type) {
    case OB_GGUF_I8: return (int8_t)p[0];
    case OB_GGUF_I16: { int16_t x; memcpy(&x, p, 2); return x; }
    case OB_GGUF_I32: { int32_t x; memcpy(&x, p, 4); return x; }
    case OB_GGUF_I64: { int64_t x; memcpy(&x, p, 8); return x; }
    case OB_GGUF_F32: case OB_GGUF_F64: return (int64_t)ob_gguf_arr_f(a, i);
    }
    return (int64_t)ob_gguf_arr_u(a, i);
}

double ob_gguf_arr_f(const struct ob_gguf_value *a, uint64_t i)
{
    const uint8_t *p = (const uint8_t *)a->arr.data + i * vsize[a->arr.elem_type];
    switch (a->arr.elem_type) {
    case OB_GGUF_F32: { float x; memcpy(&x, p, 4); return x; }
    case OB_GGUF_F64: { double x; memcpy(&x, p, 8); return x; }
    }
    if (is_sint(a->arr.elem_type))
        return (double)ob_gguf_arr_i(a, i);
    return (double)ob_gguf_arr_u(a, i);
}

/* ---- JSON view -------------------------------------------------------------------------- */

cJSON *ob_gguf_value_json(const struct ob_gguf_value *v)
{
    switch (v->type) {
    case OB_GGUF_U8: case OB_GGUF_U16: case OB_GGUF_U32: case OB_GGUF_U64: {
        char b[32];
        snprintf(b, sizeof b, "%llu", (unsigned long long)v->u);
        return cJSON_CreateRaw(b);
    }
    case OB_GGUF_I8: case OB_GGUF_I16: case OB_GGUF_I32: case OB_GGUF_I64: {
        char b[32];
        snprintf(b, sizeof b, "%lld", (long long)v->i);
        return cJSON_CreateRaw(b);
    }
    case OB_GGUF_F32: return ob_json_f32((float)v->f);
    case OB_GGUF_F64: return ob_json_f64(v->f);
    case OB_GGUF_BOOL: return cJSON_CreateBool(v->u != 0);
    case OB_GGUF_STRING: {
        char *s = ob_utf8_sanitize(v->str.ptr, v->str.len);
        cJSON *j = s ? cJSON_CreateString(s) : NULL;
        free(s);
        return j;
    }
    case OB_GGUF_ARRAY: {
        cJSON *a = cJSON_CreateArray();
        if (!a)
            return NULL;
        for (uint64_t i = 0; i < v->arr.n; i++) {
            cJSON *e;
            if (v->arr.elems) {
                e = ob_gguf_value_json(&v->arr.elems[i]);
            } else {
                struct ob_gguf_value s = {.type = v->arr.elem_type};
                uint32_t t = v->arr.elem_type;
                if (t == OB_GGUF_F32 || t == OB_GGUF_F64)
                    s.f = ob_gguf_arr_f(v, i);
                else if (is_sint(t))
                    s.i = ob_gguf_arr_i(v, i);
                else
                    s.u = ob_gguf_arr_u(v, i);
                e = ob_gguf_value_json(&s);
            }
            if (!e) {
                cJSON_Delete(a);
                return NULL;
            }
            cJSON_AddItemToArray(a, e);
        }
        return a;
    }
    }
    return NULL;
}
