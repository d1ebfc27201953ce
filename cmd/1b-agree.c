/*
 * 1b-agree — compare result-record streams: are they the same to the bit, and how far apart.
 *
 *   1b-agree [options] A [B [C...]]       (files of result records; "-" is standard input)
 *
 * Each input is a route (or a run of one). Records are paired by id (and repeat index); every
 * input's repeats of one id must be bitwise identical; every pair of inputs is compared over
 * the ids both have (lib/agree.h defines aligned and common positions, the token match and
 * exact-bit rates, max and mean |dlogp| over common positions, and the first divergence with
 * both routes' top-2 margins). A table goes to standard output; --json FILE writes the full
 * report.
 *
 * Exit status (the field tool's, kept): 0 every input repeatable and every pair exact (or,
 * with gates, within them); 1 a difference, a non-repeatable input, records without
 * log-probabilities, or ids missing from one side; 2 an input could not be read, a usage
 * error, or any other trouble (such as a failed write).
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "1b.h"
#include "agree.h"
#include "cli.h"

#define PROG "1b-agree"

enum { OPT_MATCH_BY = 256, OPT_MAX_ABS, OPT_MEAN_ABS, OPT_MIN_MATCH, OPT_ALL_REPEATS, OPT_JSON };

static const struct ob_option options[] = {
    {"match-by", OPT_MATCH_BY, "id|text", "pair tokens by id (default) or by text (routes "
                                          "without ids)"},
    {"max-abs", OPT_MAX_ABS, "X", "gate: pass a pair when max |dlogp| <= X (not only when exact)"},
    {"mean-abs", OPT_MEAN_ABS, "Y", "gate: pass a pair when mean |dlogp| <= Y"},
    {"min-match", OPT_MIN_MATCH, "R", "gate: pass a pair only when its token match rate >= R"},
    {"all-repeats", OPT_ALL_REPEATS, NULL, "compare every repeat index both inputs have, not "
                                           "only each side's lowest"},
    OB_OPT_ROW_JSON(OPT_JSON),
    {"verbose", 'v', NULL, "list every compared record, not only the divergent ones"},
    {"quiet", 'q', NULL, "print nothing; the exit status says it"},
    OB_OPT_ROW_MAX_LINE,
    OB_OPT_ROWS_SHARED,
    {0},
};

#define EXIT_TROUBLE 2

/* one input (ob_each_input) into the next set; one that cannot be opened or read ends the run */
static int read_input(void *user, const char *name, FILE *f)
{
    struct ob_agree_set ***next = user;
    if (!f)
        return 1;
    return ob_agree_read(f, name, (*next)++);
}

static int usage_error(const char *msg)
{
    fprintf(stderr, PROG ": %s\nusage: " PROG " [options] A [B [C...]]  (see " PROG
            " --help)\n", msg);
    return EXIT_TROUBLE;
}

/* ---- the table -------------------------------------------------------------------------------- */

static const cJSON *get(const cJSON *o, const char *k)
{
    return cJSON_GetObjectItemCaseSensitive(o, k);
}

static double num(const cJSON *o, const char *k)
{
    const cJSON *v = get(o, k);
    if (cJSON_IsNumber(v))
        return v->valuedouble;
    if (cJSON_IsRaw(v))
        return strtod(v->valuestring, NULL);
    return 0;
}

static bool is_null(const cJSON *o, const char *k)
{
    const cJSON *v = get(o, k);
    return !v || cJSON_IsNull(v);
}

static const char *str(const cJSON *o, const char *k)
{
    const cJSON *v = get(o, k);
    return cJSON_IsString(v) ? v->valuestring : "";
}

