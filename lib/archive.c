/*
 * archive.c — models inside archives: tar, zip, 7-Zip or cpio, plain or compressed (gzip, xz,
 * zstd, ...; see open_formats).
 *
 * A GGUF must be mmapped, so an archived one is extracted once into a content-addressed cache:
 *
 *   CACHE/blobs/<sha256 of the GGUF>.gguf      the extracted file
 *   CACHE/archives/<key>                      symlink -> ../blobs/<sha256>.gguf
 *
 * where CACHE is ob_cache_dir() and key is the sha256 of the archive's identity (device, inode,
 * size, modification time in ns): a second run stats the archive, finds the link and maps the
 * blob without reading the archive again.
 *
 * Extraction writes to a temporary file CACHE/blobs/.extract.XXXXXX and renames it into place
 * only after the whole member was read, parsed as a GGUF (header, tensor table, every tensor
 * inside the file) and the rest of the archive was checked, so a corrupt or truncated archive,
 * or one whose member is not a whole GGUF, leaves nothing behind. What extraction may write is
 * bounded by the member's own GGUF header, read from the first bytes of the stream: the file
 * ends where the last tensor's data ends (plus the padding to general.alignment that writers
 * may add); a member longer than that, or one that ends short of it, is refused, and so is one
 * whose header does not end within GGUF_HEADER_MAX bytes. Once the size is known the cache's
 * free space is checked before the rest is written.
 *
 * A cached blob is checked against its header before it is used (one header parse), so a
 * cache written by an older 1b, which kept truncated members, heals itself.
 *
 * A process killed while extracting leaves its temporary file: the next resolve of an archive
 * removes every such file that no live process holds (see clean_stale). Two processes that
 * resolve the same archive at once extract it once: the second waits for the first.
 *
 * An archive must hold exactly one regular file whose name ends in ".gguf", or one Q4NX pack
 * (lib/npu/pack.c): a manifest.json and the files beside it, at the top or in one directory
 * (a .gguf there, its meta.gguf, is one of the pack's files). Two models are refused: two
 * GGUFs, two directories with a manifest.json, or a pack and a .gguf outside its directory,
 * whatever the order of the members. A pack is extracted into a temporary directory
 * CACHE/blobs/.extract.XXXXXX (locked like the temporary files), checked whole — opened, and
 * every file's sha256 compared with the manifest's — and renamed to CACHE/blobs/<sha256 of its
 * manifest>.q4nx, a directory the archive's link then names. The first pass reads the whole
 * archive, extracting the first GGUF as it streams by; a manifest.json met on the way turns it
 * into a pack, extracted by a second pass.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <archive.h>
#include <archive_entry.h>
#include <openssl/evp.h>

#include "model.h"

#define TMP_PREFIX ".extract."
/* A GGUF header (metadata and tensor table) must end within this many bytes of the member's
 * start: real ones take a few MB (Gemma 3's 262144-token vocabulary: 6.5 MB). It bounds what
 * is written before the header tells the file's size. */
#define GGUF_HEADER_MAX (64ull << 20)

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

/* remove the regular files in directory name (under dirfd at), then the directory; a pack
 * directory has nothing else */
static void remove_files(int at, const char *name)
{
    int fd = openat(at, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (d) {
        struct dirent *de;
        while ((de = readdir(d)))
            if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0)
                unlinkat(dirfd(d), de->d_name, 0);
        closedir(d);
    } else if (fd >= 0) {
        close(fd);
    }
    unlinkat(at, name, AT_REMOVEDIR);
}

/*
 * Partial extractions that no live process is writing are removed: an extraction holds an
 * exclusive flock(2) on its temporary file for as long as it runs, and the kernel drops the
 * lock when the process ends, however it ends (SIGKILL included). A .extract.* file whose lock
 * can be taken is an orphan. The path is checked to still name the locked file before it is
 * unlinked, so a file another process has just created and locked is never touched.
 */
