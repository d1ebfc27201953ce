/*
 * pack.c — Q4NX packs, the npu route's weights: reading (1b.h) and writing (pack.h).
 *
 * Version 1 of the format (man/1b.7 documents it for other writers and readers):
 *
 *   PACK/manifest.json   one JSON object:
 *       "format": "1b-q4nx", "version": 1,
 *       "architecture", "name", "hparams" (as 1b-load prints them), "source" (the GGUF it was
 *       made from: "file", "sha256", "bytes", "name"), "tile" (a description of the tile),
 *       "meta": "meta.gguf",
 *       "files": {NAME: {"bytes": N, "sha256": HEX}} for every other file of the pack,
 *       "tensors": [{"name", "type": "Q4NX", "shape": [k, n], "file", "offset", "bytes",
 *                    "from": the source type}] in the source's order
 *   PACK/meta.gguf       a GGUF with every metadata pair of the source (tokenizer, chat
 *                        template, hyper-parameters) and its vectors as F32 tensors
 *   PACK/weights.q4nx    the tiles (lib/arith/q4nx.h) of every matrix, row-major, each tensor
 *                        at a multiple of 4096 bytes, zero padding between
 *
 * A reader refuses a manifest whose format is not "1b-q4nx" or whose version it does not know,
 * a file whose size is not the manifest's, a tensor outside its file or of the wrong size for
 * its shape, a name used twice, and hyper-parameters that differ from the meta GGUF's. The
 * sha256 of each file is checked on request (ob_pack_verify: 1b-load --check), not at every
 * open, as a GGUF's data is not hashed either.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "1b.h"
#include "arith/q4nx.h"
#include "model.h"
#include "npu/pack.h"
#include "sb.h"

#define MANIFEST_MAX (64u << 20)   /* bytes: a manifest lists a few hundred tensors */

struct pfile {
    char *name;
    uint64_t bytes;
    char sha256[65];
    const void *map;               /* NULL for the meta GGUF (opened by ob_gguf_open) */
};

struct ob_pack {
    char *dir;
    cJSON *manifest;
    char sha256[65];
    struct ob_gguf *meta;
    struct ob_hparams hp;          /* read from meta and the tiles together */
    struct pfile *files;
    size_t n_files;
    struct ob_pack_tensor *t;
    struct ob_gguf_tensor *gt;     /* the same tensors as GGUF sees them, for ob_hparams_read_with */
    size_t n_t;
    uint64_t bytes;
};

static void hex(const unsigned char *md, char out[65])
{
    for (int i = 0; i < 32; i++)
        snprintf(out + 2 * i, 3, "%02x", md[i]);
}

bool ob_pack_is(const char *path)
{
    struct stat st;
    char *m = NULL;
    if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode) ||
        asprintf(&m, "%s/" PACK_MANIFEST, path) < 0)
        return false;
    bool is = stat(m, &st) == 0;
    free(m);
    return is;
}

/* the whole of a small file, NUL-terminated */
static int slurp(const char *path, size_t max, char **out, size_t *len)
{
    *out = NULL;
    *len = 0;
    FILE *f = fopen(path, "rb");
    if (!f)
        return ob_seterr(errno == ENOENT ? OB_EFORMAT : ob_open_code(errno), "%s: %s", path,
                         strerror(errno));
    struct ob_sb b = {0};
    char chunk[1 << 16];
    size_t k;
    while ((k = fread(chunk, 1, sizeof chunk, f)) > 0 && b.len <= max)
        ob_sb_add(&b, chunk, k);
    bool err = ferror(f);
    fclose(f);
    if (err || b.oom || b.len > max) {
        ob_sb_free(&b);
        return ob_seterr(err ? OB_EIO : b.oom ? OB_ENOMEM : OB_EFORMAT, "%s: %s", path,
                         err ? "read error" : b.oom ? "out of memory" : "larger than 64 MiB");
    }
    *out = ob_sb_take(&b, len);
    return *out ? 0 : ob_seterr(OB_ENOMEM, "out of memory");
}

