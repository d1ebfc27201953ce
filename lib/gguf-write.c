/*
 * gguf-write.c — GGUF v3 writer (layout in gguf.c).
 *
 * Metadata values are serialised to bytes as soon as they are set (so a value copied from an
 * open file is written back byte for byte); tensor data is borrowed or produced by a callback
 * while the file is written. The output goes to "PATH.tmp.XXXXXX" beside PATH and is renamed
 * over PATH only after every byte was written and fsync'd, so a failure never leaves a partial
 * model under the final name.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "1b.h"
#include "sb.h"

struct wkv {
    char *key;
    uint8_t *bytes;                /* u32 vtype + encoded value */
    size_t len;
};

struct wtensor {
    char *name;
    uint32_t type, n_dims;
    uint64_t ne[4];
    uint64_t nbytes, offset;
    const void *data;
    ob_gguf_fill_fn fill;
    void *fill_ctx;
};

struct ob_gguf_writer {
    struct wkv *kv;
    size_t n_kv, cap_kv;
    struct wtensor *t;
    size_t n_t, cap_t;
};

/* growable byte buffer for encoding one value */
/* encoded bytes grow in a struct ob_sb (sb.h); an append that runs out of memory sets oom */
static void put(struct ob_sb *b, const void *src, size_t n) { ob_sb_add(b, src, n); }

static void put_u32(struct ob_sb *b, uint32_t v) { put(b, &v, 4); }
static void put_u64(struct ob_sb *b, uint64_t v) { put(b, &v, 8); }

static void put_str(struct ob_sb *b, const char *s, uint64_t len)
{
    put_u64(b, len);
    put(b, s, len);
}

/* Encode a value's payload (without its leading type). */
static int encode(struct ob_sb *b, const struct ob_gguf_value *v, int depth)
{
    if (depth > 8)
        return ob_seterr(OB_EUSAGE, "arrays nested too deep");
    switch (v->type) {
    case OB_GGUF_U8: case OB_GGUF_BOOL: { uint8_t x = (uint8_t)v->u; put(b, &x, 1); return 0; }
    case OB_GGUF_I8: { int8_t x = (int8_t)v->i; put(b, &x, 1); return 0; }
    case OB_GGUF_U16: { uint16_t x = (uint16_t)v->u; put(b, &x, 2); return 0; }
    case OB_GGUF_I16: { int16_t x = (int16_t)v->i; put(b, &x, 2); return 0; }
    case OB_GGUF_U32: { uint32_t x = (uint32_t)v->u; put(b, &x, 4); return 0; }
    case OB_GGUF_I32: { int32_t x = (int32_t)v->i; put(b, &x, 4); return 0; }
    case OB_GGUF_F32: { float x = (float)v->f; put(b, &x, 4); return 0; }
    case OB_GGUF_U64: put_u64(b, v->u); return 0;
    case OB_GGUF_I64: put(b, &v->i, 8); return 0;
    case OB_GGUF_F64: put(b, &v->f, 8); return 0;
    case OB_GGUF_STRING: put_str(b, v->str.ptr, v->str.len); return 0;
    case OB_GGUF_ARRAY: {
        uint32_t et = v->arr.elem_type;
        if (et > OB_GGUF_F64)
            return ob_seterr(OB_EUSAGE, "invalid array element type %u", et);
        put_u32(b, et);
        put_u64(b, v->arr.n);
        if (et != OB_GGUF_STRING && et != OB_GGUF_ARRAY) {
            put(b, v->arr.data, v->arr.n * ob_gguf_vtype_size(et));
            return 0;
        }
        for (uint64_t i = 0; i < v->arr.n; i++) {
            if (v->arr.elems[i].type != et)
                return ob_seterr(OB_EUSAGE, "array element %llu has type %s, not %s",
                                 (unsigned long long)i, ob_gguf_vtype_name(v->arr.elems[i].type),
                                 ob_gguf_vtype_name(et));
            int e = encode(b, &v->arr.elems[i], depth + 1);
            if (e)
                return e;
        }
        return 0;
    }
    }
    return ob_seterr(OB_EUSAGE, "invalid value type %u", v->type);
}

