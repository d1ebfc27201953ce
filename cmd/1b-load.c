/*
 * 1b-load — open a model, validate it, print its facts as one JSON record.
 *
 *   1b-load [--ctx N] [--tensors] [--check] [--template] [-d ROUTE [--gpu N] [--slots N]] MODEL
 *   1b-load --meta KEY MODEL
 *   1b-load -d ROUTE [--gpu N]
 *
 * MODEL is a GGUF file, a Q4NX pack directory (1b-requant), or an archive holding either (see
 * ob_model_resolve). With -d, the record also says on which device the route would run the
 * model and whether it fits there; -d without MODEL prints what the route's probe finds. Exit
 * status as in 1b(7): 0 ok, 1 --check found non-finite values or the model does not fit the
 * device of -d, 2 usage, 3 bad model file, 4 the route or its device is not there, 5 other
 * failure.
 */
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "1b.h"
#include "cli.h"

#define PROG "1b-load"

enum { OPT_CTX = 256, OPT_TENSORS, OPT_CHECK, OPT_META, OPT_TEMPLATE, OPT_GPU, OPT_SLOTS };

static const struct ob_option options[] = {
    {"ctx", OPT_CTX, "N", "context length for the KV cache estimate (default 4096)"},
    {"tensors", OPT_TENSORS, NULL, "also print one record per tensor"},
    {"check", OPT_CHECK, NULL, "read every tensor: sizes, NaN/Inf in floats and block scales, sha256"},
    {"meta", OPT_META, "KEY", "print the value of one metadata key as JSON and exit"},
    {"template", OPT_TEMPLATE, NULL, "include the raw chat template string"},
    {"device", 'd', "ROUTE", "also report ROUTE's device and whether the model fits on it; without MODEL: what ROUTE's probe finds"},
    {"gpu", OPT_GPU, "N", "with -d: the route's device N (default 0)"},
    {"slots", OPT_SLOTS, "N", "with -d: sequences with a KV cache of --ctx positions (default 1)"},
    OB_OPT_ROWS_SHARED,
    {0},
};

struct opts {
    uint64_t ctx;
    bool tensors, check, template;
    const char *meta;
    const char *model;
    const char *route;             /* -d: report its device */
    int gpu, slots;
};

/* the device of o->route for the model, into rec.device; *fits false when it does not fit */
static int device_facts(const struct opts *o, cJSON *rec, bool *fits)
{
    struct ob_model *m;
    struct ob_route_fit f;
    struct ob_device_opts d = {.index = o->gpu};
    int n_ctx = o->ctx > INT32_MAX ? INT32_MAX : (int)o->ctx;
    int e = ob_model_open(o->model, &m);
    if (e)
        return e;
    e = ob_route_fit(m, o->route, &d, o->slots, n_ctx, &f);
    ob_model_close(m);
    if (e)
        return e;
    cJSON *dev = cJSON_CreateObject();
    cJSON_AddStringToObject(dev, "route", o->route);
    cJSON_AddStringToObject(dev, "name", f.device);
    ob_json_add_u64(dev, "index", (uint64_t)o->gpu);
    ob_json_add_u64(dev, "memory_bytes", f.mem_bytes);
    ob_json_add_u64(dev, "weights_bytes", f.weight_bytes);
    ob_json_add_u64(dev, "slots", (uint64_t)o->slots);
    ob_json_add_u64(dev, "ctx", o->ctx);
    ob_json_add_u64(dev, "kv_bytes", f.kv_bytes);
    ob_json_add_u64(dev, "needed_bytes", f.weight_bytes + f.kv_bytes);
    cJSON_AddBoolToObject(dev, "fits", f.fits);
    cJSON_AddItemToObject(rec, "device", dev);
    *fits = f.fits;
    return 0;
}

static int fail(int err, const char *what)
{
    if (what)
        fprintf(stderr, PROG ": %s: %s\n", what, ob_errmsg());
    else
        fprintf(stderr, PROG ": %s\n", ob_errmsg());
    return ob_exit_status(err);
}

