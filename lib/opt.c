/*
 * opt.c — one option table per command gives getopt_long its tables, --help its text and
 * --list-options (used by the shell completions) its list, so the three cannot drift.
 * Writes only to the stream it is given (and its own errors to stderr); never exits.
 */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "1b.h"

/* getopt_long tables from a NULL-terminated ob_option array (caller frees both) */
static int opt_build(const struct ob_option *o, struct option **longs, char **shorts)
{
    size_t n = 0;
    while (o[n].name)
        n++;
    struct option *l = calloc(n + 1, sizeof *l);
    char *s = calloc(3 * n + 2, 1), *p = s;
    if (!l || !s) {
        free(l);
        free(s);
        return ob_seterr(OB_ENOMEM, "out of memory");
    }
    *p++ = ':';                           /* report a missing argument as ':' */
    for (size_t i = 0; i < n; i++) {
        l[i].name = o[i].name;
        l[i].has_arg = o[i].arg ? (o[i].arg_optional ? optional_argument : required_argument)
                                : no_argument;
        l[i].val = o[i].val;
        if (o[i].val > 0 && o[i].val < 128) {
            *p++ = (char)o[i].val;
            if (o[i].arg)
                *p++ = ':';
        }
    }
    *longs = l;
    *shorts = s;
    return 0;
}

static void opt_help(FILE *f, const char *synopsis, const char *about, const struct ob_option *o)
{
    fprintf(f, "usage: %s\n", synopsis);
    if (about)
        fprintf(f, "%s\n", about);
    fputs("\noptions:\n", f);
    for (; o->name; o++) {
        if (o->hidden)
            continue;
        char left[64];
        int k = 0;
        if (o->val > 0 && o->val < 128)
            k = snprintf(left, sizeof left, "-%c, ", o->val);
        else
            k = snprintf(left, sizeof left, "    ");
        snprintf(left + k, sizeof left - k, "--%s%s%s%s", o->name,
                 o->arg ? (o->arg_optional ? "[=" : " ") : "", o->arg ? o->arg : "",
                 o->arg && o->arg_optional ? "]" : "");
        fprintf(f, "  %-26s %s\n", left, o->help ? o->help : "");
    }
}

/* one option per line, "--name" or "--name=ARG", for shell completion */
static void opt_list(FILE *f, const struct ob_option *o)
{
    for (; o->name; o++) {
        if (o->val > 0 && o->val < 128)
            fprintf(f, "-%c\n", o->val);
        fprintf(f, "--%s%s%s\n", o->name, o->arg ? "=" : "", o->arg ? o->arg : "");
    }
}

int ob_cmdline_next(struct ob_cmdline *cl, int argc, char **argv)
{
    if (!cl->started) {
        cl->started = true;
        /* a write to a closed pipe fails with EPIPE and the command exits 5 naming stdout, as
         * for any write that fails (1b(7)), instead of dying by the signal */
        signal(SIGPIPE, SIG_IGN);
        if (opt_build(cl->opts, &cl->longs, &cl->shorts)) {
            fprintf(stderr, "%s: %s\n", cl->prog, ob_errmsg());
            cl->stop = true;
            cl->status = OB_EXIT_FAILURE;
            return -1;
        }
        opterr = 0;
    }
    int c = -1;
    if (!cl->stop && !cl->bad && cl->longs) {
        c = getopt_long(argc, argv, cl->shorts, cl->longs, NULL);
        switch (c) {
        case -1:
            break;
        case 'h':
            opt_help(stdout, cl->synopsis, cl->about, cl->opts);
            cl->stop = true;
            break;
        case OB_OPT_VERSION:
            printf("%s %s\n", cl->prog, OB_VERSION);
            cl->stop = true;
            break;
        case OB_OPT_LIST:
            opt_list(stdout, cl->opts);
            cl->stop = true;
            break;
        case OB_OPT_MAX_LINE: {
            /* the process's line limit, for every reader of lines (ob_read_line) */
            uint64_t v;
            if (!ob_opt_size(cl->prog, "max-line", optarg, 1, (uint64_t)1 << 34, &v)) {
                cl->bad = true;
                break;
            }
            ob_set_max_line((size_t)v);
            return ob_cmdline_next(cl, argc, argv);
        }
        case ':':
        case '?': {
            /* the word getopt stopped at: a short option inside a cluster (-qx) by itself */
            char one[3] = {'-', (char)optopt, 0};
            const char *w = argv[optind - 1];
            if (optopt > 0 && optopt < 128 && strncmp(w, "--", 2) != 0)
                w = one;
            ob_seterr(0, c == ':' ? "option '%s' needs an argument" : "unknown option '%s'", w);
            fprintf(stderr, "%s: %s\n", cl->prog, ob_errmsg());    /* the word, escaped */
            cl->bad = true;
            break;
        }
        default:
            return c;                  /* the command's own */
        }
        /* an answer that did not reach standard output is a failure (exit 5), not a success */
        if (cl->stop && !cl->status) {
            errno = 0;
            if (fflush(stdout) != 0 || ferror(stdout)) {
                fprintf(stderr, "%s: stdout: %s\n", cl->prog,
                        errno ? strerror(errno) : "write error");
                cl->status = OB_EXIT_FAILURE;
            }
        }
    }
    free(cl->longs);
    free(cl->shorts);
    cl->longs = NULL;
    cl->shorts = NULL;
    return -1;
}

