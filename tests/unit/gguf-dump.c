/*
 * gguf-dump — print a GGUF file in a canonical, exact JSON form, for comparison with the same
 * dump made by the gguf Python package (tests/py/gguf_dump.py):
 *
 *   {"version":3,"alignment":32,
 *    "kv":[["key","u32",7],["name","string","<hex bytes>"],["f","f32","<hex bits>"],
 *          ["arr","array",["u8",[1,2]]], ...],
 *    "tensors":[["name","Q4_K",[ne0,ne1],offset,"<sha256 of the bytes>"], ...]}
 *
 * Floats are printed as their bit patterns and strings as hex bytes, so that equality of two
 * dumps means equality of every value, bit for bit.
 *
 *   gguf-dump FILE      (exit 3 with the reader's message if the file is rejected)
 *   gguf-dump --write-all FILE   write a file exercising every metadata type (for interop)
 */
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "1b.h"

static void hexbytes(const void *p, size_t n)
{
    const unsigned char *b = p;
    putchar('"');
    for (size_t i = 0; i < n; i++)
        printf("%02x", b[i]);
    putchar('"');
}

static void scalar(uint32_t t, const struct ob_gguf_value *v)
{
    switch (t) {
    case OB_GGUF_F32: { float f = (float)v->f; hexbytes(&f, 4); break; }
    case OB_GGUF_F64: hexbytes(&v->f, 8); break;
    case OB_GGUF_I8: case OB_GGUF_I16: case OB_GGUF_I32: case OB_GGUF_I64:
        printf("%lld", (long long)v->i);
        break;
    case OB_GGUF_BOOL: printf(v->u ? "true" : "false"); break;
    default: printf("%llu", (unsigned long long)v->u);
    }
}

static void value(const struct ob_gguf_value *v)
{
    if (v->type == OB_GGUF_STRING) {
        hexbytes(v->str.ptr, v->str.len);
        return;
    }
    if (v->type != OB_GGUF_ARRAY) {
        scalar(v->type, v);
        return;
    }
    printf("[\"%s\",[", ob_gguf_vtype_name(v->arr.elem_type));
    for (uint64_t i = 0; i < v->arr.n; i++) {
        if (i)
            putchar(',');
        if (v->arr.elems) {
            value(&v->arr.elems[i]);
            continue;
        }
        uint32_t t = v->arr.elem_type;
        struct ob_gguf_value s = {.type = t};
        if (t == OB_GGUF_F32 || t == OB_GGUF_F64)
            s.f = ob_gguf_arr_f(v, i);
        else if (t == OB_GGUF_I8 || t == OB_GGUF_I16 || t == OB_GGUF_I32 || t == OB_GGUF_I64)
            s.i = ob_gguf_arr_i(v, i);
        else
            s.u = ob_gguf_arr_u(v, i);
        scalar(t, &s);
    }
    printf("]]");
}

static int dump(const char *path)
{
    struct ob_gguf *g;
    if (ob_gguf_open(path, &g)) {
        fprintf(stderr, "gguf-dump: %s\n", ob_errmsg());
        return 3;
    }
    printf("{\"version\":%u,\"alignment\":%u,\"kv\":[", ob_gguf_version(g), ob_gguf_alignment(g));
    for (uint64_t i = 0; i < ob_gguf_n_kv(g); i++) {
        const struct ob_gguf_kv *kv = ob_gguf_kv_at(g, i);
        printf("%s[\"%s\",\"%s\",", i ? "," : "", kv->key, ob_gguf_vtype_name(kv->val.type));
        value(&kv->val);
        putchar(']');
    }
    printf("],\"tensors\":[");
    for (uint64_t i = 0; i < ob_gguf_n_tensors(g); i++) {
        const struct ob_gguf_tensor *t = ob_gguf_tensor_at(g, i);
        unsigned char md[32];
        unsigned int ml;
        EVP_Digest(t->data, t->nbytes, md, &ml, EVP_sha256(), NULL);
        printf("%s[\"%s\",\"%s\",[", i ? "," : "", t->name, ob_type_name(t->type));
        for (uint32_t d = 0; d < t->n_dims; d++)
            printf("%s%llu", d ? "," : "", (unsigned long long)t->ne[d]);
        printf("],%llu,", (unsigned long long)t->offset);
        hexbytes(md, 32);
        putchar(']');
    }
    printf("]}\n");
    ob_gguf_close(g);
    return 0;
}

