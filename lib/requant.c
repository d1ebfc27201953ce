/*
 * requant.c — re-quantisation (1b.h: ob_requant), the work of 1b-requant.
 *
 * For each tensor of the input, in file order: its target type (a mix of quant.c, or Q4NX for
 * every matrix of a pack); then its rows, split over the thread pool in chunks of whole rows,
 * are dequantised to float32 (x), quantised to the target type and dequantised again (y), and
 * each row's squared error sum(y - x)^2, sum x^2 and max |y - x| are kept per row and added up
 * in row order afterwards, so neither the bytes nor the report depend on the thread count.
 * A tensor that keeps its type is copied byte for byte (llama-quantize does the same).
 *
 * GGUF output: the GGUF writer (gguf-write.c: temporary file, rename) with every metadata pair
 * of the input and general.file_type set to the mix's llama.cpp file type; tensors are made
 * by its fill callback one at a time, so a large model never sits in memory at once.
 * Pack output: lib/npu/pack.c's writer (temporary directory, rename); vectors go to meta.gguf
 * as F32, matrices to weights.q4nx as Q4NX tiles.
 */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "1b.h"
#include "host/pool.h"
#include "npu/pack.h"
#include "quant.h"

struct plan {
    const struct ob_gguf_tensor *t;
    uint32_t to;
    uint64_t rows, row_in, row_out;   /* rows of ne[0] values, their bytes in and out */
};

struct rq {
    const struct ob_requant_params *p;
    const char *arg;
    struct ob_gguf *g;
    struct plan *plan;
    uint64_t n;
    struct ob_pool *pool;
    float *scratch;                /* per thread: 2 * max ne0 floats */
    uint64_t max_ne0;
    struct ob_requant_summary *sum;
    double sse, ss;                /* over everything so far */
    float **vecs;                  /* pack: the F32 vectors kept until meta.gguf is written */
};

/* ---- one tensor's rows ------------------------------------------------------------------------ */

struct rows_job {
    struct rq *q;
    const struct plan *pl;
    void *dst;
    uint64_t chunk;
    double *sse, *ss;              /* per row */
    double *maxe;
    bool copied;                   /* only the input's sum of squares is wanted */
    pthread_mutex_t mu;
    int err;                       /* the failure of the lowest row (tasks run in any order,
                                      the message must not depend on it) */
    uint64_t err_row;
    char msg[256];
};

static void rows_task(void *ctx, int task, int thread)
{
    struct rows_job *j = ctx;
    const struct plan *pl = j->pl;
    uint64_t k = pl->t->ne[0];
    float *x = j->q->scratch + (size_t)thread * 2 * j->q->max_ne0, *y = x + j->q->max_ne0;
    uint64_t r0 = (uint64_t)task * j->chunk, r1 = r0 + j->chunk < pl->rows ? r0 + j->chunk : pl->rows;
    for (uint64_t r = r0; r < r1; r++) {
        const char *src = (const char *)pl->t->data + r * pl->row_in;
        char *dst = (char *)j->dst + r * pl->row_out;
        int e = ob_dequant_row(pl->t->type, src, x, (int64_t)k);
        if (!e && !j->copied)
            e = ob_quant_row(pl->to, x, dst, (int64_t)k);
        if (!e && !j->copied)
            e = ob_dequant_row(pl->to, dst, y, (int64_t)k);
        if (e) {
            pthread_mutex_lock(&j->mu);
            if (!j->err || r < j->err_row) {
                j->err = e;
                j->err_row = r;
                snprintf(j->msg, sizeof j->msg, "%s", ob_errmsg());
            }
            pthread_mutex_unlock(&j->mu);
            return;
        }
        double se = 0, s2 = 0, mx = 0;
        for (uint64_t i = 0; i < k; i++) {
            double d = j->copied ? 0.0 : (double)y[i] - (double)x[i], a = fabs(d);
            se += d * d;
            s2 += (double)x[i] * (double)x[i];
            mx = a > mx || a != a ? a : mx;
        }
        j->sse[r] = se;
        j->ss[r] = s2;
        j->maxe[r] = mx;
    }
}

