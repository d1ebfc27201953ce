/*
 * replay-main.c — runs a libFuzzer harness (LLVMFuzzerTestOneInput) over every file named on
 * the command line, or every file inside a named directory, without libFuzzer: the corpus
 * replay that `make check` does with the normal compiler. Prints TAP, one line per input.
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int n;

static void run_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        printf("not ok %d - %s: cannot open\n", ++n, path);
        return;
    }
    uint8_t *buf = NULL;
    size_t len = 0, cap = 0;
    for (;;) {
        if (len == cap) {
            cap = cap ? 2 * cap : 4096;
            buf = realloc(buf, cap);
            if (!buf)
                abort();
        }
        size_t k = fread(buf + len, 1, cap - len, f);
        if (!k)
            break;
        len += k;
    }
    fclose(f);
    LLVMFuzzerTestOneInput(buf, len);     /* a crash or sanitizer abort fails the test run */
    free(buf);
    printf("ok %d - %s\n", ++n, path);
}

static int cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st) != 0) {
            printf("not ok %d - %s: missing\n", ++n, argv[i]);
            continue;
        }
        if (!S_ISDIR(st.st_mode)) {
            run_file(argv[i]);
            continue;
        }
        DIR *d = opendir(argv[i]);
        if (!d) {
            printf("not ok %d - %s: cannot list\n", ++n, argv[i]);
            continue;
        }
        char **names = NULL;
        size_t nn = 0;
        struct dirent *e;
        while ((e = readdir(d))) {
            if (e->d_name[0] == '.')
                continue;
            names = realloc(names, (nn + 1) * sizeof *names);
            if (!names || asprintf(&names[nn], "%s/%s", argv[i], e->d_name) < 0)
                abort();
            nn++;
        }
        closedir(d);
        qsort(names, nn, sizeof *names, cmp);
        for (size_t k = 0; k < nn; k++) {
            run_file(names[k]);
            free(names[k]);
        }
        free(names);
    }
    printf("1..%d\n", n);
    return 0;
}