static void clean_stale(const char *blobs)
{
    DIR *d = opendir(blobs);
    if (!d)
        return;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (strncmp(de->d_name, TMP_PREFIX, strlen(TMP_PREFIX)) != 0)
            continue;
        int fd = openat(dirfd(d), de->d_name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
        if (fd < 0)
            continue;
        struct stat a, b;
        if (flock(fd, LOCK_EX | LOCK_NB) == 0 && fstat(fd, &a) == 0 &&
            fstatat(dirfd(d), de->d_name, &b, AT_SYMLINK_NOFOLLOW) == 0 &&
            a.st_dev == b.st_dev && a.st_ino == b.st_ino) {
            if (S_ISREG(a.st_mode))
                unlinkat(dirfd(d), de->d_name, 0);
            else if (S_ISDIR(a.st_mode))      /* a pack's partial extraction */
                remove_files(dirfd(d), de->d_name);
        }
        close(fd);
    }
    closedir(d);
}

/*
 * The blob the link names, if it is still a whole GGUF: its size within what its header
 * implies. A blob that is not (written by an older 1b that kept truncated members, or damaged
 * since) is removed with its link, and the archive is extracted again. Costs one header parse.
 */
static char *cached(const char *link)
{
    char *real = realpath(link, NULL);
    if (!real)
        return NULL;
    bool good = false;
    struct stat st;
    if (stat(real, &st) == 0 && S_ISDIR(st.st_mode)) {       /* a pack: it opens */
        struct ob_pack *p;
        if (ob_pack_open(real, &p) == 0) {
            ob_pack_close(p);
            return real;
        }
        unlink(link);
        remove_files(AT_FDCWD, real);
        free(real);
        return NULL;
    }
    int fd = open(real, O_RDONLY | O_CLOEXEC);
    if (fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0) {
        size_t n = (uint64_t)st.st_size < GGUF_HEADER_MAX ? (size_t)st.st_size : GGUF_HEADER_MAX;
        void *p = mmap(NULL, n, PROT_READ, MAP_SHARED, fd, 0);
        uint64_t lo, hi;
        bool more;
        if (p != MAP_FAILED) {
            good = ob_gguf_scan(p, n, &lo, &hi, &more) == 0 && (uint64_t)st.st_size >= lo &&
                   (uint64_t)st.st_size <= hi;
            munmap(p, n);
        }
    }
    if (fd >= 0)
        close(fd);
    if (good)
        return real;
    unlink(link);
    unlink(real);
    free(real);
    return NULL;
}

/* Create and lock a temporary file in blobs/ (see clean_stale): *tmp is malloc'd. */
static int make_tmp(const char *blobs, char **tmp, int *fd)
{
    for (int tries = 0; tries < 100; tries++) {
        if (asprintf(tmp, "%s/" TMP_PREFIX "XXXXXX", blobs) < 0) {
            *tmp = NULL;
            return ob_seterr(OB_ENOMEM, "out of memory");
        }
        int f = mkstemp(*tmp);
        if (f < 0) {
            int e = ob_seterr(OB_EIO, "%s: %s", *tmp, strerror(errno));
            free(*tmp);
            *tmp = NULL;
            return e;
        }
        /* a cleaner may have locked and removed the file between mkstemp and flock: then
         * the name is gone (or names another file) and we start again. Where flock is not
         * supported no cleaner can take the lock either. */
        struct stat a, b;
        int r;
        while ((r = flock(f, LOCK_EX)) != 0 && errno == EINTR)
            ;
        if (r != 0 || (fstat(f, &a) == 0 && lstat(*tmp, &b) == 0 && a.st_dev == b.st_dev &&
                       a.st_ino == b.st_ino)) {
            fchmod(f, 0644);
            *fd = f;
            return 0;
        }
        close(f);
        free(*tmp);
        *tmp = NULL;
    }
    return ob_seterr(OB_EIO, "%s: cannot create a temporary file", blobs);
}