int ob_gguf_writer_new(struct ob_gguf_writer **out)
{
    *out = calloc(1, sizeof **out);
    return *out ? 0 : ob_seterr(OB_ENOMEM, "out of memory");
}

void ob_gguf_writer_free(struct ob_gguf_writer *w)
{
    if (!w)
        return;
    for (size_t i = 0; i < w->n_kv; i++) {
        free(w->kv[i].key);
        free(w->kv[i].bytes);
    }
    for (size_t i = 0; i < w->n_t; i++)
        free(w->t[i].name);
    free(w->kv);
    free(w->t);
    free(w);
}

int ob_gguf_writer_set(struct ob_gguf_writer *w, const char *key, const struct ob_gguf_value *v)
{
    struct ob_sb b = {0};
    put_u32(&b, v->type);
    int e = encode(&b, v, 0);
    if (!e && b.oom)
        e = ob_seterr(OB_ENOMEM, "out of memory encoding '%s'", key);
    if (!e && strcmp(key, "general.alignment") == 0 &&
        (v->type != OB_GGUF_U32 || !v->u || (v->u & (v->u - 1))))
        e = ob_seterr(OB_EUSAGE, "general.alignment must be a u32 power of two");
    if (e) {
        free(b.p);
        return ob_errprefix(e, "metadata key '%s'", key);
    }
    for (size_t i = 0; i < w->n_kv; i++)
        if (strcmp(w->kv[i].key, key) == 0) {
            free(w->kv[i].bytes);
            w->kv[i].bytes = (uint8_t *)b.p;
            w->kv[i].len = b.len;
            return 0;
        }
    if (!OB_GROW(w->kv, w->cap_kv, w->n_kv + 1)) {
        free(b.p);
        return ob_seterr(OB_ENOMEM, "out of memory");
    }
    char *k = strdup(key);
    if (!k) {
        free(b.p);
        return ob_seterr(OB_ENOMEM, "out of memory");
    }
    w->kv[w->n_kv++] = (struct wkv){k, (uint8_t *)b.p, b.len};
    return 0;
}

int ob_gguf_writer_set_u32(struct ob_gguf_writer *w, const char *key, uint32_t v)
{
    return ob_gguf_writer_set(w, key, &(struct ob_gguf_value){.type = OB_GGUF_U32, .u = v});
}

int ob_gguf_writer_set_i32(struct ob_gguf_writer *w, const char *key, int32_t v)
{
    return ob_gguf_writer_set(w, key, &(struct ob_gguf_value){.type = OB_GGUF_I32, .i = v});
}

int ob_gguf_writer_set_u64(struct ob_gguf_writer *w, const char *key, uint64_t v)
{
    return ob_gguf_writer_set(w, key, &(struct ob_gguf_value){.type = OB_GGUF_U64, .u = v});
}

int ob_gguf_writer_set_f32(struct ob_gguf_writer *w, const char *key, float v)
{
    return ob_gguf_writer_set(w, key, &(struct ob_gguf_value){.type = OB_GGUF_F32, .f = v});
}

int ob_gguf_writer_set_bool(struct ob_gguf_writer *w, const char *key, bool v)
{
    return ob_gguf_writer_set(w, key, &(struct ob_gguf_value){.type = OB_GGUF_BOOL, .u = v});
}

int ob_gguf_writer_set_str(struct ob_gguf_writer *w, const char *key, const char *s)
{
    struct ob_gguf_value v = {.type = OB_GGUF_STRING};
    v.str.ptr = s;
    v.str.len = strlen(s);
    return ob_gguf_writer_set(w, key, &v);
}

int ob_gguf_writer_set_arr(struct ob_gguf_writer *w, const char *key, uint32_t et, uint64_t n,
                           const void *data)
{
    if (!ob_gguf_vtype_size(et))
        return ob_seterr(OB_EUSAGE, "metadata key '%s': set_arr takes scalar elements", key);
    struct ob_gguf_value v = {.type = OB_GGUF_ARRAY};
    v.arr.elem_type = et;
    v.arr.n = n;
    v.arr.data = data;
    return ob_gguf_writer_set(w, key, &v);
}

