/*
 * gguf-edit — copy a GGUF file with some metadata changed: how the tests make bad models from
 * good ones (out-of-range hyper-parameters, bad token ids, odd alignments).
 *
 *   gguf-edit IN OUT EDIT...
 *
 * EDIT is one of
 *   KEY=TYPE:VALUE   set KEY (in place when it exists, else appended); TYPE is u8, u32, i32,
 *                    u64, i64, f32, f64, bool (0 or 1) or str; numbers as strtod/strtoll read
 *                    them (inf, nan, 1e30, -1, 0x10)
 *   -KEY             drop KEY
 *   -@NAME           drop tensor NAME
 *   +@NAME=SRC       add tensor NAME, a copy of tensor SRC (type, shape and bytes)
 * Tensors are copied byte for byte and laid out at the output's general.alignment, so
 * general.alignment=u32:1 gives tensors at odd offsets. Exit 0, or 3 with the library's
 * message.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "1b.h"

static int parse_value(const char *spec, struct ob_gguf_value *v, char **str)
{
    const char *colon = strchr(spec, ':');
    if (!colon)
        return -1;
    size_t tl = (size_t)(colon - spec);
    const char *s = colon + 1;
    char *end;
    static const struct { const char *name; uint32_t type; } types[] = {
        {"u8", OB_GGUF_U8}, {"u32", OB_GGUF_U32}, {"i32", OB_GGUF_I32}, {"u64", OB_GGUF_U64},
        {"i64", OB_GGUF_I64}, {"f32", OB_GGUF_F32}, {"f64", OB_GGUF_F64},
        {"bool", OB_GGUF_BOOL}, {"str", OB_GGUF_STRING},
    };
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        if (strlen(types[i].name) != tl || strncmp(spec, types[i].name, tl) != 0)
            continue;
        memset(v, 0, sizeof *v);
        v->type = types[i].type;
        switch (v->type) {
        case OB_GGUF_STRING:
            *str = strdup(s);
            v->str.ptr = *str;
            v->str.len = strlen(s);
            return 0;
        case OB_GGUF_F32:
        case OB_GGUF_F64:
            v->f = v->type == OB_GGUF_F32 ? (double)strtof(s, &end) : strtod(s, &end);
            break;
        case OB_GGUF_I32:
        case OB_GGUF_I64:
            v->i = strtoll(s, &end, 0);
            break;
        default:
            v->u = strtoull(s, &end, 0);
        }
        return *s && !*end ? 0 : -1;
    }
    return -1;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: gguf-edit IN OUT [KEY=TYPE:VALUE | -KEY | -@TENSOR | "
                "+@TENSOR=SRC]...\n");
        return 2;
    }
    struct ob_gguf *g;
    struct ob_gguf_writer *w;
    if (ob_gguf_open(argv[1], &g) || ob_gguf_writer_new(&w)) {
        fprintf(stderr, "gguf-edit: %s\n", ob_errmsg());
        return 3;
    }
    int e = 0;
    for (uint64_t i = 0; i < ob_gguf_n_kv(g) && !e; i++) {
        const struct ob_gguf_kv *kv = ob_gguf_kv_at(g, i);
        bool drop = false;
        for (int a = 3; a < argc; a++)
            drop |= argv[a][0] == '-' && strcmp(argv[a] + 1, kv->key) == 0;
        if (!drop)
            e = ob_gguf_writer_set(w, kv->key, &kv->val);
    }
    for (int a = 3; a < argc && !e; a++) {
        if (argv[a][0] == '-' || argv[a][0] == '+')
            continue;
        char *eq = strchr(argv[a], '='), *str = NULL;
        struct ob_gguf_value v;
        if (!eq || parse_value(eq + 1, &v, &str) != 0) {
            fprintf(stderr, "gguf-edit: bad edit '%s'\n", argv[a]);
            return 2;
        }
        *eq = 0;
        e = ob_gguf_writer_set(w, argv[a], &v);
        free(str);
    }
    for (uint64_t i = 0; i < ob_gguf_n_tensors(g) && !e; i++) {
        const struct ob_gguf_tensor *t = ob_gguf_tensor_at(g, i);
        bool drop = false;
        for (int a = 3; a < argc; a++)
            drop |= argv[a][0] == '-' && argv[a][1] == '@' && strcmp(argv[a] + 2, t->name) == 0;
        if (!drop)
            e = ob_gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, t->ne, t->data, NULL,
                                          NULL);
    }
    for (int a = 3; a < argc && !e; a++) {
        char *eq = argv[a][0] == '+' && argv[a][1] == '@' ? strchr(argv[a], '=') : NULL;
        if (argv[a][0] != '+')
            continue;
        const struct ob_gguf_tensor *t = eq ? ob_gguf_tensor(g, eq + 1) : NULL;
        if (!t) {
            fprintf(stderr, "gguf-edit: bad edit '%s'\n", argv[a]);
            return 2;
        }
        *eq = 0;
        e = ob_gguf_writer_add_tensor(w, argv[a] + 2, t->type, t->n_dims, t->ne, t->data, NULL,
                                      NULL);
    }
    if (!e)
        e = ob_gguf_writer_write(w, argv[2]);
    if (e)
        fprintf(stderr, "gguf-edit: %s\n", ob_errmsg());
    ob_gguf_writer_free(w);
    ob_gguf_close(g);
    return e ? 3 : 0;
}
