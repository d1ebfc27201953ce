/*
 * fuzz-archive.c — libFuzzer harness for models inside archives (lib/archive.c): the input is
 * an archive file (tar, zip, 7-Zip or cpio, plain or under gzip, bzip2, xz, lzma, lzip, lz4,
 * zstd or compress: open_formats there), resolved as every command resolves its MODEL
 * argument (ob_model_resolve) into a cache of its own, emptied before each input. Beyond what
 * ASan and UBSan see, it aborts where one of these fails:
 *  - a refusal has a known code and a one-line message, and leaves the cache empty: no blob,
 *    no link, no partial file (.extract.*);
 *  - an input that is a GGUF itself is given back as it is, and nothing is cached;
 *  - an accepted archive gives CACHE/blobs/<sha256>.gguf, whose bytes hash to its name and
 *    which the GGUF reader opens, or CACHE/blobs/<sha256 of its manifest>.q4nx, a directory
 *    the pack reader opens; CACHE/archives holds one link, to it, and the cache nothing else;
 *  - the same file resolved again gives the same path (the link, checked, not a second
 *    extraction);
 *  - nothing is written outside the cache: the scratch directory holds the input and the cache.
 * OB_FUZZ_ARCHIVE_VERBOSE prints what each input gave.
 */
#include <dirent.h>
#include <ftw.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "1b.h"

static char dir[64], input[96], cache[96], blobs[128], links[128];

static void setup(void)
{
    snprintf(dir, sizeof dir, "/tmp/fuzz-archive.XXXXXX");
    if (!mkdtemp(dir))
        abort();
    snprintf(input, sizeof input, "%s/in", dir);
    snprintf(cache, sizeof cache, "%s/cache", dir);
    snprintf(blobs, sizeof blobs, "%s/blobs", cache);
    snprintf(links, sizeof links, "%s/archives", cache);
    if (setenv("OB_CACHE_DIR", cache, 1) != 0)
        abort();
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    return remove(path) != 0;
}

static void rm_tree(const char *path)
{
    struct stat st;
    if (lstat(path, &st) == 0 && nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS) != 0)
        abort();
}

static void cleanup(void)
{
    rm_tree(dir);
}

/* the entries of a directory other than . and .., the first one's name in first (or "") */
static int entries(const char *path, char *first, size_t cap)
{
    DIR *d = opendir(path);
    int n = 0;
    first[0] = 0;
    if (!d)
        return -1;
    for (struct dirent *e; (e = readdir(d));) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        if (!n++)
            snprintf(first, cap, "%s", e->d_name);
    }
    closedir(d);
    return n;
}

/* the cache holds nothing: no blob, no link, no partial file (the directories may be there) */
static void cache_empty(void)
{
    char name[256];
    if (entries(blobs, name, sizeof name) > 0 || entries(links, name, sizeof name) > 0)
        abort();
}

/* the scratch directory holds the input and (once a resolve made it) the cache, and the cache
 * its two directories */
static void nothing_else(void)
{
    DIR *d = opendir(dir);
    if (!d)
        abort();
    for (struct dirent *e; (e = readdir(d));)
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") && strcmp(e->d_name, "in") &&
            strcmp(e->d_name, "cache"))
            abort();
    closedir(d);
    if ((d = opendir(cache))) {
        for (struct dirent *e; (e = readdir(d));)
            if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") && strcmp(e->d_name, "blobs") &&
                strcmp(e->d_name, "archives"))
                abort();
        closedir(d);
    }
}

/* the sha256 of a file, in hex */
static void file_sha256(const char *path, char hex[65])
{
    FILE *f = fopen(path, "rb");
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    unsigned char buf[1 << 14], d[32];
    unsigned int dl;
    if (!f || !md || !EVP_DigestInit_ex(md, EVP_sha256(), NULL))
        abort();
    for (size_t n; (n = fread(buf, 1, sizeof buf, f));)
        EVP_DigestUpdate(md, buf, n);
    fclose(f);
    EVP_DigestFinal_ex(md, d, &dl);
    EVP_MD_CTX_free(md);
    for (int i = 0; i < 32; i++)
        snprintf(hex + 2 * i, 3, "%02x", d[i]);
}

/* an accepted archive: what the cache must hold, and what out must name */
static void accepted(const char *out)
{
    char real[PATH_MAX], blob[256], link[256], target[512], want[512];
    if (!realpath(blobs, real) || strncmp(out, real, strlen(real)) != 0 || out[strlen(real)] != '/')
        abort();
    const char *name = out + strlen(real) + 1;
    size_t nl = strlen(name);
    /* one blob, the one named; one link, to it */
    if (entries(blobs, blob, sizeof blob) != 1 || strcmp(blob, name) != 0 ||
        entries(links, link, sizeof link) != 1)
        abort();
    char lp[512];
    snprintf(lp, sizeof lp, "%s/%s", links, link);
    ssize_t tl = readlink(lp, target, sizeof target - 1);
    if (tl < 0)
        abort();
    target[tl] = 0;
    snprintf(want, sizeof want, "../blobs/%s", name);
    if (strcmp(target, want) != 0)
        abort();
    if (nl == 64 + 5 && !strcmp(name + 64, ".gguf")) {
        char hex[65];
        struct ob_gguf *g;
        file_sha256(out, hex);
        if (strncmp(hex, name, 64) != 0 || ob_gguf_open(out, &g) != 0)
            abort();
        ob_gguf_close(g);
    } else if (nl == 64 + 5 && !strcmp(name + 64, ".q4nx")) {
        struct ob_pack *p;
        if (ob_pack_open(out, &p) != 0)
            abort();
        if (strncmp(ob_pack_sha256(p), name, 64) != 0)
            abort();
        ob_pack_close(p);
    } else {
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!dir[0]) {
        setup();
        atexit(cleanup);
    }
    rm_tree(cache);
    /* a new file each time: a new identity (inode, time), so a new key in the cache */
    unlink(input);
    FILE *f = fopen(input, "wb");
    if (!f || fwrite(data, 1, size, f) != size || fclose(f) != 0)
        abort();
    char *out = NULL;
    int e = ob_model_resolve(input, &out);
    bool verbose = getenv("OB_FUZZ_ARCHIVE_VERBOSE") != NULL;
    if (verbose)
        fprintf(stderr, "%s\n", e ? ob_errmsg() : out);
    if (e) {
        if (e != OB_EFORMAT && e != OB_EUNSUPP && e != OB_ERANGE && e != OB_ENOMEM)
            abort();
        if (out || strchr(ob_errmsg(), '\n') || !ob_errmsg()[0])
            abort();
        cache_empty();
    } else if (!strcmp(out, input)) {
        if (size < 4 || memcmp(data, "GGUF", 4) != 0)
            abort();
        cache_empty();
    } else {
        accepted(out);
        struct stat a, b;
        char *again = NULL;
        if (stat(out, &a) != 0 || ob_model_resolve(input, &again) != 0 ||
            strcmp(again, out) != 0 || stat(again, &b) != 0 || a.st_ino != b.st_ino)
            abort();
        accepted(again);
        free(again);
    }
    nothing_else();
    free(out);
    return 0;
}
