/*
 * gguf.c — unit tests of the GGUF reader and writer (TAP).
 *
 *  - writer -> reader round trip of every metadata type, nested arrays, alignment, tensors;
 *  - every truncation of a valid file is rejected with OB_EFORMAT and a located message;
 *  - hand-made hostile headers (huge counts and lengths, bad types, overflowing dimensions,
 *    misaligned or out-of-file tensors, duplicates, deep nesting) each give the expected error;
 *  - byte-flip mutations of a valid header never crash (the fuzzer does this at scale);
 *  - general.alignment 1 is refused where a tensor would start misaligned for its blocks;
 *  - the tokenizer reader refuses a special-token id outside the vocabulary (-1 and 0xffffffff
 *    still mean none);
 *  - ob_gguf_scan over every prefix of a valid file: "more" until the header is whole, then the
 *    file's size; a bad header is refused from the first bytes that show it.
 */
#include <dirent.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "1b.h"
#include "model.h"
#include "tap.h"
#include "tok.h"


/* ---- a byte builder for hand-made files ------------------------------------------------- */

struct bb {
    uint8_t p[4096];
    size_t n;
};

static void b_raw(struct bb *b, const void *s, size_t n) { memcpy(b->p + b->n, s, n); b->n += n; }
static void b_u32(struct bb *b, uint32_t v) { b_raw(b, &v, 4); }
static void b_u64(struct bb *b, uint64_t v) { b_raw(b, &v, 8); }
static void b_str(struct bb *b, const char *s) { b_u64(b, strlen(s)); b_raw(b, s, strlen(s)); }
static void b_pad(struct bb *b, size_t a) { while (b->n % a) b->p[b->n++] = 0; }

static void header(struct bb *b, uint32_t version, uint64_t nt, uint64_t nkv)
{
    b->n = 0;
    b_raw(b, "GGUF", 4);
    b_u32(b, version);
    b_u64(b, nt);
    b_u64(b, nkv);
}

/* expect rejection with code `code` and a message containing `needle` */
static void expect(const char *what, struct bb *b, int code, const char *needle)
{
    struct ob_gguf *g = NULL;
    int e = ob_gguf_open_mem(b->p, b->n, &g);
    int good = e == code && strstr(ob_errmsg(), needle) != NULL;
    ok(good, "%s -> %s (%s)", what, e ? ob_strerror(e) : "accepted", e ? ob_errmsg() : "");
    ob_gguf_close(g);
}