/* Make tensor pl's output bytes at dst (row_out * rows bytes) and report it. */
static int make_tensor(struct rq *q, const struct plan *pl, void *dst)
{
    const struct ob_gguf_tensor *t = pl->t;
    uint64_t count = t->ne[0] * pl->rows;
    struct ob_requant_tensor r = {
        .index = (uint64_t)(pl - q->plan), .count = q->n, .name = t->name, .n_dims = t->n_dims,
        .from = t->type, .to = pl->to, .copied = t->type == pl->to,
        .bytes_in = t->nbytes, .bytes_out = pl->row_out * pl->rows,
    };
    memcpy(r.ne, t->ne, sizeof r.ne);
    double sse = 0, ss = 0, mx = 0;
    if (r.copied)
        memcpy(dst, t->data, (size_t)t->nbytes);
    struct rows_job j = {.q = q, .pl = pl, .dst = dst, .copied = r.copied,
                         .mu = PTHREAD_MUTEX_INITIALIZER};
    double *sse_r = malloc(pl->rows * sizeof *sse_r), *ss_r = malloc(pl->rows * sizeof *ss_r);
    double *max_r = malloc(pl->rows * sizeof *max_r);
    if (!sse_r || !ss_r || !max_r) {
        free(sse_r), free(ss_r), free(max_r);
        return ob_seterr(OB_ENOMEM, "out of memory for tensor '%s'", t->name);
    }
    j.sse = sse_r;
    j.ss = ss_r;
    j.maxe = max_r;
    int threads = ob_pool_threads(q->pool);
    j.chunk = pl->rows / ((uint64_t)threads * 8) + 1;
    ob_pool_run(q->pool, rows_task, &j, (int)((pl->rows + j.chunk - 1) / j.chunk));
    if (j.err) {
        free(sse_r), free(ss_r), free(max_r);
        return ob_seterr(j.err, "tensor '%s': row %llu: %s", t->name,
                         (unsigned long long)j.err_row, j.msg);
    }
    for (uint64_t i = 0; i < pl->rows; i++) {
        sse += sse_r[i];
        ss += ss_r[i];
        mx = max_r[i] > mx || max_r[i] != max_r[i] ? max_r[i] : mx;
    }
    free(sse_r), free(ss_r), free(max_r);
    r.rmse = count ? sqrt(sse / (double)count) : 0;
    r.rms = count ? sqrt(ss / (double)count) : 0;
    r.max_abs = mx;
    struct ob_requant_summary *s = q->sum;
    s->tensors++;
    s->requantised += !r.copied;
    s->copied += r.copied;
    s->params += count;
    s->bytes_in += r.bytes_in;
    s->bytes_out += r.bytes_out;
    s->max_abs = mx > s->max_abs || mx != mx ? mx : s->max_abs;
    q->sse += sse;
    q->ss += ss;
    if (q->p->tensor_done)
        q->p->tensor_done(q->p->user, &r);
    return 0;
}

/* ---- plans ------------------------------------------------------------------------------------ */

static int make_plan(struct rq *q, const struct ob_hparams *hp, bool pack)
{
    q->n = ob_gguf_n_tensors(q->g);
    if (!(q->plan = calloc(q->n ? q->n : 1, sizeof *q->plan)))
        return ob_seterr(OB_ENOMEM, "out of memory");
    for (uint64_t i = 0; i < q->n; i++) {
        struct plan *pl = &q->plan[i];
        const struct ob_gguf_tensor *t = pl->t = ob_gguf_tensor_at(q->g, i);
        if (!ob_dequant_supported(t->type))
            return ob_seterr(OB_EUNSUPP, "tensor '%s' has type %s, which 1b cannot dequantise",
                             t->name, ob_type_name(t->type));
        if (!ob_type_is_float(t->type))
            q->sum->input_quantised = true;
        int e;
        if (pack) {
            pl->to = t->n_dims >= 2 ? OB_Q4NX : OB_F32;
            if (pl->to == OB_Q4NX && t->ne[0] % 32)
                return ob_seterr(OB_EUNSUPP, "tensor '%s': rows of %llu values do not fit Q4NX "
                                 "tiles of 32", t->name, (unsigned long long)t->ne[0]);
        } else {
            struct ob_mix_tensor mt = {t->name, t->n_dims, t->ne[0], hp->n_layer,
                                       hp->tied_output};
            if ((e = ob_mix_type(q->p->type, &mt, &pl->to)))
                return e;
        }
        pl->rows = t->ne[1] * t->ne[2] * t->ne[3];
        pl->row_in = t->nbytes / pl->rows;
        if (!ob_type_row_bytes(pl->to, t->ne[0], &pl->row_out))
            return ob_seterr(OB_EUNSUPP, "tensor '%s': rows of %llu values do not fit %s",
                             t->name, (unsigned long long)t->ne[0], ob_type_name(pl->to));
        if (t->ne[0] > q->max_ne0)
            q->max_ne0 = t->ne[0];
    }
    return 0;
}