/* tokenizer.* facts; absent keys are simply left out */
static cJSON *tokenizer_facts(const struct ob_gguf *g)
{
    cJSON *t = cJSON_CreateObject();
    static const char *const strs[] = {"model", "pre"};
    for (size_t i = 0; i < 2; i++) {
        char k[64], *v;
        snprintf(k, sizeof k, "tokenizer.ggml.%s", strs[i]);
        if (ob_gguf_get_str(g, k, &v) == 0) {
            cJSON_AddStringToObject(t, strs[i], v);
            free(v);
        }
    }
    const struct ob_gguf_value *a = ob_gguf_get(g, "tokenizer.ggml.tokens");
    if (a && a->type == OB_GGUF_ARRAY)
        ob_json_add_u64(t, "n_tokens", a->arr.n);
    a = ob_gguf_get(g, "tokenizer.ggml.merges");
    if (a && a->type == OB_GGUF_ARRAY)
        ob_json_add_u64(t, "n_merges", a->arr.n);
    static const char *const ids[] = {"bos", "eos", "unknown", "padding"};
    for (size_t i = 0; i < 4; i++) {
        char k[64];
        uint32_t v;
        snprintf(k, sizeof k, "tokenizer.ggml.%s_token_id", ids[i]);
        if (ob_gguf_get_u32(g, k, &v) == 0 && v != UINT32_MAX)
            ob_json_add_u64(t, ids[i], v);
    }
    bool b;
    if (ob_gguf_get_bool(g, "tokenizer.ggml.add_bos_token", &b) == 0)
        cJSON_AddBoolToObject(t, "add_bos", b);
    return t;
}

/* name, architecture, hyper-parameters, tokenizer and chat template: GGUF and pack alike */
static void add_facts(cJSON *rec, const struct opts *o, const struct ob_gguf *g,
                      const struct ob_hparams *hp)
{
    char *name;
    if (ob_gguf_get_str(g, "general.name", &name) == 0) {
        cJSON_AddStringToObject(rec, "name", name);
        free(name);
    }
    cJSON_AddStringToObject(rec, "architecture", hp->arch);
    cJSON_AddBoolToObject(rec, "supported", hp->supported);
    cJSON_AddItemToObject(rec, "hparams", ob_hparams_json(hp));
    cJSON_AddItemToObject(rec, "tokenizer", tokenizer_facts(g));

    char *tmpl = NULL;
    int te = ob_gguf_get_str(g, "tokenizer.chat_template", &tmpl);
    cJSON *ct = cJSON_CreateObject();
    const char *builtin = te == 0 ? NULL : ob_chat_builtin(hp->arch);
    cJSON_AddStringToObject(ct, "name", ob_chat_detect(te == 0 ? tmpl : builtin));
    if (builtin)
        cJSON_AddBoolToObject(ct, "builtin", true);
    if (o->template && tmpl) {
        const struct ob_gguf_value *v = ob_gguf_get(g, "tokenizer.chat_template");
        cJSON_AddItemToObject(ct, "raw", ob_gguf_value_json(v));
    }
    free(tmpl);
    cJSON_AddItemToObject(rec, "chat_template", ct);
}

static cJSON *shape(const struct ob_gguf_tensor *t)
{
    cJSON *a = cJSON_CreateArray();
    for (uint32_t d = 0; d < t->n_dims; d++) {
        char b[32];
        snprintf(b, sizeof b, "%llu", (unsigned long long)t->ne[d]);
        cJSON_AddItemToArray(a, cJSON_CreateRaw(b));
    }
    return a;
}

static int print_meta(const struct ob_gguf *g, const char *key)
{
    const struct ob_gguf_value *v = ob_gguf_get(g, key);
    if (!v)
        return ob_seterr(OB_ENOTFOUND, "metadata key '%s' is not in the file", key);
    cJSON *j = ob_gguf_value_json(v);
    char *s = j ? ob_json_print(j) : NULL;      /* numbers exact, not cJSON's 15 digits */
    cJSON_Delete(j);
    if (!s)
        return ob_seterr(OB_ENOMEM, "out of memory");
    puts(s);
    cJSON_free(s);
    return 0;
}

