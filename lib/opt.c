/*
 * opt.c — one option table per command gives getopt_long its tables, --help its text and
 * --list-options (used by the shell completions) its list, so the three cannot drift. Like
 * the rest of lib/ it never prints and never exits: the answers and the reasons of a bad
 * command line are handed to the command (struct ob_cmdline's answer and msg, ob_errmsg()).
 */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "1b.h"
#include "sb.h"

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

static void opt_help(struct ob_sb *b, const char *synopsis, const char *about,
                     const struct ob_option *o)
{
    ob_sb_fmt(b, "usage: %s\n", synopsis);
    if (about)
        ob_sb_fmt(b, "%s\n", about);
    ob_sb_str(b, "\noptions:\n");
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
        ob_sb_fmt(b, "  %-26s %s\n", left, o->help ? o->help : "");
    }
}

/* one option per line, "--name" or "--name=ARG", for shell completion */
static void opt_list(struct ob_sb *b, const struct ob_option *o)
{
    for (; o->name; o++) {
        if (o->val > 0 && o->val < 128)
            ob_sb_fmt(b, "-%c\n", o->val);
        ob_sb_fmt(b, "--%s%s%s\n", o->name, o->arg ? "=" : "", o->arg ? o->arg : "");
    }
}

/* the line is bad: its reason (the first one) into cl->msg */
static void cmdline_bad(struct ob_cmdline *cl, const char *why)
{
    cl->bad = true;
    if (!cl->msg[0])
        snprintf(cl->msg, sizeof cl->msg, "%s", why);
}

int ob_cmdline_next(struct ob_cmdline *cl, int argc, char **argv)
{
    if (!cl->started) {
        cl->started = true;
        /* a write to a closed pipe fails with EPIPE and the command exits 5 naming stdout, as
         * for any write that fails (1b(7)), instead of dying by the signal */
        signal(SIGPIPE, SIG_IGN);
        if (opt_build(cl->opts, &cl->longs, &cl->shorts)) {
            snprintf(cl->msg, sizeof cl->msg, "%s", ob_errmsg());
            cl->stop = true;
            cl->status = OB_EXIT_FAILURE;
            return -1;
        }
        opterr = 0;
    }
    /* the command set bad after its own option: the reason its ob_opt_* call left */
    /* (the error was cleared when the option was returned: "no error" means it left none) */
    if (cl->bad)
        cmdline_bad(cl, strcmp(ob_errmsg(), "no error") ? ob_errmsg() : "");
    int c = -1;
    if (!cl->stop && !cl->bad && cl->longs) {
        struct ob_sb b = {0};
        c = getopt_long(argc, argv, cl->shorts, cl->longs, NULL);
        switch (c) {
        case -1:
            break;
        case 'h':
            opt_help(&b, cl->synopsis, cl->about, cl->opts);
            cl->stop = true;
            break;
        case OB_OPT_VERSION:
            ob_sb_fmt(&b, "%s %s\n", cl->prog, OB_VERSION);
            cl->stop = true;
            break;
        case OB_OPT_LIST:
            opt_list(&b, cl->opts);
            cl->stop = true;
            break;
        case OB_OPT_MAX_LINE: {
            /* the process's line limit, for every reader of lines (ob_read_line) */
            uint64_t v;
            if (!ob_opt_size("max-line", optarg, 1, (uint64_t)1 << 34, &v)) {
                cmdline_bad(cl, ob_errmsg());
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
            cmdline_bad(cl, ob_errmsg());          /* the word, escaped */
            break;
        }
        default:
            ob_seterr(0, "%s", "");    /* so that a reason its check leaves is its own */
            return c;                  /* the command's own */
        }
        if (cl->stop) {
            size_t n;
            if (b.oom || !(cl->answer = ob_sb_take(&b, &n))) {
                snprintf(cl->msg, sizeof cl->msg, "out of memory");
                cl->status = OB_EXIT_FAILURE;
            }
        }
        ob_sb_free(&b);
    }
    free(cl->longs);
    free(cl->shorts);
    cl->longs = NULL;
    cl->shorts = NULL;
    return -1;
}

/* an option's integer in [lo, hi], or false with "--NAME: why" (OB_EUSAGE) */
static bool opt_i64(const char *name, const char *arg, int64_t lo, int64_t hi,
                    int64_t *out)
{
    if (ob_parse_i64(arg, lo, hi, out)) {
        ob_errprefix(OB_EUSAGE, "--%s", name);
        return false;
    }
    return true;
}

bool ob_opt_int(const char *name, const char *arg, int64_t lo, int64_t hi,
                int *out)
{
    int64_t v;
    if (!opt_i64(name, arg, lo, hi, &v))
        return false;
    *out = (int)v;
    return true;
}

bool ob_opt_u32(const char *name, const char *arg, uint32_t *out)
{
    int v;
    if (!ob_opt_int(name, arg, 1, INT32_MAX, &v))
        return false;
    *out = (uint32_t)v;
    return true;
}

bool ob_opt_u64(const char *name, const char *arg, int64_t lo, int64_t hi,
                uint64_t *out)
{
    int64_t v;
    if (!opt_i64(name, arg, lo, hi, &v))
        return false;
    *out = (uint64_t)v;
    return true;
}

bool ob_opt_num(const char *name, const char *arg, double lo, double hi,
                double *out)
{
    double v;
    if (ob_parse_f64(arg, &v) || !(v >= lo && v <= hi)) {
        ob_seterr(OB_EUSAGE, "--%s: '%s' is not a number in [%g, %g]", name, arg, lo, hi);
        return false;
    }
    *out = v;
    return true;
}

bool ob_opt_size(const char *name, const char *arg, uint64_t lo, uint64_t hi,
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
        ob_seterr(OB_EUSAGE, "--%s: '%s' is not a size from %llu to %llu bytes (K, M and G "
                  "suffixes allowed)", name, arg, (unsigned long long)lo, (unsigned long long)hi);
        return false;
    }
    *out = (uint64_t)v << shift;
    return true;
}