/* ---- GGUF output ---------------------------------------------------------------------------- */

static int fill(void *ctx, uint64_t index, void *buf, uint64_t nbytes)
{
    struct rq *q = ctx;
    return make_tensor(q, &q->plan[index], buf);
}

static int write_gguf(struct rq *q, const char *out)
{
    struct ob_gguf_writer *w = NULL;
    int e, ft = ob_mix_file_type(q->p->type);
    if ((e = ob_gguf_writer_new(&w)) || (e = ob_gguf_writer_copy_meta(w, q->g)) ||
        (ft >= 0 && (e = ob_gguf_writer_set_u32(w, "general.file_type", (uint32_t)ft))) ||
        (e = ob_gguf_writer_set_u32(w, "general.quantization_version", 2)))
        goto out;
    for (uint64_t i = 0; i < q->n && !e; i++) {
        const struct ob_gguf_tensor *t = q->plan[i].t;
        e = ob_gguf_writer_add_tensor(w, t->name, q->plan[i].to, t->n_dims, t->ne, NULL, fill, q);
    }
    if (!e)
        e = ob_gguf_writer_write(w, out);
    if (!e)
        e = ob_sha256_file(out, q->sum->sha256);
out:
    ob_gguf_writer_free(w);
    return e;
}

/* ---- pack output ------------------------------------------------------------------------------ */

static int meta_fill(void *ctx, uint64_t index, void *buf, uint64_t nbytes)
{
    memcpy(buf, ((float **)ctx)[index], (size_t)nbytes);
    return 0;
}