/* one record per tensor of a pack: the tiles (manifest order), then the meta file's */
static int pack_tensors(const struct opts *o, const struct ob_pack *pk)
{
    const struct ob_gguf *m = ob_pack_meta(pk);
    uint64_t nt = ob_pack_n_tensors(pk), nm = ob_gguf_n_tensors(m);
    for (uint64_t i = 0; i < nt + nm; i++) {
        cJSON *tr = cJSON_CreateObject();
        cJSON_AddStringToObject(tr, "id", o->model);
        if (i < nt) {
            const struct ob_pack_tensor *t = ob_pack_tensor_at(pk, i);
            const uint64_t ne[2] = {t->k, t->n};
            cJSON_AddStringToObject(tr, "tensor", t->name);
            cJSON_AddStringToObject(tr, "type", ob_type_name(t->type));
            cJSON *a = cJSON_CreateArray();
            for (int d = 0; d < 2; d++) {
                char b[32];
                snprintf(b, sizeof b, "%llu", (unsigned long long)ne[d]);
                cJSON_AddItemToArray(a, cJSON_CreateRaw(b));
            }
            cJSON_AddItemToObject(tr, "shape", a);
            cJSON_AddStringToObject(tr, "file", t->file);
            ob_json_add_u64(tr, "offset", t->offset);
            ob_json_add_u64(tr, "bytes", t->nbytes);
            cJSON_AddStringToObject(tr, "from", t->from);
        } else {
            const struct ob_gguf_tensor *t = ob_gguf_tensor_at(m, i - nt);
            cJSON_AddStringToObject(tr, "tensor", t->name);
            cJSON_AddStringToObject(tr, "type", ob_type_name(t->type));
            cJSON_AddItemToObject(tr, "shape", shape(t));
            cJSON_AddStringToObject(tr, "file", "meta.gguf");
            ob_json_add_u64(tr, "offset", ob_gguf_data_offset(m) + t->offset);
            ob_json_add_u64(tr, "bytes", t->nbytes);
        }
        int e = ob_jsonl_write(stdout, tr);
        cJSON_Delete(tr);
        if (e)
            return ob_errprefix(e, "stdout");
    }
    return 0;
}

/* a whole number that ob_json_add_u64 wrote (raw digits) */
static uint64_t count(const cJSON *c)
{
    return cJSON_IsRaw(c) ? strtoull(c->valuestring, NULL, 10) : (uint64_t)cJSON_GetNumberValue(c);
}