/* a whole number in [0, 2^53] */
static bool get_u64(const cJSON *o, const char *key, uint64_t *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!cJSON_IsNumber(v) || v->valuedouble < 0 || v->valuedouble > 9007199254740992.0 ||
        v->valuedouble != (double)(uint64_t)v->valuedouble)
        return false;
    *out = (uint64_t)v->valuedouble;
    return true;
}

static const char *get_str(const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* a file name inside the pack: no directories, no dot files */
static bool plain_name(const char *s)
{
    return s && *s && *s != '.' && !strchr(s, '/') && strlen(s) < 256;
}

static struct pfile *find_file(const struct ob_pack *p, const char *name)
{
    for (size_t i = 0; i < p->n_files; i++)
        if (strcmp(p->files[i].name, name) == 0)
            return &p->files[i];
    return NULL;
}

void ob_pack_close(struct ob_pack *p)
{
    if (!p)
        return;
    for (size_t i = 0; i < p->n_files; i++) {
        if (p->files[i].map && p->files[i].bytes)
            munmap((void *)p->files[i].map, (size_t)p->files[i].bytes);
        free(p->files[i].name);
    }
    free(p->files);
    free(p->t);
    free(p->gt);
    ob_gguf_close(p->meta);
    cJSON_Delete(p->manifest);
    free(p->dir);
    free(p);
}

/* map one file of the pack, checking its size against the manifest's */
static int map_file(struct ob_pack *p, struct pfile *f, bool map)
{
    char *path = NULL;
    if (asprintf(&path, "%s/%s", p->dir, f->name) < 0)
        return ob_seterr(OB_ENOMEM, "out of memory");
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    int e = 0;
    if (fd < 0 || fstat(fd, &st) != 0) {
        e = ob_seterr(errno == ENOENT ? OB_EFORMAT : ob_open_code(errno), "%s: %s", path,
                      strerror(errno));
    } else if (!S_ISREG(st.st_mode)) {
        e = ob_seterr(OB_EFORMAT, "%s: not a regular file", path);
    } else if ((uint64_t)st.st_size != f->bytes) {
        e = ob_seterr(OB_EFORMAT, "%s: %llu bytes where the manifest gives %llu (truncated or "
                      "replaced)", path, (unsigned long long)st.st_size,
                      (unsigned long long)f->bytes);
    } else if (map && f->bytes) {
        void *m = mmap(NULL, (size_t)f->bytes, PROT_READ, MAP_SHARED, fd, 0);
        if (m == MAP_FAILED)
            e = ob_seterr(OB_EIO, "%s: mmap: %s", path, strerror(errno));
        else
            f->map = m;
    }
    if (fd >= 0)
        close(fd);
    free(path);
    return e;
}

/* the manifest's hyper-parameters against those read from the meta GGUF */
static int check_hparams(const cJSON *h, const struct ob_hparams *hp)
{
    static const char *const keys[] = {"n_vocab", "n_embd", "n_layer", "n_head", "n_head_kv",
                                       "head_dim", "n_ff", "n_rot"};
    const uint32_t vals[] = {hp->n_vocab, hp->n_embd, hp->n_layer, hp->n_head, hp->n_head_kv,
                             hp->head_dim, hp->n_ff, hp->n_rot};
    if (!cJSON_IsObject(h))
        return ob_seterr(OB_EFORMAT, "no \"hparams\" object");
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        uint64_t v;
        if (!get_u64(h, keys[i], &v))
            return ob_seterr(OB_EFORMAT, "hparams.%s is missing or not a whole number", keys[i]);
        if (v != vals[i])
            return ob_seterr(OB_EFORMAT, "hparams.%s is %llu but " PACK_META " gives %u", keys[i],
                             (unsigned long long)v, vals[i]);
    }
    return 0;
}