/* a token of the report: 220 " the" -0.2097 (margin 0.33) */
static void put_token(FILE *f, const cJSON *t, bool margin)
{
    if (cJSON_IsString(t)) {
        fprintf(f, "(%s)", t->valuestring);
        return;
    }
    if (!is_null(t, "id"))
        fprintf(f, "%.0f ", num(t, "id"));
    if (get(t, "text")) {
        char *q = cJSON_PrintUnformatted(get(t, "text"));
        fprintf(f, "%s", q ? q : "?");
        cJSON_free(q);
    }
    if (!margin) {
        if (!is_null(t, "logprob"))
            fprintf(f, " %.9g", num(t, "logprob"));
        return;
    }
    if (is_null(t, "margin"))
        fprintf(f, " margin ?");
    else
        fprintf(f, " margin %.4g", num(t, "margin"));
}

static void rate(FILE *f, const cJSON *o, const char *k, int width)
{
    if (is_null(o, k))
        fprintf(f, " %*s", width, "-");
    else
        fprintf(f, " %*.3f", width, num(o, k));
}

static void sci(FILE *f, const cJSON *o, const char *k, int width)
{
    if (is_null(o, k))
        fprintf(f, " %*s", width, "-");
    else if (num(o, k) == 0)
        fprintf(f, " %*s", width, "0");
    else
        fprintf(f, " %*.3e", width, num(o, k));
}

static void table(FILE *f, const cJSON *rep, bool verbose)
{
    const cJSON *ins = get(rep, "inputs"), *pairs = get(rep, "pairs"), *x;
    fprintf(f, "inputs\n");
    cJSON_ArrayForEach(x, ins) {
        const cJSON *rp = get(x, "repeatable");
        fprintf(f, "  %-2s %s  route %s: %.0f records, %.0f tokens, repeats %.0f, repeatable %s",
                str(x, "name"), str(x, "file"), is_null(x, "route") ? "?" : str(x, "route"),
                num(x, "records"), num(x, "tokens"), num(x, "repeats"),
                cJSON_IsNull(rp) ? "-" : cJSON_IsTrue(rp) ? "yes" : "NO");
        fprintf(f, ", not-float32 %.0f", num(x, "nonf32_values"));
        if (num(x, "records") == 0)
            fprintf(f, ", NO RECORDS");
        if (num(x, "records_without_logprobs") > 0)
            fprintf(f, ", WITHOUT LOGPROBS %.0f", num(x, "records_without_logprobs"));
        if (num(x, "tokens_without_id") > 0)
            fprintf(f, ", tokens without id %.0f", num(x, "tokens_without_id"));
        fputc('\n', f);
        const cJSON *d;
        cJSON_ArrayForEach(d, get(x, "not_repeatable"))
            fprintf(f, "     id %s repeat %.0f differs from repeat %.0f at position %.0f\n",
                    str(d, "id"), num(d, "repeat"), num(d, "against"), num(d, "pos"));
        cJSON_ArrayForEach(d, get(x, "errors"))
            fprintf(f, "     id %s: %s\n", str(d, "id"), str(d, "error"));
    }
    if (!cJSON_GetArraySize(pairs)) {
        fprintf(f, "verdict: %s\n", str(rep, "verdict"));
        return;
    }
    fprintf(f, "pairs (match by %s)\n", str(rep, "match_by"));
    fprintf(f, "  %-6s %7s %8s %8s %6s %9s %10s %11s  %s\n", "pair", "records", "aligned",
            "common", "match", "exact-bit", "max|dlogp|", "mean|dlogp|", "verdict");
    cJSON_ArrayForEach(x, pairs) {
        fprintf(f, "  %-6s %7.0f %8.0f %8.0f", str(x, "pair"), num(x, "records"),
                num(x, "aligned"), num(x, "common"));
        rate(f, x, "token_match", 6);
        rate(f, x, "exact_bit_rate", 9);
        sci(f, x, "max_abs_dlogp", 10);
        sci(f, x, "mean_abs_dlogp", 11);
        bool gated = cJSON_GetArraySize(get(rep, "gates")) > 0;
        const char *v = cJSON_IsTrue(get(x, "exact")) ? "exact"
                        : cJSON_IsTrue(get(x, "pass")) ? "within gates"
                        : gated ? "outside gates" : "differ";
        fprintf(f, "  %s", v);
        if (num(x, "only_a") > 0 || num(x, "only_b") > 0)
            fprintf(f, " (ids only in %s: %.0f, only in %s: %.0f)", str(x, "a"), num(x, "only_a"),
                    str(x, "b"), num(x, "only_b"));
        fputc('\n', f);
    }
    cJSON_ArrayForEach(x, pairs) {
        const cJSON *m = get(x, "max_at");
        if (!cJSON_IsObject(m) || num(x, "max_abs_dlogp") == 0)
            continue;
        fprintf(f, "  %s largest |dlogp| at id %s position %.0f: ", str(x, "pair"), str(m, "id"),
                num(m, "pos"));
        put_token(f, get(m, "a"), false);
        fprintf(f, " (%s) vs %.9g (%s)\n", str(x, "a"), num(get(m, "b"), "logprob"), str(x, "b"));
    }
    bool head = false;
    cJSON_ArrayForEach(x, pairs) {
        const cJSON *p;
        int shown = 0, left = 0;
        cJSON_ArrayForEach(p, get(x, "prompts")) {
            const cJSON *d = get(p, "first_divergence");
            if (cJSON_IsNull(d) && !verbose)
                continue;
            if (!verbose && shown >= 10) {
                left++;
                continue;
            }
            if (!head) {
                fprintf(f, "first divergence (each route's top-2 margin there)\n");
                head = true;
            }
            shown++;
            fprintf(f, "  %s id %s", str(x, "pair"), str(p, "id"));
            if (num(p, "repeat") > 0)
                fprintf(f, " repeat %.0f", num(p, "repeat"));
            if (cJSON_IsNull(d)) {
                fprintf(f, ": none (%.0f positions, %.0f exact)\n", num(p, "aligned"),
                        num(p, "exact_bits"));
                continue;
            }
            fprintf(f, " position %.0f of %.0f/%.0f: %s ", num(d, "pos"), num(p, "len_a"),
                    num(p, "len_b"), str(x, "a"));
            put_token(f, get(d, "a"), true);
            fprintf(f, ", %s ", str(x, "b"));
            put_token(f, get(d, "b"), true);
            fputc('\n', f);
        }
        if (left)
            fprintf(f, "  %s ... %d more (-v lists them all, --json has them)\n", str(x, "pair"),
                    left);
    }
    fprintf(f, "verdict: %s\n", str(rep, "verdict"));
}

