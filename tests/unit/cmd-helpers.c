/*
 * cmd-helpers.c — the library functions the commands are built on (TAP):
 *
 *   cmd-helpers DIR MODEL [MODEL...]
 *
 *  - ob_each_input: every FILE operand in order, standard input for none, an operand that
 *    cannot be opened passed on with its reason (strerror's words) and status, --keep-going
 *    or not, a callback that stops the loop or fails it; standard input is never closed;
 *  - ob_open_output and ob_output_record: "-" is standard output, a file is written and
 *    closed, an unwritable one is refused with its reason;
 *  - ob_opt_u64: the seed range every command shares (OB_SEED_MAX), the value untouched on a
 *    bad argument;
 *  - ob_local_open: the context a command gets by default (the model's training context, at
 *    most 4096; the CPUs available as threads; parallel + cache_slots slots), parameters out of
 *    range refused before the model is read, a missing model named.
 * DIR is a scratch directory (it gets a.jsonl, b.jsonl and a subdirectory d/); the defaults are
 * checked on every MODEL (give one trained on fewer than 4096 positions and one on more).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "local.h"
#include "tap.h"

struct seen {
    char log[1024];                /* "name:ok " or "name:unopened(STATUS) " per call */
    char why[256];                 /* the last failure's message */
    int stop_at;                   /* the call (1-based) that returns 1; 0: none */
    int fail_at;                   /* the call that returns OB_EIO; 0: none */
    int calls;
    bool stdin_seen;
};

static int each(void *user, const char *name, FILE *f)
{
    struct seen *s = user;
    s->calls++;
    size_t n = strlen(s->log);
    if (f) {
        snprintf(s->log + n, sizeof s->log - n, "%s:ok ", name);
        s->stdin_seen |= f == stdin;
    } else {
        snprintf(s->log + n, sizeof s->log - n, "%s:unopened ", name);
        snprintf(s->why, sizeof s->why, "%s", ob_errmsg());
    }
    if (s->calls == s->fail_at)
        return ob_seterr(OB_EIO, "failed at %s", name);
    return s->calls == s->stop_at;
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    if (f) {
        fputs(text, f);
        fclose(f);
    }
}