/* a Q4NX pack: the same record as a GGUF's, its tiles counted as Q4NX tensors */
static int run_pack(const struct opts *o, const char *path, int *status)
{
    struct ob_pack *pk = NULL;
    struct ob_check *chk = NULL;
    cJSON *rec = NULL;
    int e;
    if ((e = ob_pack_open(path, &pk)))
        return e;
    const struct ob_gguf *m = ob_pack_meta(pk);
    const struct ob_hparams *hp = ob_pack_hparams(pk);
    if (o->meta) {
        e = print_meta(m, o->meta);
        goto out;
    }
    uint64_t nan = 0, inf = 0;
    if (o->check) {
        char *mp = NULL;
        const cJSON *mf = cJSON_GetObjectItemCaseSensitive(ob_pack_manifest(pk), "meta");
        if (asprintf(&mp, "%s/%s", path, cJSON_GetStringValue(mf)) < 0) {
            e = ob_seterr(OB_ENOMEM, "out of memory");
            goto out;
        }
        e = ob_pack_verify(pk, &nan, &inf);
        if (!e)
            e = ob_check_model(m, mp, &chk);
        free(mp);
        if (e)
            goto out;
    }
    rec = cJSON_CreateObject();
    cJSON_AddStringToObject(rec, "id", o->model);
    cJSON_AddStringToObject(rec, "format", "q4nx-pack");
    cJSON *v = cJSON_GetObjectItemCaseSensitive(ob_pack_manifest(pk), "version");
    ob_json_add_u64(rec, "version", (uint64_t)v->valuedouble);
    cJSON_AddStringToObject(rec, "path", path);
    ob_json_add_u64(rec, "file_bytes", ob_pack_bytes(pk));
    cJSON_AddStringToObject(rec, "sha256", ob_pack_sha256(pk));
    cJSON *src = cJSON_GetObjectItemCaseSensitive(ob_pack_manifest(pk), "source");
    if (src)
        cJSON_AddItemToObject(rec, "source", cJSON_Duplicate(src, true));
    add_facts(rec, o, m, hp);
    /* tensors by type: the tiles, then the meta file's */
    uint64_t nt = ob_pack_n_tensors(pk), nm = ob_gguf_n_tensors(m), params = 0, bytes = 0;
    uint64_t tile_par = 0, tile_bytes = 0;
    uint64_t by_n[OB_TYPE_COUNT] = {0}, by_bytes[OB_TYPE_COUNT] = {0}, by_par[OB_TYPE_COUNT] = {0};
    for (uint64_t i = 0; i < nt; i++) {
        const struct ob_pack_tensor *t = ob_pack_tensor_at(pk, i);
        tile_par += t->k * t->n;
        tile_bytes += t->nbytes;
    }
    for (uint64_t i = 0; i < nm; i++) {
        const struct ob_gguf_tensor *t = ob_gguf_tensor_at(m, i);
        uint64_t nel = t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
        by_n[t->type]++;
        by_bytes[t->type] += t->nbytes;
        by_par[t->type] += nel;
        params += nel;
        bytes += t->nbytes;
    }
    ob_json_add_u64(rec, "tensors", nt + nm);
    ob_json_add_u64(rec, "params", params + tile_par);
    cJSON *types = cJSON_CreateObject(), *ty = cJSON_CreateObject();
    ob_json_add_u64(ty, "tensors", nt);
    ob_json_add_u64(ty, "params", tile_par);
    ob_json_add_u64(ty, "bytes", tile_bytes);
    cJSON_AddItemToObject(types, ob_type_name(OB_Q4NX), ty);
    for (uint32_t t = 0; t < OB_TYPE_COUNT; t++) {
        if (!by_n[t])
            continue;
        ty = cJSON_CreateObject();
        ob_json_add_u64(ty, "tensors", by_n[t]);
        ob_json_add_u64(ty, "params", by_par[t]);
        ob_json_add_u64(ty, "bytes", by_bytes[t]);
        cJSON_AddItemToObject(types, ob_type_name(t), ty);
    }
    cJSON_AddItemToObject(rec, "types", types);
    /* a pack runs on the npu routes (and the ref oracle); its vectors are float */
    cJSON_AddItemToObject(rec, "unsupported_types", cJSON_CreateArray());
    uint64_t kv = hp->supported ? ob_hparams_kv_bytes(hp, o->ctx) : 0;
    cJSON *mem = cJSON_CreateObject();
    ob_json_add_u64(mem, "weights_bytes", bytes + tile_bytes);
    ob_json_add_u64(mem, "ctx", o->ctx);
    if (hp->supported) {
        ob_json_add_u64(mem, "kv_bytes", kv);
        ob_json_add_u64(mem, "total_bytes", bytes + tile_bytes + kv);
    }
    cJSON_AddItemToObject(rec, "memory", mem);
    if (chk) {
        /* the meta file's floats and the tiles' bf16 fields together; the files' sha256 were
         * compared with the manifest's (ob_pack_verify), the pack's own is the manifest's */
        cJSON *cj = ob_check_json(chk);
        nan += count(cJSON_GetObjectItemCaseSensitive(cj, "nan"));
        inf += count(cJSON_GetObjectItemCaseSensitive(cj, "inf"));
        static const char *const redo[] = {"sha256", "tensor_bytes", "nan", "inf", "ok"};
        for (size_t i = 0; i < sizeof redo / sizeof redo[0]; i++)
            cJSON_DeleteItemFromObject(cj, redo[i]);
        cJSON_AddStringToObject(cj, "sha256", ob_pack_sha256(pk));
        cJSON_AddBoolToObject(cj, "files_verified", true);
        ob_json_add_u64(cj, "tensor_bytes", bytes + tile_bytes);
        ob_json_add_u64(cj, "nan", nan);
        ob_json_add_u64(cj, "inf", inf);
        cJSON_AddBoolToObject(cj, "ok", nan + inf == 0);
        cJSON_AddItemToObject(rec, "check", cj);
        if (nan + inf)
            *status = OB_EXIT_NO;
    }
    bool fits = true;
    if (o->route && (e = device_facts(o, rec, &fits)))
        goto out;
    if (!fits)
        *status = OB_EXIT_NO;
    if ((e = ob_jsonl_write(stdout, rec))) {
        ob_errprefix(e, "stdout");
        goto out;
    }
    if (o->tensors)
        e = pack_tensors(o, pk);
out:
    cJSON_Delete(rec);
    ob_check_free(chk);
    ob_pack_close(pk);
    return e;
}