int ob_gguf_writer_set_str_arr(struct ob_gguf_writer *w, const char *key, uint64_t n,
                               const char *const *strs, const uint64_t *lens)
{
    struct ob_gguf_value *el = calloc(n ? n : 1, sizeof *el);
    if (!el)
        return ob_seterr(OB_ENOMEM, "out of memory");
    for (uint64_t i = 0; i < n; i++) {
        el[i].type = OB_GGUF_STRING;
        el[i].str.ptr = strs[i];
        el[i].str.len = lens ? lens[i] : strlen(strs[i]);
    }
    struct ob_gguf_value v = {.type = OB_GGUF_ARRAY};
    v.arr.elem_type = OB_GGUF_STRING;
    v.arr.n = n;
    v.arr.elems = el;
    int e = ob_gguf_writer_set(w, key, &v);
    free(el);
    return e;
}

int ob_gguf_writer_copy_meta(struct ob_gguf_writer *w, const struct ob_gguf *g)
{
    for (uint64_t i = 0; i < ob_gguf_n_kv(g); i++) {
        const struct ob_gguf_kv *kv = ob_gguf_kv_at(g, i);
        int e = ob_gguf_writer_set(w, kv->key, &kv->val);
        if (e)
            return e;
    }
    return 0;
}

int ob_gguf_writer_add_tensor(struct ob_gguf_writer *w, const char *name, uint32_t type,
                              uint32_t n_dims, const uint64_t ne[], const void *data,
                              ob_gguf_fill_fn fill, void *fill_ctx)
{
    if (n_dims < 1 || n_dims > 4)
        return ob_seterr(OB_EUSAGE, "tensor '%s': %u dimensions (1 to 4 allowed)", name, n_dims);
    if (!ob_type_known(type))
        return ob_seterr(OB_EUSAGE, "tensor '%s': unknown type id %u", name, type);
    if (!data == !fill)
        return ob_seterr(OB_EUSAGE, "tensor '%s': give exactly one of data and fill", name);
    for (size_t i = 0; i < w->n_t; i++)
        if (strcmp(w->t[i].name, name) == 0)
            return ob_seterr(OB_EUSAGE, "tensor '%s' added twice", name);
    struct wtensor t = {.type = type, .n_dims = n_dims, .data = data, .fill = fill,
                        .fill_ctx = fill_ctx};
    uint64_t nel = 1;
    for (uint32_t d = 0; d < 4; d++) {
        t.ne[d] = d < n_dims ? ne[d] : 1;
        if (!t.ne[d] || __builtin_mul_overflow(nel, t.ne[d], &nel))
            return ob_seterr(OB_EUSAGE, "tensor '%s': bad dimension %u", name, d);
    }
    uint64_t row;
    if (!ob_type_row_bytes(type, t.ne[0], &row) ||
        __builtin_mul_overflow(row, nel / t.ne[0], &t.nbytes))
        return ob_seterr(OB_EUSAGE, "tensor '%s': %llu is not a multiple of the %s block size",
                         name, (unsigned long long)t.ne[0], ob_type_name(type));
    if (!OB_GROW(w->t, w->cap_t, w->n_t + 1))
        return ob_seterr(OB_ENOMEM, "out of memory");
    if (!(t.name = strdup(name)))
        return ob_seterr(OB_ENOMEM, "out of memory");
    w->t[w->n_t++] = t;
    return 0;
}

static uint32_t writer_alignment(const struct ob_gguf_writer *w)
{
    for (size_t i = 0; i < w->n_kv; i++)
        if (strcmp(w->kv[i].key, "general.alignment") == 0) {
            uint32_t a;
            memcpy(&a, w->kv[i].bytes + 4, 4);
            return a;
        }
    return 32;
}

static int wr(FILE *f, const void *p, size_t n, const char *tmp)
{
    if (n && fwrite(p, 1, n, f) != n)
        return ob_seterr(OB_EIO, "%s: write: %s", tmp, strerror(errno));
    return 0;
}

