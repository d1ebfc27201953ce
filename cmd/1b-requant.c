/*
 * 1b-requant — re-quantise a model: GGUF to GGUF of another type or mix, or to a Q4NX pack
 * for the npu routes, reporting the error each tensor took.
 *
 *   1b-requant --type TYPE [-t N] [--force] -o OUT MODEL
 *   1b-requant --list-types
 *
 * One JSON record per tensor on stdout, then a summary record; progress on stderr when it is a
 * terminal. Exit status as in 1b(7): 0 ok, 2 usage (an existing output without --force, an
 * output that is the input), 3 bad input model, 5 other failure.
 */
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "1b.h"
#include "cli.h"

#define PROG "1b-requant"

enum { OPT_TYPE = 256, OPT_FORCE, OPT_LIST_TYPES };

static const struct ob_option options[] = {
    {"type", OPT_TYPE, "TYPE", "what to make: q4nx (a pack for -d npu-sim/npu), a weight type "
                               "(f32, q8_0, q4_k, ...: every matrix) or a K-quant mix (q4_k_m, "
                               "...)"},
    {"list-types", OPT_LIST_TYPES, NULL, "list what --type takes, one a line, and exit"},
    {"output", 'o', "OUT", "the GGUF file (or pack directory) to write (required)"},
    {"threads", 't', "N", "threads (default: the online CPUs)"},
    {"force", OPT_FORCE, NULL, "replace an existing OUT (a directory only if it is a pack)"},
    OB_OPT_ROWS_SHARED,
    {0},
};

struct ctx {
    const char *model;
    bool progress;                 /* stderr is a terminal */
};

static cJSON *shape(uint32_t n_dims, const uint64_t *ne)
{
    cJSON *a = cJSON_CreateArray();
    for (uint32_t d = 0; d < n_dims; d++) {
        char b[32];
        snprintf(b, sizeof b, "%llu", (unsigned long long)ne[d]);
        cJSON_AddItemToArray(a, cJSON_CreateRaw(b));
    }
    return a;
}

/* rmse / rms, 0 for a tensor without error */
static double relative(double rmse, double rms)
{
    return rmse == 0 ? 0 : rmse / rms;
}

static void tensor_done(void *user, const struct ob_requant_tensor *t)
{
    const struct ctx *c = user;
    cJSON *r = cJSON_CreateObject();
    cJSON_AddStringToObject(r, "id", c->model);
    cJSON_AddStringToObject(r, "tensor", t->name);
    cJSON_AddStringToObject(r, "from", ob_type_name(t->from));
    cJSON_AddStringToObject(r, "to", ob_type_name(t->to));
    cJSON_AddItemToObject(r, "shape", shape(t->n_dims, t->ne));
    cJSON_AddBoolToObject(r, "copied", t->copied);
    cJSON_AddBoolToObject(r, "dequantised", !ob_type_is_float(t->from));
    ob_json_add_u64(r, "bytes_in", t->bytes_in);
    ob_json_add_u64(r, "bytes_out", t->bytes_out);
    cJSON_AddItemToObject(r, "rmse", ob_json_f64(t->rmse));
    cJSON_AddItemToObject(r, "max_abs", ob_json_f64(t->max_abs));
    cJSON_AddItemToObject(r, "rms", ob_json_f64(t->rms));
    cJSON_AddItemToObject(r, "rel_rmse", ob_json_f64(relative(t->rmse, t->rms)));
    ob_jsonl_write(stdout, r);     /* a failed write shows in ob_stdout_close */
    cJSON_Delete(r);
    if (c->progress)
        fprintf(stderr, "\r\033[K" PROG ": %llu/%llu %s %s -> %s", (unsigned long long)t->index + 1,
                (unsigned long long)t->count, t->name, ob_type_name(t->from), ob_type_name(t->to));
}