/* what a command that sets nothing but -m, --parallel 3 and --cache-slots 2 gets */
static void check_defaults(const char *model)
{
    struct ob_local_params lp = OB_LOCAL_PARAMS_DEFAULT;
    struct ob_local *L = NULL;
    lp.model = model;
    lp.parallel = 3;
    lp.cache_slots = 2;
    if (ob_local_open(&lp, &L)) {
        ok(0, "%s: the defaults: %s", model, ob_errmsg());
        return;
    }
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    const struct ob_ctx_params *cp = ob_ctx_params(L->ctx);
    uint32_t train = ob_model_hparams(L->m)->n_ctx_train;
    int want = train && train < OB_LOCAL_CTX_DEFAULT ? (int)train : OB_LOCAL_CTX_DEFAULT;
    struct ob_engine_stats st;
    ob_engine_stats(L->eng, &st);
    ok(cp->n_ctx == want && cp->n_slots == 5 && cp->max_batch == 512 &&
       cp->n_threads == (cpus > 0 ? cpus : 1) && strcmp(ob_ctx_route(L->ctx), "cpu") == 0 &&
       ob_engine_idle(L->eng) && st.live == 0,
       "the defaults: %d positions (the model's %u, at most %d), 3 + 2 slots, %d threads, cpu, "
       "an idle engine", cp->n_ctx, train, OB_LOCAL_CTX_DEFAULT, cp->n_threads);
    ob_local_free(L);
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: cmd-helpers DIR MODEL [MODEL...]\n");
        return 2;
    }
    if (chdir(argv[1])) {
        printf("not ok 1 - chdir %s: %s\n1..1\n", argv[1], strerror(errno));
        return 1;
    }
    write_file("a.jsonl", "{}\n");
    write_file("b.jsonl", "{}\n");
    mkdir("d", 0755);

    /* ---- ob_each_input */
    char *ops[] = {"a.jsonl", "missing.jsonl", "d", "b.jsonl"};
    struct seen s = {0};
    int unopened = -1;
    int e = ob_each_input(ops, 4, true, each, &s, &unopened);
    ok(e == 0 && strcmp(s.log, "a.jsonl:ok missing.jsonl:unopened d:unopened b.jsonl:ok ") == 0,
       "--keep-going: every operand in order, those that cannot be opened too (%s)", s.log);
    ok(unopened == OB_EXIT_DATA && strcmp(s.why, "d: is a directory") == 0,
       "a missing file and a directory: exit status 3 (%d), the reason named ('%s')",
       unopened, s.why);
    s = (struct seen){0};
    e = ob_each_input(ops, 4, false, each, &s, &unopened);
    ok(e == 0 && strcmp(s.log, "a.jsonl:ok missing.jsonl:unopened ") == 0 &&
       unopened == OB_EXIT_DATA && strcmp(s.why, "missing.jsonl: No such file or directory") == 0,
       "without --keep-going the loop ends at the first that cannot be opened ('%s')", s.why);
    s = (struct seen){.stop_at = 1};
    e = ob_each_input(ops, 4, true, each, &s, &unopened);
    ok(e == 0 && s.calls == 1 && unopened == OB_EXIT_OK,
       "a callback that returns 1 reads no more operands");
    s = (struct seen){.fail_at = 2};
    e = ob_each_input(ops, 4, true, each, &s, &unopened);
    ok(e == OB_EIO && s.calls == 2 && strcmp(ob_errmsg(), "failed at missing.jsonl") == 0,
       "a callback's error ends the loop and is returned");
    s = (struct seen){0};
    e = ob_each_input(ops, 0, false, each, &s, &unopened);
    struct stat st;
    ok(e == 0 && strcmp(s.log, "-:ok ") == 0 && s.stdin_seen && fstat(0, &st) == 0 &&
       unopened == OB_EXIT_OK, "no operands: standard input, once, left open");
    char *dashes[] = {"-", "a.jsonl"};
    s = (struct seen){0};
    e = ob_each_input(dashes, 2, false, each, &s, &unopened);
    ok(e == 0 && s.stdin_seen && fstat(0, &st) == 0 && strcmp(s.log, "-:ok a.jsonl:ok ") == 0,
       "\"-\" among the operands: standard input, not closed after it");

    /* ---- ob_open_output, ob_output_record */
    FILE *f = NULL;
    cJSON *rec = cJSON_CreateObject();
    cJSON_AddStringToObject(rec, "id", "r");
    e = ob_open_output("out.json", &f);
    e = e ? e : ob_output_record(f, "out.json", rec);
    char line[64] = "";
    FILE *back = fopen("out.json", "r");
    if (back) {
        if (!fgets(line, sizeof line, back))
            line[0] = 0;
        fclose(back);
    }
    ok(e == 0 && strcmp(line, "{\"id\":\"r\"}\n") == 0, "a report written to a file and closed");
    ok(ob_open_output("-", &f) == 0 && f == stdout, "\"-\": standard output");
    f = NULL;
    e = ob_open_output("d", &f);
    ok(e == OB_EIO && !f && strcmp(ob_errmsg(), "d: Is a directory") == 0,
       "a directory is refused before any work ('%s')", ob_errmsg());
    e = ob_open_output("/dev/full", &f);
    e = e ? e : ob_output_record(f, "/dev/full", rec);
    ok(e == OB_EIO && strstr(ob_errmsg(), "/dev/full: write: ") == ob_errmsg(),
       "a record that does not reach its file: OB_EIO, the file named ('%s')", ob_errmsg());
    cJSON_Delete(rec);

    /* ---- ob_opt_u64 and the seed range */
    uint64_t v = 7;
    bool good = ob_opt_u64("seed", "9007199254740991", 0, OB_SEED_MAX, &v);
    ok(good && v == 9007199254740991ull, "--seed 2^53 - 1 is the largest seed (OB_SEED_MAX)");
    v = 7;
    ok(!ob_opt_u64("seed", "9007199254740992", 0, OB_SEED_MAX, &v) && v == 7 &&
       !ob_opt_u64("seed", "9007199254740993", 0, OB_SEED_MAX, &v) && v == 7 &&
       !ob_opt_u64("seed", "-1", 0, OB_SEED_MAX, &v) && v == 7 &&
       !ob_opt_u64("seed", "x", 0, OB_SEED_MAX, &v) && v == 7,
       "2^53, 2^53 + 1, -1 and a word are refused, the value left as it was");

    /* ---- ob_local_open */
    struct ob_local_params lp = OB_LOCAL_PARAMS_DEFAULT;
    struct ob_local *L = NULL;
    for (int i = 2; i < argc; i++)
        check_defaults(argv[i]);
    lp.model = argv[2];
    lp.n_ctx = 64;
    lp.threads = 1;
    lp.chunk = 0;
    L = NULL;
    e = ob_local_open(&lp, &L);
    ok(!e && ob_ctx_params(L->ctx)->n_ctx == 64 && ob_ctx_params(L->ctx)->n_threads == 1,
       "--ctx and -t as given");
    ob_local_free(L);
    lp.parallel = 0;
    L = (struct ob_local *)&lp;                /* must be cleared on failure */
    e = ob_local_open(&lp, &L);
    ok(e == OB_EUSAGE && !L && strcmp(ob_errmsg(), "parallel 0 is outside [1, 256]") == 0,
       "parallel 0: refused before the model is read ('%s')", ob_errmsg());
    lp.parallel = 1;
    lp.model = "missing.gguf";
    e = ob_local_open(&lp, &L);
    ok(e == OB_ENOTFOUND && !L && strstr(ob_errmsg(), "missing.gguf") == ob_errmsg(),
       "a missing model is named ('%s')", ob_errmsg());
    lp.model = argv[2];
    lp.route = "nosuch";
    e = ob_local_open(&lp, &L);
    ok(e != 0 && !L && strstr(ob_errmsg(), "nosuch"), "an unknown route is named ('%s')",
       ob_errmsg());
    ob_local_free(NULL);
    return tap_done();
}