/* One member being extracted: what was written, and the bounds its GGUF header sets. */
struct extract {
    const char *apath, *member, *tmp, *blobs;
    struct archive_entry *ent;
    int fd;
    EVP_MD_CTX *md;
    uint64_t written;
    bool sized;                    /* the header was read: min and max hold */
    uint64_t min, max;             /* the file size the header implies */
    uint64_t next_scan;            /* try to read the header again at this many bytes */
};

/* Read the header from what was written so far. 0: sized, or more bytes are needed. */
static int scan(struct extract *x, bool at_end)
{
    void *p = mmap(NULL, (size_t)x->written, PROT_READ, MAP_SHARED, x->fd, 0);
    if (p == MAP_FAILED)
        return ob_seterr(OB_EIO, "%s: mmap: %s", x->tmp, strerror(errno));
    bool more;
    int e = ob_gguf_scan(p, (size_t)x->written, &x->min, &x->max, &more);
    munmap(p, (size_t)x->written);
    x->next_scan = 2 * x->written;
    if (e && more && !at_end)
        return 0;
    if (e)
        return ob_errprefix(e, "%s: %s", x->apath, x->member);
    x->sized = true;
    if (archive_entry_size_is_set(x->ent) &&
        ((uint64_t)archive_entry_size(x->ent) < x->min ||
         (uint64_t)archive_entry_size(x->ent) > x->max))
        return ob_seterr(OB_EFORMAT, "%s: %s: the archive gives it %llu bytes but its GGUF header "
                         "describes %llu", x->apath, x->member,
                         (unsigned long long)archive_entry_size(x->ent),
                         (unsigned long long)x->min);
    /* the cache must have room for the rest before it is written */
    struct statvfs sv;
    if (x->min > x->written && fstatvfs(x->fd, &sv) == 0 &&
        (uint64_t)sv.f_bavail * sv.f_frsize < x->min - x->written)
        return ob_seterr(OB_EIO, "%s: %s: extracting it needs %llu more bytes in %s, where "
                         "only %llu are free", x->apath, x->member,
                         (unsigned long long)(x->min - x->written), x->blobs,
                         (unsigned long long)sv.f_bavail * sv.f_frsize);
    return 0;
}

/* Stream the current member into x->fd while hashing it, never past the size its GGUF header
 * implies (nor past GGUF_HEADER_MAX before the header was read); then check that it is whole. */
static int extract_member(struct archive *ar, struct extract *x)
{
    static _Thread_local char buf[1 << 16];
    int e;
    x->next_scan = 1;
    for (;;) {
        la_ssize_t n = archive_read_data(ar, buf, sizeof buf);
        if (n < 0)
            return ob_seterr(OB_EFORMAT, "%s: %s: %s", x->apath, x->member,
                             archive_error_string(ar));
        if (n == 0)
            break;
        uint64_t limit = x->sized ? x->max : GGUF_HEADER_MAX;
        if ((uint64_t)n > limit - x->written) {
            if (x->sized)
                return ob_seterr(OB_EFORMAT, "%s: %s: holds more than the %llu bytes its GGUF "
                                 "header describes", x->apath, x->member,
                                 (unsigned long long)x->max);
            return ob_seterr(OB_EFORMAT, "%s: %s: no complete GGUF header in its first %llu "
                             "bytes", x->apath, x->member, (unsigned long long)limit);
        }
        EVP_DigestUpdate(x->md, buf, (size_t)n);
        for (la_ssize_t off = 0; off < n;) {
            ssize_t w = write(x->fd, buf + off, (size_t)(n - off));
            if (w < 0 && errno == EINTR)
                continue;
            if (w < 0)
                return ob_seterr(OB_EIO, "%s: write: %s", x->tmp, strerror(errno));
            off += w;
        }
        x->written += (uint64_t)n;
        if (!x->sized && x->written >= x->next_scan && (e = scan(x, false)))
            return e;
    }
    if (!x->sized && (x->written == 0 ? (e = ob_seterr(OB_EFORMAT, "%s: %s: empty file",
                                                      x->apath, x->member))
                                      : (e = scan(x, true))))
        return e;
    if (x->written < x->min)
        return ob_seterr(OB_EFORMAT, "%s: %s: ends after %llu bytes, short of the %llu its GGUF "
                         "header describes (truncated)", x->apath, x->member,
                         (unsigned long long)x->written, (unsigned long long)x->min);
    /* the whole file, as ob_gguf_open will see it */
    void *p = mmap(NULL, (size_t)x->written, PROT_READ, MAP_SHARED, x->fd, 0);
    if (p == MAP_FAILED)
        return ob_seterr(OB_EIO, "%s: mmap: %s", x->tmp, strerror(errno));
    struct ob_gguf *g;
    e = ob_gguf_open_mem(p, (size_t)x->written, &g);
    if (!e)
        ob_gguf_close(g);
    munmap(p, (size_t)x->written);
    return e ? ob_errprefix(e, "%s: %s", x->apath, x->member) : 0;
}