static int read_manifest(struct ob_pack *p)
{
    const cJSON *m = p->manifest;
    if (!cJSON_IsObject(m))
        return ob_seterr(OB_EFORMAT, "not a JSON object");
    const char *fmt = get_str(m, "format");
    if (!fmt || strcmp(fmt, PACK_FORMAT) != 0)
        return ob_seterr(OB_EFORMAT, "format is %s%s%s, not \"" PACK_FORMAT "\"",
                         fmt ? "\"" : "", fmt ? fmt : "missing", fmt ? "\"" : "");
    uint64_t ver;
    if (!get_u64(m, "version", &ver))
        return ob_seterr(OB_EFORMAT, "no \"version\" number");
    if (ver != OB_PACK_VERSION)
        return ob_seterr(OB_EFORMAT, "pack version %llu; this 1b reads version %d",
                         (unsigned long long)ver, OB_PACK_VERSION);
    const char *meta = get_str(m, "meta");
    if (!plain_name(meta))
        return ob_seterr(OB_EFORMAT, "\"meta\" does not name a file of the pack");
    /* files */
    const cJSON *files = cJSON_GetObjectItemCaseSensitive(m, "files"), *f;
    if (!cJSON_IsObject(files))
        return ob_seterr(OB_EFORMAT, "no \"files\" object");
    size_t nf = (size_t)cJSON_GetArraySize(files);
    if (!(p->files = calloc(nf ? nf : 1, sizeof *p->files)))
        return ob_seterr(OB_ENOMEM, "out of memory");
    p->n_files = 0;                /* the files read so far (none: p is new) */
    cJSON_ArrayForEach(f, files) {
        struct pfile *pf = &p->files[p->n_files];
        const char *sha = get_str(f, "sha256");
        if (!plain_name(f->string) || find_file(p, f->string))
            return ob_seterr(OB_EFORMAT, "files: '%s' is not a plain file name, or named twice",
                             f->string ? f->string : "");
        if (!get_u64(f, "bytes", &pf->bytes) || !sha || strlen(sha) != 64 ||
            strspn(sha, "0123456789abcdef") != 64)
            return ob_seterr(OB_EFORMAT, "files.%s: needs \"bytes\" and a \"sha256\" of 64 hex "
                             "digits", f->string);
        if (!(pf->name = strdup(f->string)))
            return ob_seterr(OB_ENOMEM, "out of memory");
        memcpy(pf->sha256, sha, 65);
        p->n_files++;
        p->bytes += pf->bytes;
    }
    if (!find_file(p, meta))
        return ob_seterr(OB_EFORMAT, "the meta file '%s' is not among \"files\"", meta);
    for (size_t i = 0; i < p->n_files; i++) {
        int e = map_file(p, &p->files[i], strcmp(p->files[i].name, meta) != 0);
        if (e)
            return e;
    }
    /* tensors */
    const cJSON *ts = cJSON_GetObjectItemCaseSensitive(m, "tensors"), *t;
    if (!cJSON_IsArray(ts))
        return ob_seterr(OB_EFORMAT, "no \"tensors\" array");
    size_t nt = (size_t)cJSON_GetArraySize(ts);
    if (!(p->t = calloc(nt ? nt : 1, sizeof *p->t)) || !(p->gt = calloc(nt ? nt : 1, sizeof *p->gt)))
        return ob_seterr(OB_ENOMEM, "out of memory");
    cJSON_ArrayForEach(t, ts) {
        struct ob_pack_tensor *pt = &p->t[p->n_t];
        size_t idx = p->n_t;
        pt->name = get_str(t, "name");
        const char *type = get_str(t, "type");
        const cJSON *shape = cJSON_GetObjectItemCaseSensitive(t, "shape");
        if (!pt->name || !*pt->name)
            return ob_seterr(OB_EFORMAT, "tensors[%zu]: no name", idx);
        if (ob_pack_tensor(p, pt->name))
            return ob_seterr(OB_EFORMAT, "tensor '%s' is listed twice", pt->name);
        if (!type || strcmp(type, "Q4NX") != 0)
            return ob_seterr(OB_EFORMAT, "tensor '%s': type %s, not Q4NX", pt->name,
                             type ? type : "missing");
        pt->type = OB_Q4NX;
        pt->from = get_str(t, "from");
        if (!pt->from)
            pt->from = "?";
        double k, n;
        if (!cJSON_IsArray(shape) || cJSON_GetArraySize(shape) != 2 ||
            !cJSON_IsNumber(cJSON_GetArrayItem(shape, 0)) ||
            !cJSON_IsNumber(cJSON_GetArrayItem(shape, 1)) ||
            (k = cJSON_GetArrayItem(shape, 0)->valuedouble) < 32 ||
            (n = cJSON_GetArrayItem(shape, 1)->valuedouble) < 1 || k > 1 << 30 || n > 1 << 30 ||
            k != (double)(uint64_t)k || n != (double)(uint64_t)n || (uint64_t)k % OB_QK4NX)
            return ob_seterr(OB_EFORMAT, "tensor '%s': shape is not [k, n] with k a multiple of "
                             "32", pt->name);
        pt->k = (uint64_t)k;
        pt->n = (uint64_t)n;
        pt->file = get_str(t, "file");
        struct pfile *pf = pt->file ? find_file(p, pt->file) : NULL;
        if (!pf || !pf->map)
            return ob_seterr(OB_EFORMAT, "tensor '%s': \"file\" names no tile file of the pack",
                             pt->name);
        uint64_t want = pt->k / OB_QK4NX * pt->n * sizeof(struct ob_block_q4nx);
        if (!get_u64(t, "offset", &pt->offset) || !get_u64(t, "bytes", &pt->nbytes))
            return ob_seterr(OB_EFORMAT, "tensor '%s': no offset or bytes", pt->name);
        if (pt->nbytes != want)
            return ob_seterr(OB_EFORMAT, "tensor '%s': %llu bytes, but [%llu, %llu] Q4NX takes "
                             "%llu", pt->name, (unsigned long long)pt->nbytes,
                             (unsigned long long)pt->k, (unsigned long long)pt->n,
                             (unsigned long long)want);
        if (pt->offset % 4 || pt->offset > pf->bytes || pt->nbytes > pf->bytes - pt->offset)
            return ob_seterr(OB_EFORMAT, "tensor '%s': bytes %llu..%llu are not inside %s (%llu "
                             "bytes)", pt->name, (unsigned long long)pt->offset,
                             (unsigned long long)(pt->offset + pt->nbytes), pf->name,
                             (unsigned long long)pf->bytes);
        pt->data = (const char *)pf->map + pt->offset;
        p->gt[p->n_t] = (struct ob_gguf_tensor){.name = pt->name, .n_dims = 2,
                                                .ne = {pt->k, pt->n, 1, 1}, .type = OB_Q4NX,
                                                .offset = pt->offset, .nbytes = pt->nbytes,
                                                .data = pt->data};
        p->n_t++;
    }
    /* the meta GGUF, and the manifest's facts against it */
    char *path = NULL;
    if (asprintf(&path, "%s/%s", p->dir, meta) < 0)
        return ob_seterr(OB_ENOMEM, "out of memory");
    int e = ob_gguf_open(path, &p->meta);
    free(path);
    if (e)
        return e;
    for (size_t i = 0; i < p->n_t; i++)
        if (ob_gguf_tensor(p->meta, p->t[i].name))
            return ob_seterr(OB_EFORMAT, "tensor '%s' is both a tile tensor and in %s",
                             p->t[i].name, meta);
    /* the shapes and presence of every tensor, the tiles' and the meta file's together */
    struct ob_hparams *hp = &p->hp;
    if ((e = ob_hparams_read_with(p->meta, p->gt, p->n_t, hp)))
        return e;
    const char *arch = get_str(m, "architecture");
    if (!arch || strcmp(arch, hp->arch) != 0)
        return ob_seterr(OB_EFORMAT, "architecture is %s but " PACK_META " gives '%s'",
                         arch ? arch : "missing", hp->arch);
    return check_hparams(cJSON_GetObjectItemCaseSensitive(m, "hparams"), hp);
}

