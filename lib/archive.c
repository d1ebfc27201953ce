/*
 * archive.c — models inside archives (tar, tar.gz, tar.zst, zip, ... anything libarchive reads).
 *
 * A GGUF must be mmapped, so an archived one is extracted once into a content-addressed cache:
 *
 *   CACHE/blobs/<sha256 of the GGUF>.gguf      the extracted file
 *   CACHE/archives/<key>                      symlink -> ../blobs/<sha256>.gguf
 *
 * where CACHE is ob_cache_dir() and key is the sha256 of the archive's identity (device, inode,
 * size, modification time in ns): a second run stats the archive, finds the link and maps the
 * blob without reading the archive again. Extraction writes to a temporary file inside the
 * cache and renames it into place only after the whole member was read and the rest of the
 * archive was checked, so a corrupt or truncated archive leaves nothing behind.
 *
 * An archive must hold exactly one regular file whose name ends in ".gguf".
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <archive.h>
#include <archive_entry.h>
#include <openssl/evp.h>

#include "1b.h"

static void hex(const unsigned char *md, int n, char *out)
{
    for (int i = 0; i < n; i++)
        snprintf(out + 2 * i, 3, "%02x", md[i]);
}

static int mkdirs(const char *dir)
{
    char *p = strdup(dir);
    if (!p)
        return ob_seterr(OB_ENOMEM, "out of memory");
    for (char *s = p + 1; *s; s++) {
        if (*s != '/')
            continue;
        *s = 0;
        if (mkdir(p, 0755) != 0 && errno != EEXIST) {
            int e = ob_seterr(OB_EIO, "%s: %s", p, strerror(errno));
            free(p);
            return e;
        }
        *s = '/';
    }
    int e = 0;
    if (mkdir(p, 0755) != 0 && errno != EEXIST)
        e = ob_seterr(OB_EIO, "%s: %s", p, strerror(errno));
    free(p);
    return e;
}

static bool has_suffix(const char *s, const char *suf)
{
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && strcmp(s + a - b, suf) == 0;
}

/* Stream the current member into fd while hashing it. */
static int extract_member(struct archive *ar, int fd, EVP_MD_CTX *md, const char *apath,
                          const char *member, const char *tmp)
{
    static _Thread_local char buf[1 << 16];
    for (;;) {
        la_ssize_t n = archive_read_data(ar, buf, sizeof buf);
        if (n < 0)
            return ob_seterr(OB_EFORMAT, "%s: %s: %s", apath, member, archive_error_string(ar));
        if (n == 0)
            return 0;
        EVP_DigestUpdate(md, buf, (size_t)n);
        for (la_ssize_t off = 0; off < n;) {
            ssize_t w = write(fd, buf + off, (size_t)(n - off));
            if (w < 0 && errno == EINTR)
                continue;
            if (w < 0)
                return ob_seterr(OB_EIO, "%s: write: %s", tmp, strerror(errno));
            off += w;
        }
    }
}