/* an option's integer in [lo, hi], or false after "PROG: --NAME: why" */
static bool opt_i64(const char *prog, const char *name, const char *arg, int64_t lo, int64_t hi,
                    int64_t *out)
{
    if (ob_parse_i64(arg, lo, hi, out)) {
        fprintf(stderr, "%s: --%s: %s\n", prog, name, ob_errmsg());
        return false;
    }
    return true;
}

bool ob_opt_int(const char *prog, const char *name, const char *arg, int64_t lo, int64_t hi,
                int *out)
{
    int64_t v;
    if (!opt_i64(prog, name, arg, lo, hi, &v))
        return false;
    *out = (int)v;
    return true;
}

bool ob_opt_u32(const char *prog, const char *name, const char *arg, uint32_t *out)
{
    int v;
    if (!ob_opt_int(prog, name, arg, 1, INT32_MAX, &v))
        return false;
    *out = (uint32_t)v;
    return true;
}

bool ob_opt_u64(const char *prog, const char *name, const char *arg, int64_t lo, int64_t hi,
                uint64_t *out)
{
    int64_t v;
    if (!opt_i64(prog, name, arg, lo, hi, &v))
        return false;
    *out = (uint64_t)v;
    return true;
}

bool ob_opt_num(const char *prog, const char *name, const char *arg, double lo, double hi,
                double *out)
{
    double v;
    if (ob_parse_f64(arg, &v) || !(v >= lo && v <= hi)) {
        fprintf(stderr, "%s: --%s: '%s' is not a number in [%g, %g]\n", prog, name, arg, lo, hi);
        return false;
    }
    *out = v;
    return true;
}

bool ob_opt_size(const char *prog, const char *name, const char *arg, uint64_t lo, uint64_t hi,
                 uint64_t *out)
{
    static const char suffixes[] = "kKmMgG";
    char num[32];
    size_t n = strlen(arg);
    int shift = 0;
    const char *suffix = n ? strchr(suffixes, arg[n - 1]) : NULL;
    if (suffix) {
        shift = 10 * (1 + (int)(suffix - suffixes) / 2);     /* K 10, M 20, G 30 */
        n--;
    }
    int64_t v = -1;
    if (n && n < sizeof num) {
        memcpy(num, arg, n);
        num[n] = 0;
        if (ob_parse_i64(num, 0, INT64_MAX >> shift, &v))
            v = -1;
    }
    if (v < 0 || (uint64_t)v << shift < lo || (uint64_t)v << shift > hi) {
        fprintf(stderr, "%s: --%s: '%s' is not a size from %llu to %llu bytes (K, M and G "
                "suffixes allowed)\n", prog, name, arg, (unsigned long long)lo,
                (unsigned long long)hi);
        return false;
    }
    *out = (uint64_t)v << shift;
    return true;
}

const struct ob_opt_word ob_opt_words_on_off[] = {
    {"on", 1}, {"off", 0}, {"true", 1}, {"false", 0}, {NULL, 0},
};

bool ob_opt_choice(const char *prog, const char *name, const char *arg,
                   const struct ob_opt_word *words, int *out)
{
    int n = 0;
    for (; words[n].word; n++)
        if (strcmp(arg, words[n].word) == 0) {
            *out = words[n].value;
            return true;
        }
    fprintf(stderr, "%s: --%s: '%s' is not ", prog, name, arg);
    for (int i = 0; i < n; i++)
        fprintf(stderr, "%s%s", words[i].word, i + 2 < n ? ", " : i + 1 < n ? " or " : "\n");
    return false;
}

int ob_opt_int_list(const char *prog, const char *name, const char *arg, int64_t lo, int64_t hi,
                    int *out, int max)
{
    int n = 0;
    for (const char *p = arg;; p++) {
        char item[32];
        size_t len = strcspn(p, ",");
        if (n == max || len == 0 || len >= sizeof item) {
            fprintf(stderr, "%s: --%s: '%s' is not a comma-separated list of 1 to %d numbers\n",
                    prog, name, arg, max);
            return 0;
        }
        memcpy(item, p, len);
        item[len] = 0;
        if (!ob_opt_int(prog, name, item, lo, hi, &out[n++]))
            return 0;
        p += len;
        if (!*p)
            return n;
    }
}

bool ob_opt_server(const char *prog, int c, const char *arg, struct ob_server_opts *so)
{
    switch (c) {
    case OB_OPT_WAIT: return ob_opt_num(prog, "wait", arg, 0, 86400, &so->wait);
    case OB_OPT_TIMEOUT:
        /* a limit always: 0 would read as "no limit" to libcurl, and as "at once" to a user */
        return ob_opt_num(prog, "timeout", arg, 0.001, 86400, &so->timeout);
    case OB_OPT_RETRIES: return ob_opt_int(prog, "retries", arg, 0, 100, &so->retries);
    }
    fprintf(stderr, "%s: internal error: option %d is not a server option\n", prog, c);
    return false;
}