static void open_formats(struct archive *ar)
{
    /* the compressions libarchive decodes itself: "all" would also run an external program
     * (lrzip, lzop, grzip) that the file's first bytes choose */
    archive_read_support_filter_gzip(ar);
    archive_read_support_filter_bzip2(ar);
    archive_read_support_filter_compress(ar);
    archive_read_support_filter_xz(ar);
    archive_read_support_filter_lzma(ar);
    archive_read_support_filter_lzip(ar);
    archive_read_support_filter_lz4(ar);
    archive_read_support_filter_zstd(ar);
    /* real archive formats only: "all" would include mtree, which reads any text file */
    archive_read_support_format_tar(ar);
    archive_read_support_format_gnutar(ar);
    archive_read_support_format_zip(ar);
    archive_read_support_format_7zip(ar);
    archive_read_support_format_cpio(ar);
}

/* Publish the index link atomically: a symlink under a temporary name, then rename. Without
 * it the next run extracts again, which does no harm. */
static void publish_link(const char *link, const char *target)
{
    char *ltmp = NULL;
    if (asprintf(&ltmp, "%s.%d", link, (int)getpid()) >= 0) {
        unlink(ltmp);
        if (symlink(target, ltmp) != 0 || rename(ltmp, link) != 0)
            unlink(ltmp);
        free(ltmp);
    }
}