static void hostile(void)
{
    struct bb b;

    b.n = 0;
    b_raw(&b, "GGUG", 4);
    expect("bad magic", &b, OB_EFORMAT, "bad magic");
    header(&b, 1, 0, 0);
    expect("version 1", &b, OB_EUNSUPP, "version 1");
    header(&b, 7, 0, 0);
    expect("version 7", &b, OB_EFORMAT, "unknown GGUF version");
    header(&b, 0x03000000, 0, 0);
    expect("big-endian", &b, OB_EUNSUPP, "big-endian");
    header(&b, 3, 0, UINT64_MAX);
    expect("huge kv count", &b, OB_EFORMAT, "metadata count");
    header(&b, 3, UINT64_MAX / 2, 0);
    expect("huge tensor count", &b, OB_EFORMAT, "tensor count");

    header(&b, 3, 0, 1);
    b_u64(&b, UINT64_MAX - 3);
    b_u64(&b, 0);
    b_u64(&b, 0);
    expect("huge key length", &b, OB_EFORMAT, "key of metadata pair 0 has length");

    header(&b, 3, 0, 1);
    b_str(&b, "k");
    b_u32(&b, 13);
    b_u32(&b, 0);
    expect("invalid value type", &b, OB_EFORMAT, "invalid value type 13");

    header(&b, 3, 0, 1);
    b_str(&b, "s");
    b_u32(&b, OB_GGUF_STRING);
    b_u64(&b, 1ull << 62);
    expect("huge string length", &b, OB_EFORMAT, "length");

    header(&b, 3, 0, 1);
    b_str(&b, "a");
    b_u32(&b, OB_GGUF_ARRAY);
    b_u32(&b, OB_GGUF_U64);
    b_u64(&b, 1ull << 61);                   /* * 8 bytes overflows 64 bits */
    expect("array length overflowing", &b, OB_EFORMAT, "cannot fit");

    header(&b, 3, 0, 1);
    b_str(&b, "a");
    b_u32(&b, OB_GGUF_ARRAY);
    b_u32(&b, OB_GGUF_STRING);
    b_u64(&b, 1000000);
    expect("string array longer than the file", &b, OB_EFORMAT, "cannot fit");

    header(&b, 3, 0, 1);
    b_str(&b, "deep");
    b_u32(&b, OB_GGUF_ARRAY);
    for (int d = 0; d < 20; d++) {
        b_u32(&b, OB_GGUF_ARRAY);
        b_u64(&b, 1);
    }
    b_u32(&b, OB_GGUF_U8);
    b_u64(&b, 0);
    expect("arrays nested 20 deep", &b, OB_EFORMAT, "nested");

    header(&b, 3, 0, 1);
    b_str(&b, "b");
    b_u32(&b, OB_GGUF_BOOL);
    b.p[b.n++] = 2;
    expect("bool value 2", &b, OB_EFORMAT, "bool");

    header(&b, 3, 0, 2);
    b_str(&b, "dup");
    b_u32(&b, OB_GGUF_U8);
    b.p[b.n++] = 1;
    b_str(&b, "dup");
    b_u32(&b, OB_GGUF_U8);
    b.p[b.n++] = 2;
    expect("duplicate key", &b, OB_EFORMAT, "duplicate key 'dup'");

    static const struct { uint32_t type; uint64_t v; const char *what; } aligns[] = {
        {OB_GGUF_U32, 0, "zero"}, {OB_GGUF_U32, 48, "48"}, {OB_GGUF_U64, 32, "a u64"}};
    for (int i = 0; i < 3; i++) {
        header(&b, 3, 0, 1);
        b_str(&b, "general.alignment");
        b_u32(&b, aligns[i].type);
        if (aligns[i].type == OB_GGUF_U32)
            b_u32(&b, (uint32_t)aligns[i].v);
        else
            b_u64(&b, aligns[i].v);
        char w[64];
        snprintf(w, sizeof w, "alignment %s", aligns[i].what);
        expect(w, &b, OB_EFORMAT, "general.alignment");
    }

    /* tensor infos */
    struct { uint32_t nd; uint64_t ne[5]; uint32_t type; uint64_t off; const char *needle; } ts[] = {
        {0, {0}, OB_F32, 0, "0 dimensions"},
        {5, {1, 1, 1, 1, 1}, OB_F32, 0, "5 dimensions"},
        {2, {4, 0}, OB_F32, 0, "dimension 1 is 0"},
        {2, {1ull << 40, 1ull << 40}, OB_F32, 0, "overflows"},
        {1, {8}, 31, 0, "unknown type id 31"},
        {1, {8}, 99, 0, "unknown type id 99"},
        {1, {48}, OB_Q4_K, 0, "not a multiple of the Q4_K block size 256"},
        {1, {8}, OB_F32, 4, "not a multiple of the alignment"},
        {1, {8}, OB_F32, 64, "outside"},
        {1, {1ull << 60}, OB_F32, 0, "outside"},
        {4, {1ull << 20, 1ull << 20, 1ull << 20, 1ull << 20}, OB_F32, 0, "overflows"},
    };
    for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) {
        header(&b, 3, 1, 0);
        b_str(&b, "t");
        b_u32(&b, ts[i].nd);
        for (uint32_t d = 0; d < ts[i].nd; d++)
            b_u64(&b, ts[i].ne[d]);
        b_u32(&b, ts[i].type);
        b_u64(&b, ts[i].off);
        b_pad(&b, 32);
        for (int k = 0; k < 32; k++)
            b.p[b.n++] = 0;
        char w[96];
        snprintf(w, sizeof w, "tensor case %zu (%s)", i, ts[i].needle);
        expect(w, &b, OB_EFORMAT, ts[i].needle);
    }

    header(&b, 3, 2, 0);
    for (int k = 0; k < 2; k++) {
        b_str(&b, "same");
        b_u32(&b, 1);
        b_u64(&b, 8);
        b_u32(&b, OB_F32);
        b_u64(&b, 0);
    }
    b_pad(&b, 32);
    for (int k = 0; k < 32; k++)
        b.p[b.n++] = 0;
    expect("duplicate tensor", &b, OB_EFORMAT, "appears twice");

    /* general.alignment = 1 (a power of two, as GGUF allows): a tensor must still start where
     * its blocks may be read (F32: 4 bytes), or the kernels read misaligned floats */
    static const struct { uint32_t type; uint64_t ne; int pad; int code; const char *what; }
        a1[] = {{OB_F32, 8, 1, OB_EFORMAT, "F32 at an odd offset refused"},
                {OB_Q8_0, 32, 1, OB_EFORMAT, "Q8_0 at an odd offset refused"},
                {OB_F32, 8, 0, 0, "F32 at a multiple of 4 accepted"},
                {OB_I8, 8, 1, 0, "I8 at an odd offset accepted"}};
    for (size_t i = 0; i < sizeof a1 / sizeof a1[0]; i++) {
        header(&b, 3, 1, 1);
        b_str(&b, "general.alignment");
        b_u32(&b, OB_GGUF_U32);
        b_u32(&b, 1);
        b_str(&b, "t");
        b_u32(&b, 1);
        b_u64(&b, a1[i].ne);
        b_u32(&b, a1[i].type);
        /* the data section starts right after the header (alignment 1): put the tensor at
         * the next multiple of 4, plus pad */
        size_t at = b.n + 8, off = (4 - at % 4) % 4 + (size_t)a1[i].pad;
        b_u64(&b, off);
        memset(b.p + b.n, 0, off + 64);
        b.n += off + 64;
        if (a1[i].code) {
            expect(a1[i].what, &b, a1[i].code, "general.alignment = 1");
        } else {
            struct ob_gguf *g;
            int e = ob_gguf_open_mem(b.p, b.n, &g);
            ok(e == 0, "alignment 1: %s (%s)", a1[i].what, e ? ob_errmsg() : "ok");
            if (!e)
                ob_gguf_close(g);
        }
    }

    /* a well-formed minimal file is accepted, v2 and v3 */
    for (uint32_t v = 2; v <= 3; v++) {
        header(&b, v, 1, 1);
        b_str(&b, "general.architecture");
        b_u32(&b, OB_GGUF_STRING);
        b_str(&b, "llama");
        b_str(&b, "w");
        b_u32(&b, 2);
        b_u64(&b, 4);
        b_u64(&b, 2);
        b_u32(&b, OB_F32);
        b_u64(&b, 0);
        b_pad(&b, 32);
        for (int k = 0; k < 32; k++)
            b.p[b.n++] = 0;
        struct ob_gguf *g;
        int e = ob_gguf_open_mem(b.p, b.n, &g);
        ok(e == 0 && ob_gguf_n_tensors(g) == 1 && ob_gguf_tensor(g, "w")->nbytes == 32,
           "minimal v%u file accepted", v);
        if (!e)
            ob_gguf_close(g);
    }
}

