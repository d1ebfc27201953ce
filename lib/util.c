/*
 * util.c — strict option parsing, file hashing, the cache directory, opening input operands
 * (one by one, or every FILE operand of a command in turn), a report's output file, and
 * closing standard output.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "1b.h"

int ob_parse_i64(const char *s, int64_t min, int64_t max, int64_t *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (!*s || *end || errno == ERANGE)
        return ob_seterr(OB_EUSAGE, "'%s' is not an integer", s);
    if (v < min || v > max)
        return ob_seterr(OB_EUSAGE, "%s is out of range [%lld, %lld]", s, (long long)min,
                         (long long)max);
    *out = v;
    return 0;
}

int ob_parse_f64(const char *s, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (!*s || *end || errno == ERANGE)
        return ob_seterr(OB_EUSAGE, "'%s' is not a number", s);
    *out = v;
    return 0;
}

int ob_sha256_file(const char *path, char out[65])
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return ob_seterr(OB_EIO, "%s: %s", path, strerror(errno));
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    int e = 0;
    if (!ctx || !EVP_DigestInit_ex(ctx, EVP_sha256(), NULL)) {
        e = ob_seterr(OB_ENOMEM, "sha256: cannot initialise");
        goto out;
    }
    static _Thread_local unsigned char buf[1 << 20];
    for (;;) {
        ssize_t n = read(fd, buf, sizeof buf);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            e = ob_seterr(OB_EIO, "%s: read: %s", path, strerror(errno));
            goto out;
        }
        if (n == 0)
            break;
        EVP_DigestUpdate(ctx, buf, (size_t)n);
    }
    unsigned char md[32];
    unsigned int mdlen = 0;
    EVP_DigestFinal_ex(ctx, md, &mdlen);
    for (int i = 0; i < 32; i++)
        snprintf(out + 2 * i, 3, "%02x", md[i]);
out:
    EVP_MD_CTX_free(ctx);
    close(fd);
    return e;
}

int ob_cache_dir(char **out)
{
    const char *d = getenv("OB_CACHE_DIR");
    char *s = NULL;
    if (d && *d) {
        s = strdup(d);
    } else if ((d = getenv("XDG_CACHE_HOME")) && *d == '/') {
        if (asprintf(&s, "%s/1b", d) < 0)
            s = NULL;
    } else if ((d = getenv("HOME")) && *d) {
        if (asprintf(&s, "%s/.cache/1b", d) < 0)
            s = NULL;
    } else {
        return ob_seterr(OB_EUSAGE, "no cache directory: set OB_CACHE_DIR or HOME");
    }
    if (!s)
        return ob_seterr(OB_ENOMEM, "out of memory");
    *out = s;
    return 0;
}

char *ob_utf8_sanitize(const char *s, size_t len)
{
    char *o = malloc(len * 3 + 1), *q = o;
    if (!o)
        return NULL;
    const unsigned char *p = (const unsigned char *)s, *end = p + len;
    while (p < end) {
        unsigned c = *p;
        int n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
        bool ok = n > 0 && end - p >= n;
        if (ok && n > 1) {
            uint32_t cp = c & (0x7f >> n);
            for (int k = 1; k < n; k++) {
                if ((p[k] & 0xc0) != 0x80) { ok = false; break; }
                cp = cp << 6 | (p[k] & 0x3f);
            }
            if (ok && ((n == 2 && cp < 0x80) || (n == 3 && cp < 0x800) ||
                       (n == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
                       (cp >= 0xd800 && cp <= 0xdfff)))
                ok = false;
        }
        if (ok && n == 1 && c == 0)
            ok = false;                  /* cJSON strings are NUL-terminated */
        if (!ok) {
            memcpy(q, "\xef\xbf\xbd", 3);
            q += 3;
            p++;
            continue;
        }
        memcpy(q, p, n);
        q += n;
        p += n;
    }
    *q = 0;
    return o;
}

int ob_open_code(int en)
{
    switch (en) {
    case ENOENT:
    case ENOTDIR:
    case ELOOP:
    case ENAMETOOLONG: return OB_ENOTFOUND;
    case EACCES:
    case EISDIR:
    case ENXIO:
    case ENODEV: return OB_EFORMAT;
    }
    return OB_EIO;
}

int ob_open_input(const char *path, FILE **out)
{
    struct stat st;
    if (strcmp(path, "-") == 0) {
        if (fstat(0, &st) == 0 && S_ISDIR(st.st_mode))
            return ob_seterr(OB_EFORMAT, "-: standard input is a directory");
        *out = stdin;
        return 0;
    }
    FILE *f = fopen(path, "r");
    if (!f) {
        int en = errno;
        return ob_seterr(ob_open_code(en), "%s: %s", path, strerror(en));
    }
    if (fstat(fileno(f), &st) == 0 && S_ISDIR(st.st_mode)) {
        fclose(f);
        return ob_seterr(OB_EFORMAT, "%s: is a directory", path);
    }
    *out = f;
    return 0;
}

int ob_open_output(const char *path, FILE **out)
{
    if (strcmp(path, "-") == 0) {
        *out = stdout;
        return 0;
    }
    FILE *f = fopen(path, "w");
    if (!f)
        return ob_seterr(OB_EIO, "%s: %s", path, strerror(errno));
    *out = f;
    return 0;
}

int ob_output_record(FILE *f, const char *path, const cJSON *rec)
{
    bool out = f == stdout;
    int e = ob_jsonl_write(f, rec);
    if (!out && fclose(f) != 0 && !e)
        e = ob_seterr(OB_EIO, "close: %s", strerror(errno));
    return e ? ob_errprefix(e, "%s", out ? "stdout" : path) : 0;
}

int ob_each_input(char *const *names, int n, bool keep_going, ob_input_fn fn, void *user,
                  int *unopened)
{
    static char *const dash[] = {"-"};
    if (n == 0) {
        names = dash;
        n = 1;
    }
    *unopened = OB_EXIT_OK;
    for (int i = 0; i < n; i++) {
        FILE *f;
        int e = ob_open_input(names[i], &f);
        if (e) {
            if (ob_exit_status(e) > *unopened)
                *unopened = ob_exit_status(e);
            int r = fn(user, names[i], NULL);
            if (r < 0)
                return r;
            if (r > 0 || !keep_going)
                return 0;
            continue;
        }
        int r = fn(user, names[i], f);
        if (f != stdin)
            fclose(f);
        if (r < 0)
            return r;
        if (r > 0)
            return 0;
    }
    return 0;
}

int ob_stdout_close(void)
{
    errno = 0;
    bool bad = fflush(stdout) != 0 || ferror(stdout);
    int en = errno;
    if (fclose(stdout) != 0 && !bad) {
        bad = true;
        en = errno;
    }
    return bad ? ob_seterr(OB_EIO, "stdout: %s", en ? strerror(en) : "write error") : 0;
}