/* -d ROUTE without MODEL: what the route's probe finds */
static int run_device(const struct opts *o, int *status)
{
    bool built;
    char dev[64] = "";
    uint64_t mem = 0;
    struct ob_device_opts d = {.index = o->gpu};
    int e = ob_route_probe(o->route, &d, &built, dev, &mem);
    if (e && e != OB_EDEVICE)
        return e;
    char why[512];
    snprintf(why, sizeof why, "%s", e ? ob_errmsg() : "");
    cJSON *rec = cJSON_CreateObject();
    cJSON_AddStringToObject(rec, "id", o->route);
    cJSON_AddStringToObject(rec, "route", o->route);
    cJSON_AddBoolToObject(rec, "built", built);
    cJSON_AddBoolToObject(rec, "present", !e);
    ob_json_add_int(rec, "index", o->gpu);
    if (!e) {
        cJSON_AddStringToObject(rec, "device", dev);
        ob_json_add_u64(rec, "mem_bytes", mem);
    } else {
        cJSON_AddStringToObject(rec, "error", why);
        *status = OB_EXIT_DEVICE;
    }
    int we = ob_jsonl_write(stdout, rec);
    cJSON_Delete(rec);
    if (we)
        return ob_errprefix(we, "stdout");
    if (e)                         /* the reason on stderr too, as every command gives it */
        fprintf(stderr, PROG ": %s\n", why);
    return 0;
}

static int run(const struct opts *o, int *status)
{
    char *path = NULL;
    struct ob_gguf *g = NULL;
    cJSON *rec = NULL;
    struct ob_check *chk = NULL;
    int e;
    if ((e = ob_model_resolve(o->model, &path)))
        goto out;
    if (ob_pack_is(path)) {
        e = run_pack(o, path, status);
        goto out;
    }
    if ((e = ob_gguf_open(path, &g)))
        goto out;
    if (o->meta) {
        e = print_meta(g, o->meta);
        goto out;
    }
    struct ob_hparams hp;
    if ((e = ob_hparams_read(g, &hp))) {
        ob_errprefix(e, "%s", o->model);
        goto out;
    }
    if (o->check && (e = ob_check_model(g, path, &chk)))
        goto out;

    rec = cJSON_CreateObject();
    cJSON_AddStringToObject(rec, "id", o->model);
    cJSON_AddStringToObject(rec, "format", "gguf");
    ob_json_add_u64(rec, "version", ob_gguf_version(g));
    cJSON_AddStringToObject(rec, "path", path);
    ob_json_add_u64(rec, "file_bytes", ob_gguf_file_size(g));
    add_facts(rec, o, g, &hp);

    /* tensors by type */
    uint64_t n = ob_gguf_n_tensors(g), params = 0, bytes = 0;
    uint64_t by_n[OB_TYPE_COUNT] = {0}, by_bytes[OB_TYPE_COUNT] = {0}, by_par[OB_TYPE_COUNT] = {0};
    for (uint64_t i = 0; i < n; i++) {
        const struct ob_gguf_tensor *t = ob_gguf_tensor_at(g, i);
        uint64_t nel = t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
        params += nel;
        bytes += t->nbytes;
        by_n[t->type]++;
        by_bytes[t->type] += t->nbytes;
        by_par[t->type] += nel;
    }
    ob_json_add_u64(rec, "tensors", n);
    ob_json_add_u64(rec, "params", params);
    cJSON *types = cJSON_CreateObject(), *unsup = cJSON_CreateArray();
    for (uint32_t t = 0; t < OB_TYPE_COUNT; t++) {
        if (!by_n[t])
            continue;
        cJSON *ty = cJSON_CreateObject();
        ob_json_add_u64(ty, "tensors", by_n[t]);
        ob_json_add_u64(ty, "params", by_par[t]);
        ob_json_add_u64(ty, "bytes", by_bytes[t]);
        cJSON_AddItemToObject(types, ob_type_name(t), ty);
        if (!ob_type_supported(t))
            cJSON_AddItemToArray(unsup, cJSON_CreateString(ob_type_name(t)));
    }
    cJSON_AddItemToObject(rec, "types", types);
    cJSON_AddItemToObject(rec, "unsupported_types", unsup);

    uint64_t ctx = o->ctx, kv = hp.supported ? ob_hparams_kv_bytes(&hp, ctx) : 0;
    cJSON *mem = cJSON_CreateObject();
    ob_json_add_u64(mem, "weights_bytes", bytes);
    ob_json_add_u64(mem, "ctx", ctx);
    if (hp.supported) {
        ob_json_add_u64(mem, "kv_bytes", kv);
        ob_json_add_u64(mem, "total_bytes", bytes + kv);
    }
    cJSON_AddItemToObject(rec, "memory", mem);
    if (chk)
        cJSON_AddItemToObject(rec, "check", ob_check_json(chk));
    bool fits = true;
    if (o->route && (e = device_facts(o, rec, &fits)))
        goto out;

    if ((e = ob_jsonl_write(stdout, rec))) {
        ob_errprefix(e, "stdout");
        goto out;
    }
    if (o->tensors) {
        for (uint64_t i = 0; i < n; i++) {
            const struct ob_gguf_tensor *t = ob_gguf_tensor_at(g, i);
            cJSON *tr = cJSON_CreateObject();
            cJSON_AddStringToObject(tr, "id", o->model);
            cJSON_AddStringToObject(tr, "tensor", t->name);
            cJSON_AddStringToObject(tr, "type", ob_type_name(t->type));
            cJSON_AddItemToObject(tr, "shape", shape(t));
            ob_json_add_u64(tr, "offset", ob_gguf_data_offset(g) + t->offset);
            ob_json_add_u64(tr, "bytes", t->nbytes);
            if (chk)
                ob_check_tensor_json(chk, i, tr);
            e = ob_jsonl_write(stdout, tr);
            cJSON_Delete(tr);
            if (e) {
                ob_errprefix(e, "stdout");
                goto out;
            }
        }
    }
    if ((chk && !ob_check_ok(chk)) || !fits)
        *status = OB_EXIT_NO;
out:
    cJSON_Delete(rec);
    ob_check_free(chk);
    ob_gguf_close(g);
    free(path);
    return e;
}