/* A file with every metadata type, nested arrays, odd strings and several tensor types. */
static int write_all(const char *path)
{
    struct ob_gguf_writer *w;
    if (ob_gguf_writer_new(&w))
        return 5;
    int e = 0;
    e |= ob_gguf_writer_set_str(w, "general.architecture", "llama");
    e |= ob_gguf_writer_set_u32(w, "general.alignment", 64);
    e |= ob_gguf_writer_set(w, "t.u8", &(struct ob_gguf_value){.type = OB_GGUF_U8, .u = 200});
    e |= ob_gguf_writer_set(w, "t.i8", &(struct ob_gguf_value){.type = OB_GGUF_I8, .i = -100});
    e |= ob_gguf_writer_set(w, "t.u16", &(struct ob_gguf_value){.type = OB_GGUF_U16, .u = 60000});
    e |= ob_gguf_writer_set(w, "t.i16", &(struct ob_gguf_value){.type = OB_GGUF_I16, .i = -30000});
    e |= ob_gguf_writer_set_u32(w, "t.u32", 4000000000u);
    e |= ob_gguf_writer_set_i32(w, "t.i32", -2000000000);
    e |= ob_gguf_writer_set_f32(w, "t.f32", 0.1f);
    e |= ob_gguf_writer_set_bool(w, "t.bool", true);
    e |= ob_gguf_writer_set_str(w, "t.str", "h\xc3\xa9llo \xe2\x96\x81 \xf0\x9f\x98\x80");
    e |= ob_gguf_writer_set_str(w, "t.empty", "");
    e |= ob_gguf_writer_set_u64(w, "t.u64", 18000000000000000000ull);
    e |= ob_gguf_writer_set(w, "t.i64", &(struct ob_gguf_value){.type = OB_GGUF_I64, .i = -9000000000000000000ll});
    e |= ob_gguf_writer_set(w, "t.f64", &(struct ob_gguf_value){.type = OB_GGUF_F64, .f = -1e-300});
    int32_t ints[5] = {-1, 0, 1, 2147483647, -2147483647 - 1};
    float fl[4] = {1.5f, -0.0f, 1e-45f, 3.4e38f};
    e |= ob_gguf_writer_set_arr(w, "t.arr_i32", OB_GGUF_I32, 5, ints);
    e |= ob_gguf_writer_set_arr(w, "t.arr_f32", OB_GGUF_F32, 4, fl);
    e |= ob_gguf_writer_set_arr(w, "t.arr_empty", OB_GGUF_U8, 0, ints);
    const char *strs[3] = {"a", "", "\xe4\xb8\xad\xe6\x96\x87"};
    e |= ob_gguf_writer_set_str_arr(w, "t.arr_str", 3, strs, NULL);
    /* array of arrays: [[1,2],[3]] of u16 */
    uint16_t a1[2] = {1, 2}, a2[1] = {3};
    struct ob_gguf_value inner[2] = {{.type = OB_GGUF_ARRAY}, {.type = OB_GGUF_ARRAY}};
    inner[0].arr.elem_type = OB_GGUF_U16, inner[0].arr.n = 2, inner[0].arr.data = a1;
    inner[1].arr.elem_type = OB_GGUF_U16, inner[1].arr.n = 1, inner[1].arr.data = a2;
    struct ob_gguf_value outer = {.type = OB_GGUF_ARRAY};
    outer.arr.elem_type = OB_GGUF_ARRAY, outer.arr.n = 2, outer.arr.elems = inner;
    e |= ob_gguf_writer_set(w, "t.arr_arr", &outer);

    static float f32[3 * 5];
    static uint16_t f16[64];
    static uint8_t q8[2 * 34], q4k[144];
    for (int i = 0; i < 15; i++)
        f32[i] = (float)i - 7.25f;
    for (int i = 0; i < 64; i++)
        f16[i] = (uint16_t)(0x3c00 + i);
    for (int i = 0; i < (int)sizeof q8; i++)
        q8[i] = (uint8_t)(i * 7);
    for (int i = 0; i < (int)sizeof q4k; i++)
        q4k[i] = (uint8_t)(i * 13 + 1);
    e |= ob_gguf_writer_add_tensor(w, "a.f32", OB_F32, 2, (uint64_t[]){5, 3}, f32, NULL, NULL);
    e |= ob_gguf_writer_add_tensor(w, "b.f16", OB_F16, 3, (uint64_t[]){4, 4, 4}, f16, NULL, NULL);
    e |= ob_gguf_writer_add_tensor(w, "c.q8_0", OB_Q8_0, 1, (uint64_t[]){64}, q8, NULL, NULL);
    e |= ob_gguf_writer_add_tensor(w, "d.q4_k", OB_Q4_K, 1, (uint64_t[]){256}, q4k, NULL, NULL);
    if (e || ob_gguf_writer_write(w, path)) {
        fprintf(stderr, "gguf-dump: %s\n", ob_errmsg());
        ob_gguf_writer_free(w);
        return 5;
    }
    ob_gguf_writer_free(w);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "--write-all") == 0)
        return write_all(argv[2]);
    if (argc != 2) {
        fprintf(stderr, "usage: gguf-dump FILE | gguf-dump --write-all FILE\n");
        return 2;
    }
    return dump(argv[1]);
}