static int write_pack(struct rq *q, const char *out, const struct ob_hparams *hp,
                      const char *resolved)
{
    struct ob_pack_writer *pw = NULL;
    struct ob_gguf_writer *gw = NULL;
    cJSON *info = NULL;
    void *buf = NULL;
    char *meta = NULL;
    int e;
    if ((e = ob_pack_writer_new(out, &pw)) || (e = ob_gguf_writer_new(&gw)) ||
        (e = ob_gguf_writer_copy_meta(gw, q->g)))
        goto out;
    if (!(q->vecs = calloc(q->n ? q->n : 1, sizeof *q->vecs))) {
        e = ob_seterr(OB_ENOMEM, "out of memory");
        goto out;
    }
    uint64_t nv = 0;
    for (uint64_t i = 0; i < q->n && !e; i++) {
        const struct plan *pl = &q->plan[i];
        uint64_t nb = pl->row_out * pl->rows;
        if (!(buf = malloc((size_t)nb))) {
            e = ob_seterr(OB_ENOMEM, "out of memory for tensor '%s'", pl->t->name);
            break;
        }
        if ((e = make_tensor(q, pl, buf)))
            break;
        if (pl->to == OB_Q4NX) {
            e = ob_pack_writer_add(pw, pl->t->name, pl->t->ne[0], pl->rows, buf, nb, pl->t->type);
            free(buf);
        } else {                   /* a vector: kept for meta.gguf */
            q->vecs[nv] = buf;
            e = ob_gguf_writer_add_tensor(gw, pl->t->name, OB_F32, pl->t->n_dims, pl->t->ne,
                                          NULL, meta_fill, q->vecs);
            /* meta_fill gets the writer's index: vectors are added in the same order */
            nv++;
        }
        buf = NULL;
    }
    if (e)
        goto out;
    if (asprintf(&meta, "%s/" PACK_META, ob_pack_writer_dir(pw)) < 0) {
        meta = NULL;
        e = ob_seterr(OB_ENOMEM, "out of memory");
        goto out;
    }
    if ((e = ob_gguf_writer_write(gw, meta)))
        goto out;
    info = cJSON_CreateObject();
    char *name = NULL;
    cJSON_AddStringToObject(info, "architecture", hp->arch);
    if (ob_gguf_get_str(q->g, "general.name", &name) == 0) {
        cJSON_AddStringToObject(info, "name", name);
        free(name);
    }
    cJSON_AddItemToObject(info, "hparams", ob_hparams_json(hp));
    /* what meta.gguf holds of the tokenizer and the chat template, for a reader of the
     * manifest alone (the data itself is meta.gguf's) */
    cJSON *tk = cJSON_AddObjectToObject(info, "tokenizer");
    char *str = NULL;
    if (ob_gguf_get_str(q->g, "tokenizer.ggml.model", &str) == 0)
        cJSON_AddStringToObject(tk, "model", str);
    free(str);
    str = NULL;
    if (ob_gguf_get_str(q->g, "tokenizer.ggml.pre", &str) == 0)
        cJSON_AddStringToObject(tk, "pre", str);
    free(str);
    str = NULL;
    const struct ob_gguf_value *toks = ob_gguf_get(q->g, "tokenizer.ggml.tokens");
    if (toks && toks->type == OB_GGUF_ARRAY)
        ob_json_add_u64(tk, "n_tokens", toks->arr.n);
    cJSON_AddStringToObject(tk, "file", PACK_META);
    cJSON *ct = cJSON_AddObjectToObject(info, "chat_template");
    int te = ob_gguf_get_str(q->g, "tokenizer.chat_template", &str);
    cJSON_AddStringToObject(ct, "name", ob_chat_detect(te == 0 ? str : NULL));
    free(str);
    cJSON_AddStringToObject(ct, "file", PACK_META);
    cJSON *src = cJSON_AddObjectToObject(info, "source");
    const char *base = strrchr(q->arg, '/');
    cJSON_AddStringToObject(src, "file", base ? base + 1 : q->arg);
    cJSON_AddStringToObject(src, "sha256", q->sum->source_sha256);
    struct stat st;
    if (stat(resolved, &st) == 0)
        ob_json_add_u64(src, "bytes", (uint64_t)st.st_size);
    cJSON *types = cJSON_AddObjectToObject(src, "types");
    for (uint64_t i = 0; i < q->n; i++) {
        const char *tn = ob_type_name(q->plan[i].t->type);
        cJSON *c = cJSON_GetObjectItemCaseSensitive(types, tn);
        if (c)
            cJSON_SetNumberValue(c, c->valuedouble + 1);
        else
            cJSON_AddNumberToObject(types, tn, 1);
    }
    cJSON *tile = cJSON_AddObjectToObject(info, "tile");
    cJSON_AddNumberToObject(tile, "values", 32);
    cJSON_AddNumberToObject(tile, "bytes", 20);
    cJSON_AddStringToObject(tile, "layout", "bf16 step s, bf16 zero z, 16 bytes of 4-bit q "
                            "(value j < 16: low nibble of byte j; j >= 16: high nibble of "
                            "byte j - 16); x = s * q + z");
    cJSON_AddStringToObject(info, "made_by", "1b-requant " OB_VERSION);
    e = ob_pack_writer_finish(pw, info, q->p->force, q->sum->sha256);
out:
    if (q->vecs)
        for (uint64_t i = 0; i < q->n; i++)
            free(q->vecs[i]);
    free(q->vecs);
    q->vecs = NULL;
    free(buf);
    free(meta);
    cJSON_Delete(info);
    ob_gguf_writer_free(gw);
    ob_pack_writer_free(pw);
    return e;
}