int ob_pack_open(const char *dir, struct ob_pack **out)
{
    struct ob_pack *p = calloc(1, sizeof *p);
    char *path = NULL, *txt = NULL;
    size_t len = 0;
    int e;
    if (!p || !(p->dir = strdup(dir)) || asprintf(&path, "%s/" PACK_MANIFEST, dir) < 0) {
        path = NULL;
        e = ob_seterr(OB_ENOMEM, "out of memory");
        goto fail;
    }
    if ((e = slurp(path, MANIFEST_MAX, &txt, &len)))
        goto fail;
    unsigned char md[32];
    unsigned int ml;
    EVP_Digest(txt, len, md, &ml, EVP_sha256(), NULL);
    hex(md, p->sha256);
    if ((e = ob_json_parse_max(txt, len, 0, 1u << 20, &p->manifest)) ||
        (e = read_manifest(p))) {
        ob_errprefix(e, "%s", path);
        goto fail;
    }
    free(path);
    free(txt);
    *out = p;
    return 0;
fail:
    free(path);
    free(txt);
    ob_pack_close(p);
    return e;
}

struct ob_gguf *ob_pack_meta(const struct ob_pack *p) { return p->meta; }
const struct ob_hparams *ob_pack_hparams(const struct ob_pack *p) { return &p->hp; }
const cJSON *ob_pack_manifest(const struct ob_pack *p) { return p->manifest; }
const char *ob_pack_sha256(const struct ob_pack *p) { return p->sha256; }
uint64_t ob_pack_bytes(const struct ob_pack *p) { return p->bytes; }
uint64_t ob_pack_n_tensors(const struct ob_pack *p) { return p->n_t; }