/* ---- round trip through the writer --------------------------------------------------------- */

static uint8_t *slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    *n = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *p = malloc(*n);
    if (p && fread(p, 1, *n, f) != *n) {
        free(p);
        p = NULL;
    }
    fclose(f);
    return p;
}

static int fill_counter(void *ctx, uint64_t index, void *buf, uint64_t nbytes)
{
    uint8_t *p = buf;
    for (uint64_t i = 0; i < nbytes; i++)
        p[i] = (uint8_t)(i * 31 + index + *(int *)ctx);
    return 0;
}

static int fail_fill(void *ctx, uint64_t index, void *buf, uint64_t nbytes)
{
    return ob_seterr(OB_EIO, "simulated failure");
}

/* no "*.tmp.*" file left in dir */
static int no_temp_files(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    int clean = 1;
    while (d && (e = readdir(d)))
        if (strstr(e->d_name, ".tmp."))
            clean = 0;
    if (d)
        closedir(d);
    return clean;
}

static void roundtrip(const char *dir)
{
    char path[512];
    snprintf(path, sizeof path, "%s/rt.gguf", dir);
    struct ob_gguf_writer *w;
    ob_gguf_writer_new(&w);
    int e = 0, salt = 5;
    e |= ob_gguf_writer_set_u32(w, "general.alignment", 128);
    e |= ob_gguf_writer_set_str(w, "general.architecture", "qwen3");
    e |= ob_gguf_writer_set_u32(w, "x", 1);
    e |= ob_gguf_writer_set_u32(w, "x", 2);      /* replaces in place */
    e |= ob_gguf_writer_set(w, "neg", &(struct ob_gguf_value){.type = OB_GGUF_I16, .i = -7});
    e |= ob_gguf_writer_set_f32(w, "f", -0.0f);
    double dd[3] = {1.0 / 3, -2.5e-310, 1e308};
    e |= ob_gguf_writer_set_arr(w, "d", OB_GGUF_F64, 3, dd);
    const char *s3[3] = {"x", "y\0z", ""};
    uint64_t l3[3] = {1, 3, 0};
    e |= ob_gguf_writer_set_str_arr(w, "strs", 3, s3, l3);
    float data[256];
    for (int i = 0; i < 256; i++)
        data[i] = (float)i * 0.5f;
    e |= ob_gguf_writer_add_tensor(w, "t0", OB_F32, 2, (uint64_t[]){16, 16}, data, NULL, NULL);
    e |= ob_gguf_writer_add_tensor(w, "t1", OB_Q6_K, 2, (uint64_t[]){256, 3}, NULL, fill_counter,
                                   &salt);
    e |= ob_gguf_writer_add_tensor(w, "t2", OB_BF16, 1, (uint64_t[]){7}, data, NULL, NULL);
    ok(e == 0, "writer accepts values and tensors");
    ok(ob_gguf_writer_add_tensor(w, "t0", OB_F32, 1, (uint64_t[]){4}, data, NULL, NULL) ==
       OB_EUSAGE, "writer rejects a duplicate tensor name");
    ok(ob_gguf_writer_add_tensor(w, "bad", OB_Q4_K, 1, (uint64_t[]){100}, data, NULL, NULL) ==
       OB_EUSAGE, "writer rejects a row that is not whole blocks");
    ok(ob_gguf_writer_set_u32(w, "general.alignment", 24) == OB_EUSAGE,
       "writer rejects an alignment that is not a power of two");
    e = ob_gguf_writer_write(w, path);
    ok(e == 0, "write %s", e ? ob_errmsg() : path);
    ob_gguf_writer_free(w);

    struct ob_gguf *g;
    e = ob_gguf_open(path, &g);
    ok(e == 0, "read back (%s)", e ? ob_errmsg() : "ok");
    if (e)
        return;
    uint32_t u;
    float f;
    const struct ob_gguf_value *v;
    ok(ob_gguf_version(g) == 3 && ob_gguf_alignment(g) == 128, "version 3, alignment 128");
    ok(ob_gguf_n_kv(g) == 7, "7 keys (x replaced in place)");
    ok(ob_gguf_get_u32(g, "x", &u) == 0 && u == 2 && strcmp(ob_gguf_kv_at(g, 2)->key, "x") == 0,
       "replaced value, original position");
    ok(ob_gguf_get_u32(g, "neg", &u) == OB_EFORMAT, "negative i16 refused as u32");
    ok(ob_gguf_get_f32(g, "f", &f) == 0 && f == 0.0f && 1.0f / f < 0, "-0.0 survives");
    v = ob_gguf_get(g, "d");
    ok(v && v->arr.n == 3 && ob_gguf_arr_f(v, 0) == 1.0 / 3 && ob_gguf_arr_f(v, 1) == -2.5e-310 &&
       ob_gguf_arr_f(v, 2) == 1e308, "f64 array exact, subnormal included");
    v = ob_gguf_get(g, "strs");
    ok(v && v->arr.n == 3 && v->arr.elems[1].str.len == 3 &&
       memcmp(v->arr.elems[1].str.ptr, "y\0z", 3) == 0 && v->arr.elems[2].str.len == 0,
       "string array with an embedded NUL and an empty string");
    ok(ob_gguf_get_u32(g, "missing", &u) == OB_ENOTFOUND, "missing key is OB_ENOTFOUND");
    const struct ob_gguf_tensor *t0 = ob_gguf_tensor(g, "t0"), *t1 = ob_gguf_tensor(g, "t1"),
                                *t2 = ob_gguf_tensor(g, "t2");
    ok(t0 && t1 && t2 && memcmp(t0->data, data, sizeof data) == 0, "f32 tensor data");
    int good = t1 && t1->nbytes == 3 * 210;
    for (uint64_t i = 0; good && i < t1->nbytes; i++)
        good = ((const uint8_t *)t1->data)[i] == (uint8_t)(i * 31 + 1 + salt);
    ok(good, "callback-filled Q6_K tensor data");
    ok(t0->offset % 128 == 0 && t1->offset % 128 == 0 && t2->offset % 128 == 0 &&
       ob_gguf_data_offset(g) % 128 == 0, "offsets aligned to 128");
    uint64_t data_off = ob_gguf_data_offset(g);
    ob_gguf_close(g);

    /* every truncation is rejected, with a located message */
    size_t n = 0;
    uint8_t *buf = slurp(path, &n);
    int all = buf != NULL, located = 1;
    for (size_t len = 0; all && len < n; len++) {
        struct ob_gguf *h;
        uint8_t *cp = malloc(len + 1);
        memcpy(cp, buf, len);
        int r = ob_gguf_open_mem(cp, len, &h);
        if (r == 0) {
            ob_gguf_close(h);
            all = 0;
            printf("# prefix of %zu bytes accepted\n", len);
        } else if (r != OB_EFORMAT) {
            all = 0;
            printf("# prefix of %zu bytes: %s\n", len, ob_strerror(r));
        } else if (!strstr(ob_errmsg(), "offset") && !strstr(ob_errmsg(), "tensor")) {
            located = 0;
            printf("# prefix %zu: unlocated message: %s\n", len, ob_errmsg());
        }
        free(cp);
    }
    ok(all, "all %zu truncations rejected with OB_EFORMAT", n);
    ok(located, "every truncation message names an offset or a tensor");

    /* the header scan of a file still arriving: "more" on every prefix that ends inside the
     * header, then always the same size (our writer does not pad after the last tensor) */
    uint64_t mn = 0, mx = 0, first = 0;
    int scans = buf != NULL;
    for (size_t len = 0; scans && len <= n; len++) {
        bool more;
        uint64_t a = 0, z = 0;
        int r = ob_gguf_scan(buf, len, &a, &z, &more);
        if (r == 0 && !first)
            first = len, mn = a, mx = z;
        if (r ? !more || first : a != mn || z != mx) {
            scans = 0;
            printf("# scan of %zu bytes: %s\n", len, r ? ob_errmsg() : "other sizes");
        }
    }
    ok(scans && first <= data_off && mn == n && mx == (n + 127) / 128 * 128,
       "scan: more until %llu bytes, then the file's %llu bytes (up to %llu with padding)",
       (unsigned long long)first, (unsigned long long)mn, (unsigned long long)mx);
    bool more = true;
    uint64_t a, z;
    ok(ob_gguf_scan("GGUG", 4, &a, &z, &more) == OB_EFORMAT && !more,
       "scan: a bad magic needs no more bytes to be refused");
    ok(ob_gguf_scan("GG", 2, &a, &z, &more) == OB_EFORMAT && more,
       "scan: two bytes of a magic ask for more");

    /* byte flips in the header: accepted or rejected, never a crash */
    uint64_t hdr = 600 < n ? 600 : n;
    int flips = 0;
    for (uint64_t i = 0; buf && i < hdr; i++)
        for (int k = 0; k < 3; k++) {
            uint8_t *cp = malloc(n);
            memcpy(cp, buf, n);
            cp[i] = k == 0 ? 0xff : k == 1 ? 0x00 : (uint8_t)(cp[i] ^ 0x80);
            struct ob_gguf *h;
            if (ob_gguf_open_mem(cp, n, &h) == 0)
                ob_gguf_close(h);
            free(cp);
            flips++;
        }
    ok(flips > 0, "%d header mutations survived", flips);
    free(buf);

    /* the atomic writer leaves no file behind when it fails */
    ob_gguf_writer_new(&w);
    ob_gguf_writer_set_str(w, "general.architecture", "x");
    char bad[600];
    snprintf(bad, sizeof bad, "%s/no/such/dir/m.gguf", dir);
    ok(ob_gguf_writer_write(w, bad) == OB_EIO, "write into a missing directory is OB_EIO");
    ob_gguf_writer_free(w);
    snprintf(bad, sizeof bad, "%s/fail.gguf", dir);
    ob_gguf_writer_new(&w);
    ob_gguf_writer_add_tensor(w, "t", OB_F32, 1, (uint64_t[]){4}, NULL, fail_fill, NULL);
    ok(ob_gguf_writer_write(w, bad) != 0 && access(bad, F_OK) != 0 && no_temp_files(dir),
       "a failing tensor callback leaves no output or temporary file");
    ob_gguf_writer_free(w);
}