static int summary(const char *model, const char *out, const char *type,
                   const struct ob_requant_summary *s)
{
    cJSON *r = cJSON_CreateObject();
    cJSON_AddStringToObject(r, "id", model);
    cJSON_AddBoolToObject(r, "summary", true);
    cJSON_AddStringToObject(r, "output", out);
    cJSON_AddStringToObject(r, "type", type);
    ob_json_add_u64(r, "tensors", s->tensors);
    ob_json_add_u64(r, "requantised", s->requantised);
    ob_json_add_u64(r, "copied", s->copied);
    ob_json_add_u64(r, "params", s->params);
    ob_json_add_u64(r, "bytes_in", s->bytes_in);
    ob_json_add_u64(r, "bytes_out", s->bytes_out);
    cJSON_AddItemToObject(r, "rmse", ob_json_f64(s->rmse));
    cJSON_AddItemToObject(r, "max_abs", ob_json_f64(s->max_abs));
    cJSON_AddItemToObject(r, "rms", ob_json_f64(s->rms));
    cJSON_AddItemToObject(r, "rel_rmse", ob_json_f64(relative(s->rmse, s->rms)));
    cJSON_AddBoolToObject(r, "input_quantised", s->input_quantised);
    if (s->input_quantised)
        cJSON_AddStringToObject(r, "note", "the input was quantised: every tensor was "
                                "dequantised first, and errors are against those values, not "
                                "an original's");
    cJSON_AddStringToObject(r, "sha256", s->sha256);
    cJSON_AddStringToObject(r, "source_sha256", s->source_sha256);
    int e = ob_jsonl_write(stdout, r);
    cJSON_Delete(r);
    return e;
}

int main(int argc, char **argv)
{
    const char *type = NULL, *out = NULL;
    int threads = 0;
    bool force = false, list_types = false;
    struct ob_cmdline cl = {PROG, PROG " --type TYPE [options] -o OUT MODEL",
                            "Re-quantise a GGUF model into another type or mix, or into a Q4NX "
                            "pack, reporting each tensor's error as JSON.",
                            options};
    int c;
    while ((c = ob_cmdline_next(&cl, argc, argv)) != -1) {
        switch (c) {
        case OPT_TYPE: type = optarg; break;
        case 'o': out = optarg; break;
        case 't': cl.bad = !ob_opt_int("threads", optarg, 1, 1024, &threads); break;
        case OPT_FORCE: force = true; break;
        case OPT_LIST_TYPES: list_types = true; break;
        }
    }
    if (cl.stop)
        return cli_answer(&cl);
    if (!cl.bad && list_types)
        return cli_list_types(&cl, true);
    if (!cl.bad && optind != argc - 1) {
        fprintf(stderr, PROG ": %s\n", optind >= argc ? "no MODEL given" : "more than one MODEL given");
        cl.bad = true;
    }
    if (!cl.bad && !type) {
        fprintf(stderr, PROG ": no --type given\n");
        cl.bad = true;
    }
    if (!cl.bad && !out) {
        fprintf(stderr, PROG ": no output (-o OUT)\n");
        cl.bad = true;
    }
    if (cl.bad) {
        if (cl.msg[0])
            cli_bad(&cl);
        fprintf(stderr, "usage: " PROG " --type TYPE [options] -o OUT MODEL  (see " PROG " --help)\n");
        return OB_EXIT_USAGE;
    }
    if (!threads) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        threads = n > 0 ? (int)n : 1;
    }
    struct ctx x = {argv[optind], isatty(STDERR_FILENO) == 1};
    struct ob_requant_params p = {type, threads, force, tensor_done, &x};
    struct ob_requant_summary s;
    int e = ob_requant(x.model, out, &p, &s);
    if (x.progress)
        fputs("\r\033[K", stderr);
    if (!e)
        e = summary(x.model, out, type, &s);
    if (!e)
        e = ob_stdout_close();
    if (e) {
        fprintf(stderr, PROG ": %s\n", ob_errmsg());
        return ob_exit_status(e);
    }
    return OB_EXIT_OK;
}