const struct ob_pack_tensor *ob_pack_tensor_at(const struct ob_pack *p, uint64_t i)
{
    return i < p->n_t ? &p->t[i] : NULL;
}

const struct ob_pack_tensor *ob_pack_tensor(const struct ob_pack *p, const char *name)
{
    for (size_t i = 0; i < p->n_t; i++)
        if (strcmp(p->t[i].name, name) == 0)
            return &p->t[i];
    return NULL;
}

/* a bf16 field: NaN or Inf */
static void count_bf16(uint16_t h, uint64_t *nan, uint64_t *inf)
{
    if ((h & 0x7f80u) == 0x7f80u)
        ++*(h & 0x7fu ? nan : inf);
}

int ob_pack_verify(const struct ob_pack *p, uint64_t *nan, uint64_t *inf)
{
    *nan = *inf = 0;
    for (size_t i = 0; i < p->n_files; i++) {
        char *path = NULL, sha[65];
        if (asprintf(&path, "%s/%s", p->dir, p->files[i].name) < 0)
            return ob_seterr(OB_ENOMEM, "out of memory");
        int e = ob_sha256_file(path, sha);
        if (!e && strcmp(sha, p->files[i].sha256) != 0)
            e = ob_seterr(OB_EFORMAT, "%s: sha256 %s, but the manifest gives %s", path, sha,
                          p->files[i].sha256);
        free(path);
        if (e)
            return e;
    }
    for (size_t i = 0; i < p->n_t; i++) {
        const struct ob_block_q4nx *b = p->t[i].data;
        uint64_t nb = p->t[i].nbytes / sizeof *b;
        for (uint64_t j = 0; j < nb; j++) {
            count_bf16(b[j].s, nan, inf);
            count_bf16(b[j].z, nan, inf);
        }
    }
    return 0;
}

/* ---- writing ---------------------------------------------------------------------------------- */

struct wt {
    char *name;
    uint64_t k, n, offset, nbytes;
    uint32_t from;
};

