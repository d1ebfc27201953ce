/*
 * quant-raw — lib/quant.c on raw files, for tests/t1300-quant.sh to compare with gguf-py:
 *
 *   quant-raw dequant TYPE IN OUT    IN: whole blocks of TYPE; OUT: float32 values
 *   quant-raw quant TYPE IN OUT      IN: float32 values (a multiple of the block); OUT: blocks
 *
 * Files are raw little-endian bytes with no header. Exit 0, 2 (usage), 3 (library error, with
 * its message on stderr).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "1b.h"
#include "quant.h"

static void *slurp(const char *path, size_t *size)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    size_t cap = 1 << 20, n = 0, got;
    char *buf = malloc(cap);
    while (buf && (got = fread(buf + n, 1, cap - n, f)) > 0) {
        n += got;
        if (n == cap)
            buf = realloc(buf, cap *= 2);
    }
    if (ferror(f)) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    *size = n;
    return buf;
}

static int spit(const char *path, const void *p, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(p, 1, n, f) != n) {
        if (f)
            fclose(f);
        return -1;
    }
    return fclose(f);
}

int main(int argc, char **argv)
{
    if (argc != 5 || (strcmp(argv[1], "dequant") && strcmp(argv[1], "quant"))) {
        fprintf(stderr, "usage: quant-raw dequant|quant TYPE IN OUT\n");
        return 2;
    }
    int t = ob_type_from_name(argv[2]);
    if (t < 0) {
        fprintf(stderr, "quant-raw: unknown type %s\n", argv[2]);
        return 2;
    }
    size_t size;
    void *in = slurp(argv[3], &size);
    if (!in) {
        perror(argv[3]);
        return 3;
    }
    uint32_t bl = ob_type_blck((uint32_t)t), ts = ob_type_size((uint32_t)t);
    int dq = !strcmp(argv[1], "dequant");
    size_t unit = dq ? ts : sizeof(float) * bl;
    if (size % unit) {
        fprintf(stderr, "quant-raw: %s: %zu bytes is not a whole number of %s blocks\n",
                argv[3], size, argv[2]);
        free(in);
        return 3;
    }
    int64_t n = (int64_t)(size / unit) * bl;
    size_t outsize = dq ? (size_t)n * sizeof(float) : (size_t)(n / bl) * ts;
    void *out = malloc(outsize ? outsize : 1);
    int rc = dq ? ob_dequant_row((uint32_t)t, in, out, n) : ob_quant_row((uint32_t)t, in, out, n);
    int status = 0;
    if (rc) {
        fprintf(stderr, "quant-raw: %s: %s\n", argv[3], ob_errmsg());
        status = 3;
    } else if (spit(argv[4], out, outsize)) {
        perror(argv[4]);
        status = 3;
    }
    free(in);
    free(out);
    return status;
}