int main(int argc, char **argv)
{
    struct opts o = {.ctx = 4096, .slots = 1};
    struct ob_cmdline cl = {PROG, PROG " [options] MODEL",
                            "Print the facts of a GGUF model or Q4NX pack (or an archive holding one) as JSON, or what a route's device probe finds.",
                            options};
    int c;
    while ((c = ob_cmdline_next(&cl, argc, argv)) != -1) {
        switch (c) {
        case OPT_CTX: cl.bad = !ob_opt_u64("ctx", optarg, 1, INT64_C(1) << 32, &o.ctx); break;
        case OPT_TENSORS: o.tensors = true; break;
        case OPT_CHECK: o.check = true; break;
        case OPT_META: o.meta = optarg; break;
        case OPT_TEMPLATE: o.template = true; break;
        case 'd': o.route = optarg; break;
        case OPT_GPU: cl.bad = !ob_opt_int("gpu", optarg, 0, 255, &o.gpu); break;
        case OPT_SLOTS: cl.bad = !ob_opt_int("slots", optarg, 1, 4096, &o.slots); break;
        }
    }
    if (cl.stop)
        return cli_answer(&cl);
    if (!cl.bad && !(o.route && optind == argc) && optind != argc - 1) {
        fprintf(stderr, PROG ": %s\n", optind >= argc ? "no MODEL given" : "more than one MODEL given");
        cl.bad = true;
    }
    if (cl.bad) {
        if (cl.msg[0])
            cli_bad(&cl);
        fprintf(stderr, "usage: " PROG " [options] MODEL  (see " PROG " --help)\n");
        return OB_EXIT_USAGE;
    }
    int status = OB_EXIT_OK, e;
    if (optind == argc) {
        e = run_device(&o, &status);
    } else {
        o.model = argv[optind];
        e = run(&o, &status);
    }
    if (e)
        return fail(e, NULL);
    if ((e = ob_stdout_close()))
        return fail(e, NULL);
    return status;
}