struct ob_pack_writer {
    char *dir, *tmp;
    FILE *wf;                      /* weights.q4nx */
    EVP_MD_CTX *md;
    uint64_t pos;
    struct wt *t;
    size_t n_t, cap_t;
    bool done;
};

/* remove the files of a pack directory we wrote (no subdirectories), then the directory */
static void remove_dir(const char *dir)
{
    DIR *d = opendir(dir);
    if (d) {
        struct dirent *de;
        while ((de = readdir(d)))
            if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0)
                unlinkat(dirfd(d), de->d_name, 0);
        closedir(d);
    }
    rmdir(dir);
}

void ob_pack_writer_free(struct ob_pack_writer *w)
{
    if (!w)
        return;
    if (w->wf)
        fclose(w->wf);
    if (!w->done && w->tmp)
        remove_dir(w->tmp);
    EVP_MD_CTX_free(w->md);
    for (size_t i = 0; i < w->n_t; i++)
        free(w->t[i].name);
    free(w->t);
    free(w->dir);
    free(w->tmp);
    free(w);
}

int ob_pack_writer_new(const char *dir, struct ob_pack_writer **out)
{
    struct ob_pack_writer *w = calloc(1, sizeof *w);
    char *wp = NULL;
    int e = 0;
    if (!w || !(w->dir = strdup(dir)) || asprintf(&w->tmp, "%s.tmp.XXXXXX", dir) < 0) {
        if (w)
            w->tmp = NULL;
        ob_pack_writer_free(w);
        return ob_seterr(OB_ENOMEM, "out of memory");
    }
    if (!mkdtemp(w->tmp)) {
        e = ob_seterr(OB_EIO, "%s: %s", w->tmp, strerror(errno));
        free(w->tmp);
        w->tmp = NULL;
        goto fail;
    }
    chmod(w->tmp, 0755);           /* mkdtemp makes 0700; a pack is readable like a GGUF */
    if (asprintf(&wp, "%s/" PACK_WEIGHTS, w->tmp) < 0) {
        wp = NULL;
        e = ob_seterr(OB_ENOMEM, "out of memory");
        goto fail;
    }
    if (!(w->wf = fopen(wp, "wb"))) {
        e = ob_seterr(OB_EIO, "%s: %s", wp, strerror(errno));
        goto fail;
    }
    if (!(w->md = EVP_MD_CTX_new()) || !EVP_DigestInit_ex(w->md, EVP_sha256(), NULL)) {
        e = ob_seterr(OB_ENOMEM, "sha256: cannot initialise");
        goto fail;
    }
    free(wp);
    *out = w;
    return 0;
fail:
    free(wp);
    ob_pack_writer_free(w);
    return e;
}

const char *ob_pack_writer_dir(const struct ob_pack_writer *w) { return w->tmp; }

static int put(struct ob_pack_writer *w, const void *p, size_t n)
{
    if (n && fwrite(p, 1, n, w->wf) != n)
        return ob_seterr(OB_EIO, "%s/" PACK_WEIGHTS ": write: %s", w->tmp, strerror(errno));
    EVP_DigestUpdate(w->md, p, n);
    w->pos += n;
    return 0;
}

int ob_pack_writer_add(struct ob_pack_writer *w, const char *name, uint64_t k, uint64_t n,
                       const void *tiles, uint64_t nbytes, uint32_t from)
{
    if (k % OB_QK4NX || nbytes != k / OB_QK4NX * n * sizeof(struct ob_block_q4nx))
        return ob_seterr(OB_EUSAGE, "pack tensor '%s': [%llu, %llu] and %llu bytes", name,
                         (unsigned long long)k, (unsigned long long)n, (unsigned long long)nbytes);
    static const char zero[PACK_ALIGN];
    int e = put(w, zero, (size_t)((PACK_ALIGN - w->pos % PACK_ALIGN) % PACK_ALIGN));
    if (e)
        return e;
    char *copy = strdup(name);
    if (!copy || !OB_GROW(w->t, w->cap_t, w->n_t + 1)) {
        free(copy);
        return ob_seterr(OB_ENOMEM, "out of memory");
    }
    w->t[w->n_t] = (struct wt){copy, k, n, w->pos, nbytes, from};
    w->n_t++;
    return put(w, tiles, (size_t)nbytes);
}