const struct ob_opt_word ob_opt_words_on_off[] = {
    {"on", 1}, {"off", 0}, {"true", 1}, {"false", 0}, {NULL, 0},
};

bool ob_opt_choice(const char *name, const char *arg,
                   const struct ob_opt_word *words, int *out)
{
    int n = 0;
    for (; words[n].word; n++)
        if (strcmp(arg, words[n].word) == 0) {
            *out = words[n].value;
            return true;
        }
    char list[256] = "";
    size_t len = 0;
    for (int i = 0; i < n && len < sizeof list; i++)
        len += (size_t)snprintf(list + len, sizeof list - len, "%s%s", words[i].word,
                                i + 2 < n ? ", " : i + 1 < n ? " or " : "");
    ob_seterr(OB_EUSAGE, "--%s: '%s' is not %s", name, arg, list);
    return false;
}

int ob_opt_int_list(const char *name, const char *arg, int64_t lo, int64_t hi,
                    int *out, int max)
{
    int n = 0;
    for (const char *p = arg;; p++) {
        char item[32];
        size_t len = strcspn(p, ",");
        if (n == max || len == 0 || len >= sizeof item) {
            ob_seterr(OB_EUSAGE, "--%s: '%s' is not a comma-separated list of 1 to %d numbers",
                      name, arg, max);
            return 0;
        }
        memcpy(item, p, len);
        item[len] = 0;
        if (!ob_opt_int(name, item, lo, hi, &out[n++]))
            return 0;
        p += len;
        if (!*p)
            return n;
    }
}

bool ob_opt_server(int c, const char *arg, struct ob_server_opts *so)
{
    switch (c) {
    case OB_OPT_WAIT: return ob_opt_num("wait", arg, 0, 86400, &so->wait);
    case OB_OPT_TIMEOUT:
        /* a limit always: 0 would read as "no limit" to libcurl, and as "at once" to a user */
        return ob_opt_num("timeout", arg, 0.001, 86400, &so->timeout);
    case OB_OPT_RETRIES: return ob_opt_int("retries", arg, 0, 100, &so->retries);
    }
    ob_seterr(OB_EUSAGE, "internal error: option %d is not a server option", c);
    return false;
}