/* ---- the whole ------------------------------------------------------------------------------- */

/* out may not be the input, the archive it came from, or a directory holding either */
static int check_output(const char *out, const char *arg, const char *resolved, bool force,
                        bool pack)
{
    struct stat so, si;
    if (stat(out, &so) != 0)
        return errno == ENOENT ? 0 : ob_seterr(OB_EIO, "%s: %s", out, strerror(errno));
    const char *ins[2] = {arg, resolved};
    for (int i = 0; i < 2; i++) {
        if (stat(ins[i], &si) == 0 && si.st_dev == so.st_dev && si.st_ino == so.st_ino)
            return ob_seterr(OB_EUSAGE, "%s: is the input; 1b-requant never writes over its "
                             "input", out);
        char *ri = realpath(ins[i], NULL), *ro = realpath(out, NULL);
        size_t lo = ro ? strlen(ro) : 0;
        bool inside = ri && ro && S_ISDIR(so.st_mode) && strncmp(ri, ro, lo) == 0 &&
                      ri[lo] == '/';
        free(ri);
        free(ro);
        if (inside)
            return ob_seterr(OB_EUSAGE, "%s: holds the input; 1b-requant never writes over its "
                             "input", out);
    }
    if (!force)
        return ob_seterr(OB_EUSAGE, "%s: exists (--force replaces it)", out);
    if (S_ISDIR(so.st_mode) && !(pack && ob_pack_is(out)))
        return ob_seterr(OB_EUSAGE, "%s: is a directory%s", out,
                         pack ? " that is not a Q4NX pack; not replaced" : "");
    return 0;
}

int ob_requant(const char *in, const char *out, const struct ob_requant_params *p,
               struct ob_requant_summary *sum)
{
    struct rq q = {.p = p, .arg = in, .sum = sum};
    char *path = NULL;
    int e;
    bool pack = strcasecmp(p->type, "q4nx") == 0;
    memset(sum, 0, sizeof *sum);
    if (!pack && !ob_mix_known(p->type))
        return ob_seterr(OB_EUSAGE, "unknown type '%s' (q4nx, or one of: %s)", p->type,
                         ob_mix_names());
    if ((e = ob_model_resolve(in, &path)))
        return e;
    if (ob_pack_is(path)) {
        e = ob_seterr(OB_EFORMAT, "%s: is a Q4NX pack; 1b-requant reads GGUF models", in);
        goto out;
    }
    if ((e = check_output(out, in, path, p->force, pack)))
        goto out;
    struct ob_hparams hp;
    if ((e = ob_gguf_open(path, &q.g)))
        goto out;
    if ((e = ob_hparams_read(q.g, &hp))) {
        ob_errprefix(e, "%s", in);
        goto out;
    }
    if (pack && !hp.supported) {
        e = ob_seterr(OB_EUNSUPP, "%s: architecture '%s' has no forward pass in 1b; a Q4NX pack "
                      "of it could not run", in, hp.arch);
        goto out;
    }
    if ((e = make_plan(&q, &hp, pack)) || (e = ob_sha256_file(path, sum->source_sha256))) {
        ob_errprefix(e, "%s", in);
        goto out;
    }
    int threads = p->n_threads > 0 ? p->n_threads : 1;
    if ((e = ob_pool_new(threads, &q.pool)))
        goto out;
    if (!(q.scratch = malloc((size_t)threads * 2 * (q.max_ne0 ? q.max_ne0 : 1) * sizeof(float)))) {
        e = ob_seterr(OB_ENOMEM, "out of memory");
        goto out;
    }
    e = pack ? write_pack(&q, out, &hp, path) : write_gguf(&q, out);
    if (!e) {
        sum->rmse = sum->params ? sqrt(q.sse / (double)sum->params) : 0;
        sum->rms = sum->params ? sqrt(q.ss / (double)sum->params) : 0;
    }
out:
    ob_pool_free(q.pool);
    free(q.scratch);
    free(q.plan);
    ob_gguf_close(q.g);
    free(path);
    return e;
}