static int pad(FILE *f, uint64_t *pos, uint32_t align, const char *tmp)
{
    static const uint8_t zero[64];
    uint64_t n = (align - *pos % align) % align;
    *pos += n;
    while (n) {
        size_t k = n < sizeof zero ? (size_t)n : sizeof zero;
        int e = wr(f, zero, k, tmp);
        if (e)
            return e;
        n -= k;
    }
    return 0;
}

int ob_gguf_writer_write(struct ob_gguf_writer *w, const char *path)
{
    uint32_t align = writer_alignment(w);
    size_t plen = strlen(path);
    char *tmp = malloc(plen + 16);
    if (!tmp)
        return ob_seterr(OB_ENOMEM, "out of memory");
    snprintf(tmp, plen + 16, "%s.tmp.XXXXXX", path);
    int fd = mkstemp(tmp);
    if (fd < 0) {
        int e = ob_seterr(OB_EIO, "%s: %s", tmp, strerror(errno));
        free(tmp);
        return e;
    }
    fchmod(fd, 0644);          /* mkstemp makes 0600; a model file is readable like any other */
    FILE *f = fdopen(fd, "wb");
    if (!f) {
        close(fd);
        unlink(tmp);
        free(tmp);
        return ob_seterr(OB_EIO, "fdopen: %s", strerror(errno));
    }
    void *scratch = NULL;
    uint64_t scratch_len = 0;
    int e = 0;
    uint64_t pos = 0, off = 0;
    struct ob_sb h = {0};

    put(&h, "GGUF", 4);
    put_u32(&h, 3);
    put_u64(&h, w->n_t);
    put_u64(&h, w->n_kv);
    for (size_t i = 0; i < w->n_kv; i++) {
        put_str(&h, w->kv[i].key, strlen(w->kv[i].key));
        put(&h, w->kv[i].bytes, w->kv[i].len);
    }
    for (size_t i = 0; i < w->n_t; i++) {
        struct wtensor *t = &w->t[i];
        t->offset = off;
        put_str(&h, t->name, strlen(t->name));
        put_u32(&h, t->n_dims);
        for (uint32_t d = 0; d < t->n_dims; d++)
            put_u64(&h, t->ne[d]);
        put_u32(&h, t->type);
        put_u64(&h, t->offset);
        off += t->nbytes;
        off += (align - off % align) % align;
    }
    if (h.oom) {
        e = ob_seterr(OB_ENOMEM, "out of memory for the header");
        goto fail;
    }
    if ((e = wr(f, h.p, h.len, tmp)))
        goto fail;
    pos = h.len;
    if ((e = pad(f, &pos, align, tmp)))
        goto fail;
    for (size_t i = 0; i < w->n_t; i++) {
        struct wtensor *t = &w->t[i];
        const void *src = t->data;
        if (t->fill) {
            if (t->nbytes > scratch_len) {
                free(scratch);
                if (!(scratch = malloc(t->nbytes))) {
                    e = ob_seterr(OB_ENOMEM, "out of memory for tensor '%s'", t->name);
                    goto fail;
                }
                scratch_len = t->nbytes;
            }
            if ((e = t->fill(t->fill_ctx, i, scratch, t->nbytes))) {
                ob_errprefix(e, "tensor '%s'", t->name);
                goto fail;
            }
            src = scratch;
        }
        if ((e = wr(f, src, t->nbytes, tmp)))
            goto fail;
        pos += t->nbytes;
        if (i + 1 < w->n_t && (e = pad(f, &pos, align, tmp)))
            goto fail;
    }
    if (fflush(f) != 0 || fsync(fileno(f)) != 0) {
        e = ob_seterr(OB_EIO, "%s: %s", tmp, strerror(errno));
        goto fail;
    }
    if (fclose(f) != 0) {
        f = NULL;
        e = ob_seterr(OB_EIO, "%s: %s", tmp, strerror(errno));
        goto fail;
    }
    f = NULL;
    if (rename(tmp, path) != 0) {
        e = ob_seterr(OB_EIO, "%s: rename: %s", path, strerror(errno));
        goto fail;
    }
    free(h.p);
    free(scratch);
    free(tmp);
    return 0;
fail:
    if (f)
        fclose(f);
    unlink(tmp);
    free(h.p);
    free(scratch);
    free(tmp);
    return e;
}