/* Create and lock a temporary directory in blobs/ (see clean_stale): *tmp is malloc'd. */
static int make_tmpdir(const char *blobs, char **tmp, int *dfd)
{
    for (int tries = 0; tries < 100; tries++) {
        if (asprintf(tmp, "%s/" TMP_PREFIX "XXXXXX", blobs) < 0) {
            *tmp = NULL;
            return ob_seterr(OB_ENOMEM, "out of memory");
        }
        int f = -1, r = -1;
        if (!mkdtemp(*tmp) || (f = open(*tmp, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0) {
            int e = ob_seterr(OB_EIO, "%s: %s", *tmp, strerror(errno));
            free(*tmp);
            *tmp = NULL;
            return e;
        }
        while ((r = flock(f, LOCK_EX)) != 0 && errno == EINTR)
            ;
        struct stat a, b;
        if (r != 0 || (fstat(f, &a) == 0 && lstat(*tmp, &b) == 0 && a.st_dev == b.st_dev &&
                       a.st_ino == b.st_ino)) {
            fchmod(f, 0755);
            *dfd = f;
            return 0;
        }
        close(f);                  /* a cleaner took it in between: again */
        free(*tmp);
        *tmp = NULL;
    }
    return ob_seterr(OB_EIO, "%s: cannot create a temporary directory", blobs);
}

/* is the member name directly in directory prefix ("" or "dir/") */
static bool in_dir(const char *name, const char *prefix)
{
    size_t pl = strlen(prefix);
    return strncmp(name, prefix, pl) == 0 && !strchr(name + pl, '/');
}

/* where in an archive a directory prefix ("" or "dir/") is, for messages */
static const char *place(const char *prefix, size_t n, char *buf, size_t cap)
{
    if (!n)
        return "its top";
    snprintf(buf, cap, "'%.*s'", (int)n, prefix);
    return buf;
}

/* The message of a failure to open the pack extracted into directory tmp, with each "tmp/"
 * (the files as they were there, gone once it is removed) written as the archive names them:
 * "manifest.json: meta.gguf: No such file or directory", not the temporary paths. */
static void member_names(int e, const char *tmp, const char *prefix)
{
    char msg[1024], out[2048], from[PATH_MAX + 2];
    snprintf(msg, sizeof msg, "%s", ob_errmsg());
    snprintf(from, sizeof from, "%s/", tmp);
    size_t fl = strlen(from), o = 0;
    for (const char *m = msg; *m && o + 1 < sizeof out;) {
        if (strncmp(m, from, fl) == 0) {
            int k = snprintf(out + o, sizeof out - o, "%s", prefix);
            o = k < 0 || (size_t)k >= sizeof out - o ? sizeof out - 1 : o + (size_t)k;
            m += fl;
        } else {
            out[o++] = *m++;
        }
    }
    out[o] = 0;
    ob_seterr(e, "%s", out);
}

/* One member of a pack into dfd/name, never past the size the archive gives it. */
static int extract_pack_file(struct archive *ar, struct archive_entry *ent, int dfd,
                             const char *name, const char *apath, const char *tmp)
{
    static _Thread_local char buf[1 << 16];
    struct statvfs sv;
    if (!archive_entry_size_is_set(ent))
        return ob_seterr(OB_EFORMAT, "%s: %s: the archive gives no size", apath, name);
    uint64_t size = (uint64_t)archive_entry_size(ent), done = 0;
    if (fstatvfs(dfd, &sv) == 0 && (uint64_t)sv.f_bavail * sv.f_frsize < size)
        return ob_seterr(OB_EIO, "%s: %s: extracting it needs %llu bytes in %s, where only %llu "
                         "are free", apath, name, (unsigned long long)size, tmp,
                         (unsigned long long)sv.f_bavail * sv.f_frsize);
    int fd = openat(dfd, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0)
        return ob_seterr(errno == EEXIST ? OB_EFORMAT : OB_EIO, "%s: %s: %s", apath, name,
                         errno == EEXIST ? "the pack names it twice" : strerror(errno));
    int e = 0;
    for (;;) {
        la_ssize_t n = archive_read_data(ar, buf, sizeof buf);
        if (n < 0) {
            e = ob_seterr(OB_EFORMAT, "%s: %s: %s", apath, name, archive_error_string(ar));
            break;
        }
        if (n == 0)
            break;
        if ((uint64_t)n > size - done) {
            e = ob_seterr(OB_EFORMAT, "%s: %s: holds more than the %llu bytes the archive gives",
                          apath, name, (unsigned long long)size);
            break;
        }
        for (la_ssize_t off = 0; off < n && !e;) {
            ssize_t w = write(fd, buf + off, (size_t)(n - off));
            if (w < 0 && errno == EINTR)
                continue;
            if (w < 0)
                e = ob_seterr(OB_EIO, "%s/%s: write: %s", tmp, name, strerror(errno));
            else
                off += w;
        }
        if (e)
            break;
        done += (uint64_t)n;
    }
    if (!e && done != size)
        e = ob_seterr(OB_EFORMAT, "%s: %s: ends after %llu of its %llu bytes (truncated)", apath,
                      name, (unsigned long long)done, (unsigned long long)size);
    if (!e && fsync(fd) != 0)
        e = ob_seterr(OB_EIO, "%s/%s: %s", tmp, name, strerror(errno));
    close(fd);
    return e;
}

/*
 * The pack whose manifest.json sits under prefix ("" or "dir/") in the archive at path: its
 * files (the regular members directly under prefix) into a temporary directory, checked whole
 * (ob_pack_open, then every file's sha256 against the manifest), then renamed to
 * blobs/<sha256 of the manifest>.q4nx and linked from link.
 */
static int extract_pack(const char *path, const char *blobs, const char *link,
                        const char *prefix, char **out)
{
    char *tmp = NULL, *blob = NULL;
    int dfd = -1, e;
    struct archive *ar = NULL;
    struct ob_pack *p = NULL;
    size_t pl = strlen(prefix);
    if ((e = make_tmpdir(blobs, &tmp, &dfd)))
        return e;
    if (!(ar = archive_read_new())) {
        e = ob_seterr(OB_ENOMEM, "out of memory");
        goto out;
    }
    open_formats(ar);
    if (archive_read_open_filename(ar, path, 1 << 16) != ARCHIVE_OK) {
        e = ob_seterr(OB_EFORMAT, "%s: %s", path, archive_error_string(ar));
        goto out;
    }
    for (;;) {
        struct archive_entry *ent;
        int r = archive_read_next_header(ar, &ent);
        if (r == ARCHIVE_EOF)
            break;
        if (r < ARCHIVE_WARN) {
            e = ob_seterr(OB_EFORMAT, "%s: %s", path, archive_error_string(ar));
            goto out;
        }
        const char *name = archive_entry_pathname(ent), *rest = name ? name + pl : NULL;
        if (!name || archive_entry_filetype(ent) != AE_IFREG || !in_dir(name, prefix) ||
            !*rest || *rest == '.') {
            if (archive_read_data_skip(ar) < ARCHIVE_WARN) {
                e = ob_seterr(OB_EFORMAT, "%s: %s", path, archive_error_string(ar));
                goto out;
            }
            continue;
        }
        if ((e = extract_pack_file(ar, ent, dfd, rest, path, tmp)))
            goto out;
    }
    uint64_t nan, inf;
    if ((e = ob_pack_open(tmp, &p)) || (e = ob_pack_verify(p, &nan, &inf))) {
        char b[512];
        member_names(e, tmp, prefix);
        ob_errprefix(e, "%s: the pack in %s", path, place(prefix, pl, b, sizeof b));
        goto out;
    }
    if (asprintf(&blob, "%s/%s.q4nx", blobs, ob_pack_sha256(p)) < 0) {
        blob = NULL;
        e = ob_seterr(OB_ENOMEM, "out of memory");
        goto out;
    }
    char target[128];
    snprintf(target, sizeof target, "../blobs/%s.q4nx", ob_pack_sha256(p));
    ob_pack_close(p);
    p = NULL;
    if (rename(tmp, blob) != 0) {
        /* the same pack from another archive is there already: use it */
        if (errno != ENOTEMPTY && errno != EEXIST) {
            e = ob_seterr(OB_EIO, "%s: %s", blob, strerror(errno));
            goto out;
        }
    } else {
        free(tmp);
        tmp = NULL;
    }
    publish_link(link, target);
    *out = realpath(blob, NULL);
    e = *out ? 0 : ob_seterr(OB_EIO, "%s: %s", blob, strerror(errno));
out:
    ob_pack_close(p);
    if (ar)
        archive_read_free(ar);
    if (tmp)
        remove_files(AT_FDCWD, tmp);       /* before the close that drops its lock */
    if (dfd >= 0)
        close(dfd);
    free(tmp);
    free(blob);
    return e;
}

/* are two member names in one directory */
static bool same_dir(const char *a, const char *b)
{
    const char *sa = strrchr(a, '/'), *sb = strrchr(b, '/');
    size_t la = sa ? (size_t)(sa - a) + 1 : 0, lb = sb ? (size_t)(sb - b) + 1 : 0;
    return la == lb && strncmp(a, b, la) == 0;
}

static int outside_pack(const char *path, const char *pack, const char *name)
{
    char b[512];
    return ob_seterr(OB_EFORMAT, "%s: holds a Q4NX pack (in %s) and a .gguf file outside it "
                     "('%s')", path, place(pack, strlen(pack), b, sizeof b), name);
}

int ob_model_resolve(const char *path, char **out)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return ob_seterr(ob_open_code(errno), "%s: %s", path, strerror(errno));
    struct stat st;
    char magic[4] = {0};
    ssize_t got = 0;
    if (fstat(fd, &st) != 0 || (S_ISREG(st.st_mode) && (got = read(fd, magic, 4)) < 0)) {
        int e = ob_seterr(OB_EIO, "%s: %s", path, strerror(errno));
        close(fd);
        return e;
    }
    close(fd);
    if (S_ISDIR(st.st_mode) && ob_pack_is(path)) {      /* a Q4NX pack (lib/npu/pack.c) */
        *out = strdup(path);
        return *out ? 0 : ob_seterr(OB_ENOMEM, "out of memory");
    }
    if (S_ISDIR(st.st_mode))
        return ob_seterr(OB_EFORMAT, "%s: a directory, but not a Q4NX pack (no manifest.json)",
                         path);
    if (!S_ISREG(st.st_mode))
        return ob_seterr(OB_EFORMAT, "%s: not a regular file", path);
    if (got == 4 && memcmp(magic, "GGUF", 4) == 0) {
        *out = strdup(path);
        return *out ? 0 : ob_seterr(OB_ENOMEM, "out of memory");
    }

    char *cache = NULL, *blobs = NULL, *links = NULL, *link = NULL, *tmp = NULL, *blob = NULL;
    struct archive *ar = NULL;
    EVP_MD_CTX *md = NULL;
    int tfd = -1, afd = -1, e;
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
    clean_stale(blobs);
    /* cached: the link resolves to a blob that is a whole GGUF */
    char *real = cached(link);
    if (real) {
        *out = real;
        e = 0;
        goto out;
    }
    if ((e = mkdirs(blobs)) || (e = mkdirs(links)))
        goto out;
    /* One extraction of an archive at a time: a second process waits here for the first,
     * then finds its link. The lock is the archive's own (no lock file is left behind);
     * where the file system cannot lock, both extract and the second rename wins, which is
     * harmless: the blobs are identical. */
    if ((afd = open(path, O_RDONLY | O_CLOEXEC)) >= 0) {
        int r;
        while ((r = flock(afd, LOCK_EX)) != 0 && errno == EINTR)
            ;
        if (r == 0 && (real = cached(link))) {
            *out = real;
            e = 0;
            goto out;
        }
    }

    ar = archive_read_new();
    md = EVP_MD_CTX_new();
    if (!ar || !md || !EVP_DigestInit_ex(md, EVP_sha256(), NULL)) {
        e = ob_seterr(OB_ENOMEM, "out of memory");
        goto out;
    }
    open_formats(ar);
    if (archive_read_open_filename(ar, path, 1 << 16) != ARCHIVE_OK) {
        /* the compressions open_formats leaves out (they run a program): say which it is */
        static const char progs[][2][6] = {{"LRZI", "lrzip"}, {"\x89LZO", "lzop"},
                                           {"GRZi", "grzip"}};
        for (size_t i = 0; i < sizeof progs / sizeof *progs; i++)
            if (got == 4 && memcmp(magic, progs[i][0], 4) == 0) {
                e = ob_seterr(OB_EFORMAT, "%s: not a GGUF file nor a readable archive: "
                              "compressed with %s, which 1b does not read: decompress it first",
                              path, progs[i][1]);
                goto out;
            }
        e = ob_seterr(OB_EFORMAT, "%s: not a GGUF file nor a readable archive: %s", path,
                      archive_error_string(ar));
        goto out;
    }
    /* found: the first .gguf, extracted as it streams by unless a pack came first; other: the
     * second; apart: the first one not in found's directory (a pack's files share one) */
    char *found = NULL, *pack = NULL, *other = NULL, *apart = NULL;
    int n_entries = 0;
    struct extract x = {.apath = path, .blobs = blobs, .md = md, .fd = -1};
    /* One pass over the whole archive, so that one holding two models (two GGUFs, two packs, or
     * a pack and a GGUF outside its directory) is refused whatever the order of its members. */
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
        const char *base = name ? strrchr(name, '/') : NULL;
        base = base ? base + 1 : name;
        bool reg = name && archive_entry_filetype(ent) == AE_IFREG;
        if (reg && strcmp(base, "manifest.json") == 0) {
            /* a Q4NX pack: its directory (the manifest's) is extracted by a pass of its own */
            size_t dl = (size_t)(base - name);
            if (pack && (strlen(pack) != dl || strncmp(pack, name, dl) != 0)) {
                char b1[512], b2[512];
                e = ob_seterr(OB_EFORMAT, "%s: holds more than one Q4NX pack (in %s and in %s)",
                              path, place(pack, strlen(pack), b1, sizeof b1),
                              place(name, dl, b2, sizeof b2));
                goto out_found;
            }
            if (!pack && !(pack = strndup(name, dl))) {
                e = ob_seterr(OB_ENOMEM, "out of memory");
                goto out_found;
            }
        }
        bool gguf = reg && has_suffix(name, ".gguf");
        if (gguf && pack && !in_dir(name, pack)) {
            e = outside_pack(path, pack, name);
            goto out_found;
        }
        if (gguf && found) {
            if (!other && !(other = strdup(name))) {
                e = ob_seterr(OB_ENOMEM, "out of memory");
                goto out_found;
            }
            if (!apart && !same_dir(name, found) && !(apart = strdup(name))) {
                e = ob_seterr(OB_ENOMEM, "out of memory");
                goto out_found;
            }
        }
        if (!gguf || found || pack) {
            if (archive_read_data_skip(ar) < ARCHIVE_WARN) {
                e = ob_seterr(OB_EFORMAT, "%s: %s", path, archive_error_string(ar));
                goto out_found;
            }
            continue;
        }
        if (!(found = strdup(name))) {
            e = ob_seterr(OB_ENOMEM, "out of memory");
            goto out_found;
        }
        if ((e = make_tmp(blobs, &tmp, &tfd)))
            goto out_found;
        x.member = found;
        x.tmp = tmp;
        x.ent = ent;
        x.fd = tfd;
        if ((e = extract_member(ar, &x)))
            goto out_found;
    }
    if (pack) {
        /* the .gguf files met before the manifest must be the pack's files too */
        const char *away = found && !in_dir(found, pack) ? found : apart;
        if (away) {
            e = outside_pack(path, pack, away);
            goto out_found;
        }
        if (tmp)                               /* a .gguf met first: the pack's meta file */
            unlink(tmp);
        free(tmp);
        tmp = NULL;
        archive_read_free(ar);
        ar = NULL;
        e = extract_pack(path, blobs, link, pack, out);
        goto out_found;
    }
    if (!found) {
        e = ob_seterr(OB_EFORMAT, "%s: the archive (%d entries) holds no .gguf file", path,
                      n_entries);
        goto out_found;
    }
    if (other) {
        e = ob_seterr(OB_EFORMAT, "%s: holds more than one .gguf file ('%s' and '%s')", path,
                      found, other);
        goto out_found;
    }
    if (fsync(tfd) != 0) {
        e = ob_seterr(OB_EIO, "%s: %s", tmp, strerror(errno));
        goto out_found;
    }
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
    char target[128];
    snprintf(target, sizeof target, "../blobs/%s.gguf", sumhex);
    publish_link(link, target);
    *out = realpath(blob, NULL);
    e = *out ? 0 : ob_seterr(OB_EIO, "%s: %s", blob, strerror(errno));
out_found:
    free(found);
    free(other);
    free(apart);
    free(pack);
out:
    if (tmp)
        unlink(tmp);                      /* before the close that drops its lock */
    if (tfd >= 0)
        close(tfd);
    if (afd >= 0)
        close(afd);
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