int ob_model_resolve(const char *path, char **out)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return ob_seterr(errno == ENOENT ? OB_ENOTFOUND : OB_EIO, "%s: %s", path, strerror(errno));
    struct stat st;
    char magic[4] = {0};
    ssize_t got = 0;
    if (fstat(fd, &st) != 0 || (S_ISREG(st.st_mode) && (got = read(fd, magic, 4)) < 0)) {
        int e = ob_seterr(OB_EIO, "%s: %s", path, strerror(errno));
        close(fd);
        return e;
    }
    close(fd);
    if (!S_ISREG(st.st_mode))
        return ob_seterr(OB_EFORMAT, "%s: not a regular file", path);
    if (got == 4 && memcmp(magic, "GGUF", 4) == 0) {
        *out = strdup(path);
        return *out ? 0 : ob_seterr(OB_ENOMEM, "out of memory");
    }

    char *cache = NULL, *blobs = NULL, *links = NULL, *link = NULL, *tmp = NULL, *blob = NULL;
    struct archive *ar = NULL;
    EVP_MD_CTX *md = NULL;
    int tfd = -1, e;
    if ((e = ob_cache_dir(&cache)))
        return e;
    char key[65], idbuf[128];
    unsigned char d[32];
    unsigned int dl;
    snprintf(idbuf, sizeof idbuf, "%llu:%llu:%llu:%lld.%09ld", (unsigned long long)st.st_dev,
             (unsigned long long)st.st_ino, (unsigned long long)st.st_size,
             (long long)st.st_mtim.tv_sec, st.st_mtim.tv_nsec);
    EVP_Digest(idbuf, strlen(idbuf), d, &dl, EVP_sha256(), NULL);
    hex(d, 32, key);
    if (asprintf(&blobs, "%s/blobs", cache) < 0 || asprintf(&links, "%s/archives", cache) < 0 ||
        asprintf(&link, "%s/%s", links, key) < 0) {
        e = ob_seterr(OB_ENOMEM, "out of memory");
        goto out;
    }
    /* cached: the link resolves to an existing blob */
    char *real = realpath(link, NULL);
    if (real) {
        *out = real;
        e = 0;
        goto out;
    }
    if ((e = mkdirs(blobs)) || (e = mkdirs(links)))
        goto out;

    ar = archive_read_new();
    md = EVP_MD_CTX_new();
    if (!ar || !md || !EVP_DigestInit_ex(md, EVP_sha256(), NULL)) {
        e = ob_seterr(OB_ENOMEM, "out of memory");
        goto out;
    }
    archive_read_support_filter_all(ar);
    /* real archive formats only: "all" would include mtree, which reads any text file */
    archive_read_support_format_tar(ar);
    archive_read_support_format_gnutar(ar);
    archive_read_support_format_zip(ar);
    archive_read_support_format_7zip(ar);
    archive_read_support_format_cpio(ar);
    if (archive_read_open_filename(ar, path, 1 << 16) != ARCHIVE_OK) {
        e = ob_seterr(OB_EFORMAT, "%s: not a GGUF file nor a readable archive: %s", path,
                      archive_error_string(ar));
        goto out;
    }
    if (asprintf(&tmp, "%s/.extract.XXXXXX", blobs) < 0) {
        tmp = NULL;
        e = ob_seterr(OB_ENOMEM, "out of memory");
        goto out;
    }
    char *found = NULL;
    int n_entries = 0;
    for (;;) {
        struct archive_entry *ent;
        int r = archive_read_next_header(ar, &ent);
        if (r == ARCHIVE_EOF)
            break;
        if (r < ARCHIVE_WARN) {
            e = ob_seterr(OB_EFORMAT, "%s: %s", path, archive_error_string(ar));
            goto out_found;
        }
        n_entries++;
        const char *name = archive_entry_pathname(ent);
        if (!name || archive_entry_filetype(ent) != AE_IFREG || !has_suffix(name, ".gguf")) {
            if (archive_read_data_skip(ar) < ARCHIVE_WARN) {
                e = ob_seterr(OB_EFORMAT, "%s: %s", path, archive_error_string(ar));
                goto out_found;
            }
            continue;
        }
        if (found) {
            e = ob_seterr(OB_EFORMAT, "%s: holds more than one .gguf file ('%s' and '%s')", path,
                          found, name);
            goto out_found;
        }
        if (!(found = strdup(name))) {
            e = ob_seterr(OB_ENOMEM, "out of memory");
            goto out_found;
        }
        if ((tfd = mkstemp(tmp)) < 0) {
            e = ob_seterr(OB_EIO, "%s: %s", tmp, strerror(errno));
            goto out_found;
        }
        fchmod(tfd, 0644);
        if ((e = extract_member(ar, tfd, md, path, name, tmp)))
            goto out_found;
    }
    if (!found) {
        e = ob_seterr(OB_EFORMAT, "%s: the archive (%d entries) holds no .gguf file", path,
                      n_entries);
        goto out_found;
    }
    if (fsync(tfd) != 0 || close(tfd) != 0) {
        tfd = -1;
        e = ob_seterr(OB_EIO, "%s: %s", tmp, strerror(errno));
        goto out_found;
    }
    tfd = -1;
    unsigned char sum[32];
    char sumhex[65];
    EVP_DigestFinal_ex(md, sum, &dl);
    hex(sum, 32, sumhex);
    if (asprintf(&blob, "%s/%s.gguf", blobs, sumhex) < 0) {
        blob = NULL;
        e = ob_seterr(OB_ENOMEM, "out of memory");
        goto out_found;
    }
    if (rename(tmp, blob) != 0) {
        e = ob_seterr(OB_EIO, "%s: %s", blob, strerror(errno));
        goto out_found;
    }
    free(tmp);
    tmp = NULL;
    /* publish the index link atomically: a symlink under a temporary name, then rename */
    char target[128], *ltmp = NULL;
    snprintf(target, sizeof target, "../blobs/%s.gguf", sumhex);
    if (asprintf(&ltmp, "%s.%d", link, (int)getpid()) >= 0) {
        unlink(ltmp);
        if (symlink(target, ltmp) != 0 || rename(ltmp, link) != 0)
            unlink(ltmp);                 /* no index: the next run extracts again, no harm */
        free(ltmp);
    }
    *out = realpath(blob, NULL);
    e = *out ? 0 : ob_seterr(OB_EIO, "%s: %s", blob, strerror(errno));
out_found:
    free(found);
out:
    if (tfd >= 0)
        close(tfd);
    if (tmp && tmp[strlen(tmp) - 1] != 'X')
        unlink(tmp);
    if (ar)
        archive_read_free(ar);
    EVP_MD_CTX_free(md);
    free(cache);
    free(blobs);
    free(links);
    free(link);
    free(tmp);
    free(blob);
    return e;
}