/* a whole number as a raw JSON number (exact beyond 2^53, unlike a double) */
static cJSON *num(uint64_t v)
{
    char b[32];
    snprintf(b, sizeof b, "%llu", (unsigned long long)v);
    return cJSON_CreateRaw(b);
}

static int sync_close(FILE *f, const char *path)
{
    int e = 0;
    if (fflush(f) != 0 || fsync(fileno(f)) != 0)
        e = ob_seterr(OB_EIO, "%s: %s", path, strerror(errno));
    if (fclose(f) != 0 && !e)
        e = ob_seterr(OB_EIO, "%s: %s", path, strerror(errno));
    return e;
}

/* a pack we may replace: a directory whose manifest names our format */
static bool replaceable(const char *dir)
{
    char *path = NULL, *txt = NULL;
    size_t len;
    cJSON *j = NULL;
    if (!ob_pack_is(dir) || asprintf(&path, "%s/" PACK_MANIFEST, dir) < 0)
        return false;
    bool ok = slurp(path, MANIFEST_MAX, &txt, &len) == 0 &&
              ob_json_parse(txt, len, 0, &j) == 0 && get_str(j, "format") &&
              strcmp(get_str(j, "format"), PACK_FORMAT) == 0;
    cJSON_Delete(j);
    free(txt);
    free(path);
    if (ok) {                      /* and nothing in it but files */
        DIR *d = opendir(dir);
        struct dirent *de;
        while (d && (de = readdir(d)))
            if (de->d_type == DT_DIR && strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
                ok = false;
        if (d)
            closedir(d);
    }
    return ok;
}

int ob_pack_writer_finish(struct ob_pack_writer *w, const cJSON *info, bool replace,
                          char sha_out[65])
{
    char *path = NULL, *old = NULL, wsha[65], msha[65], *txt = NULL;
    unsigned char md[32];
    unsigned int ml;
    int e = 0;
    cJSON *m = cJSON_CreateObject(), *it;
    FILE *mf = NULL;
    if (!m)
        return ob_seterr(OB_ENOMEM, "out of memory");
    /* format and version first, so that a reader (or a person) sees them first */
    cJSON_AddItemToObject(m, "format", cJSON_CreateString(PACK_FORMAT));
    cJSON_AddItemToObject(m, "version", num(OB_PACK_VERSION));
    cJSON_ArrayForEach(it, info)
        cJSON_AddItemToObject(m, it->string, cJSON_Duplicate(it, true));
    /* the weights file */
    if (asprintf(&path, "%s/" PACK_WEIGHTS, w->tmp) < 0) {
        path = NULL;
        e = ob_seterr(OB_ENOMEM, "out of memory");
        goto out;
    }
    e = sync_close(w->wf, path);
    w->wf = NULL;
    if (e)
        goto out;
    EVP_DigestFinal_ex(w->md, md, &ml);
    hex(md, wsha);
    free(path);
    /* the meta GGUF the caller wrote */
    struct stat st;
    if (asprintf(&path, "%s/" PACK_META, w->tmp) < 0) {
        path = NULL;
        e = ob_seterr(OB_ENOMEM, "out of memory");
        goto out;
    }
    char meta_sha[65];
    if (stat(path, &st) != 0 || (e = ob_sha256_file(path, meta_sha))) {
        e = e ? e : ob_seterr(OB_EIO, "%s: %s", path, strerror(errno));
        goto out;
    }
    free(path);
    path = NULL;
    /* the rest of the manifest */
    cJSON_AddItemToObject(m, "meta", cJSON_CreateString(PACK_META));
    cJSON *files = cJSON_AddObjectToObject(m, "files"), *f;
    f = cJSON_AddObjectToObject(files, PACK_META);
    cJSON_AddItemToObject(f, "bytes", num((uint64_t)st.st_size));
    cJSON_AddStringToObject(f, "sha256", meta_sha);
    f = cJSON_AddObjectToObject(files, PACK_WEIGHTS);
    cJSON_AddItemToObject(f, "bytes", num(w->pos));
    cJSON_AddStringToObject(f, "sha256", wsha);
    cJSON *ts = cJSON_AddArrayToObject(m, "tensors");
    for (size_t i = 0; i < w->n_t; i++) {
        cJSON *t = cJSON_CreateObject(), *sh = cJSON_CreateArray();
        cJSON_AddStringToObject(t, "name", w->t[i].name);
        cJSON_AddStringToObject(t, "type", "Q4NX");
        cJSON_AddItemToArray(sh, num(w->t[i].k));
        cJSON_AddItemToArray(sh, num(w->t[i].n));
        cJSON_AddItemToObject(t, "shape", sh);
        cJSON_AddStringToObject(t, "file", PACK_WEIGHTS);
        cJSON_AddItemToObject(t, "offset", num(w->t[i].offset));
        cJSON_AddItemToObject(t, "bytes", num(w->t[i].nbytes));
        cJSON_AddStringToObject(t, "from", ob_type_name(w->t[i].from));
        cJSON_AddItemToArray(ts, t);
    }
    if (!(txt = ob_json_print(m))) {
        e = ob_seterr(OB_ENOMEM, "out of memory");
        goto out;
    }
    if (asprintf(&path, "%s/" PACK_MANIFEST, w->tmp) < 0) {
        path = NULL;
        e = ob_seterr(OB_ENOMEM, "out of memory");
        goto out;
    }
    size_t tl = strlen(txt);
    EVP_Digest(txt, tl, md, &ml, EVP_sha256(), NULL);
    hex(md, msha);
    if (!(mf = fopen(path, "wb")) || fwrite(txt, 1, tl, mf) != tl) {
        e = ob_seterr(OB_EIO, "%s: %s", path, strerror(errno));
        goto out;
    }
    e = sync_close(mf, path);
    mf = NULL;
    if (e)
        goto out;
    /* into place: an existing pack is moved aside (renamed onto an empty directory made for
     * it), the new one renamed in, then the old one removed; an existing file is renamed
     * aside likewise */
    bool exists = lstat(w->dir, &st) == 0;
    if (exists) {
        if (!replace)
            e = ob_seterr(OB_EIO, "%s: exists", w->dir);
        else if (S_ISDIR(st.st_mode) && !replaceable(w->dir))
            e = ob_seterr(OB_EIO, "%s: a directory that is not a Q4NX pack; not replaced",
                          w->dir);
        else if (asprintf(&old, "%s.old.XXXXXX", w->dir) < 0)
            e = ob_seterr(OB_ENOMEM, "out of memory"), old = NULL;
        else if (!mkdtemp(old) || (!S_ISDIR(st.st_mode) && rmdir(old) != 0) ||
                 rename(w->dir, old) != 0)
            e = ob_seterr(OB_EIO, "%s: cannot move aside: %s", w->dir, strerror(errno));
        if (e) {
            if (old)
                rmdir(old);
            goto out;
        }
    }
    if (rename(w->tmp, w->dir) != 0) {
        e = ob_seterr(OB_EIO, "%s: rename: %s", w->dir, strerror(errno));
        if (old)
            rename(old, w->dir);    /* put the old one back */
        goto out;
    }
    w->done = true;
    if (old) {
        if (S_ISDIR(st.st_mode))
            remove_dir(old);
        else
            unlink(old);
    }
    if (sha_out)
        memcpy(sha_out, msha, 65);
out:
    if (mf)
        fclose(mf);
    cJSON_Delete(m);
    free(txt);
    free(path);
    free(old);
    return e;
}