/* ---- main --------------------------------------------------------------------------------------- */

int main(int argc, char **argv)
{
    struct ob_agree_opts o = {.match = OB_MATCH_ID, .max_abs = -1, .mean_abs = -1,
                              .min_match = -1};
    const char *json = NULL;
    bool quiet = false, verbose = false;
    struct ob_cmdline cl = {PROG, PROG " [options] A [B [C...]]",
                            "Compare result records (files, - for standard input): repetition within "
                            "each, agreement between each pair.\nExit 0: all exact (or within the "
                            "gates); 1: a difference; 2: an input could not be read.",
                            options};
    int c;
    while ((c = ob_cmdline_next(&cl, argc, argv)) != -1) {
        switch (c) {
        case OPT_MATCH_BY:
            cl.bad = !ob_opt_choice("match-by", optarg, ob_agree_match_words, &o.match);
            break;
        case OPT_MAX_ABS: cl.bad = !ob_opt_num("max-abs", optarg, 0, INFINITY, &o.max_abs); o.gated = true; break;
        case OPT_MEAN_ABS: cl.bad = !ob_opt_num("mean-abs", optarg, 0, INFINITY, &o.mean_abs); o.gated = true; break;
        case OPT_MIN_MATCH:
            cl.bad = !ob_opt_num("min-match", optarg, 0, INFINITY, &o.min_match) || o.min_match > 1;
            if (o.min_match > 1)
                ob_seterr(OB_EUSAGE, "--min-match: '%s' is above 1", optarg);
            o.gated = true;
            break;
        case OPT_ALL_REPEATS: o.all_repeats = true; break;
        case OPT_JSON: json = optarg; break;
        case 'v': verbose = true; break;
        case 'q': quiet = true; break;
        }
    }
    if (cl.stop)
        return cli_answer(&cl) ? EXIT_TROUBLE : 0;
    if (cl.bad)
        return usage_error(cli_reason(&cl));
    int n = argc - optind;
    if (n < 1)
        return usage_error("nothing to compare");
    int stdin_uses = 0;
    for (int i = optind; i < argc; i++)
        stdin_uses += strcmp(argv[i], "-") == 0;
    if (stdin_uses > 1)
        return usage_error("standard input (-) can be read only once");

    /* the report's file is opened before any work, so that an unwritable one is found at once
     * (and one that is also an input is refused before it is emptied) */
    bool json_out = json && strcmp(json, "-") == 0;
    struct stat js, is;
    if (json && !json_out && stat(json, &js) == 0)
        for (int i = optind; i < argc; i++)
            if (strcmp(argv[i], "-") != 0 && stat(argv[i], &is) == 0 && is.st_dev == js.st_dev &&
                is.st_ino == js.st_ino)
                return usage_error("--json names one of the inputs");
    FILE *jf = NULL;
    if (json && ob_open_output(json, &jf)) {
        fprintf(stderr, PROG ": %s\n", ob_errmsg());
        return EXIT_TROUBLE;
    }
    struct ob_agree_set **sets = calloc((size_t)n, sizeof *sets);
    if (!sets)
        return EXIT_TROUBLE;
    int status = 0, unopened;
    bool out_failed = false;
    struct ob_agree_set **next = sets;
    if (ob_each_input(argv + optind, n, false, read_input, &next, &unopened) || unopened) {
        fprintf(stderr, PROG ": %s\n", ob_errmsg());
        status = EXIT_TROUBLE;
    }
    cJSON *rep = NULL;
    bool differs = false;
    if (!status) {
        int e = ob_agree_compare(sets, n, &o, &rep, &differs);
        if (e) {
            fprintf(stderr, PROG ": %s\n", ob_errmsg());
            status = EXIT_TROUBLE;
        }
    }
    if (!status) {
        /* a route that reports no ids cannot be compared by id: say so rather than report
         * "nothing in common" */
        const cJSON *p;
        cJSON_ArrayForEach(p, get(rep, "pairs"))
            if (o.match == OB_MATCH_ID && num(p, "tokens_without_id") > 0 && !quiet) {
                ob_seterr(0, "%s: tokens without ids never match by id; --match-by text "
                          "compares them", str(p, "pair"));    /* escaped */
                fprintf(stderr, PROG ": %s\n", ob_errmsg());
            }
        if (jf) {
            int e = ob_output_record(jf, json, rep);
            jf = NULL;
            if (e) {
                fprintf(stderr, PROG ": %s\n", ob_errmsg());
                out_failed = json_out;
                status = EXIT_TROUBLE;
            }
            if (json_out)
                quiet = true;              /* the table would mix with the JSON */
        }
        if (!quiet && !status)
            table(stdout, rep, verbose);
        if (!status)
            status = differs ? 1 : 0;
    }
    cJSON_Delete(rep);
    for (int i = 0; i < n; i++)
        ob_agree_set_free(sets[i]);
    free(sets);
    if (jf && !json_out)                   /* not written: the run failed first */
        fclose(jf);
    if (ob_stdout_close()) {
        if (!out_failed)
            fprintf(stderr, PROG ": %s\n", ob_errmsg());
        return EXIT_TROUBLE;
    }
    return status;
}