/* tokenizer.ggml.bos_token_id = v (of type t) in a 3-token llama vocabulary */
static int tok_with_bos(const char *dir, uint32_t t, int64_t v, int32_t *bos)
{
    char path[512];
    snprintf(path, sizeof path, "%s/tok.gguf", dir);
    struct ob_gguf_writer *w;
    ob_gguf_writer_new(&w);
    const char *toks[3] = {"<unk>", "<s>", "a"};
    ob_gguf_writer_set_str(w, "tokenizer.ggml.model", "llama");
    ob_gguf_writer_set_str_arr(w, "tokenizer.ggml.tokens", 3, toks, NULL);
    struct ob_gguf_value val = {.type = t};
    if (t == OB_GGUF_I32)
        val.i = v;
    else
        val.u = (uint64_t)v;
    ob_gguf_writer_set(w, "tokenizer.ggml.bos_token_id", &val);
    int e = ob_gguf_writer_write(w, path);
    ob_gguf_writer_free(w);
    struct ob_gguf *g;
    struct ob_tok *tok = NULL;
    if (e || (e = ob_gguf_open(path, &g)))
        return e;
    e = ob_tok_from_gguf(g, &tok);
    *bos = tok ? ob_tok_bos(tok) : -2;
    ob_tok_free(tok);
    ob_gguf_close(g);
    return e;
}

static void token_ids(const char *dir)
{
    int32_t bos;
    int e = tok_with_bos(dir, OB_GGUF_U32, 3, &bos);
    ok(e == OB_EFORMAT && strstr(ob_errmsg(), "tokenizer.ggml.bos_token_id = 3"),
       "bos id 3 of 3 tokens refused (%s)", e ? ob_errmsg() : "accepted");
    ok(tok_with_bos(dir, OB_GGUF_U32, 1, &bos) == 0 && bos == 1, "bos id 1 kept");
    ok(tok_with_bos(dir, OB_GGUF_U32, 0xffffffff, &bos) == 0 && bos == -1,
       "bos id 0xffffffff means none");
    ok(tok_with_bos(dir, OB_GGUF_I32, -1, &bos) == 0 && bos == -1, "bos id -1 (i32) means none");
}

int main(int argc, char **argv)
{
    const char *dir = argc > 1 ? argv[1] : ".";
    hostile();
    roundtrip(dir);
    token_ids(dir);
    return tap_done();
}
