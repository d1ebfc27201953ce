/*
 * opt.c — one option table per command gives getopt_long its tables, --help its text and
 * --list-options (used by the shell completions) its list, so the three cannot drift.
 * Writes only to the stream it is given; never exits.
 */
#include <getopt.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "1b.h"

int ob_opt_build(const struct ob_option *o, struct option **longs, char **shorts)
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

void ob_opt_help(FILE *f, const char *synopsis, const char *about, const struct ob_option *o)
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
        snprintf(left + k, sizeof left - k, "--%s%s%s%s%s", o->name,
                 o->arg ? (o->arg_optional ? "[=" : " ") : "", o->arg ? o->arg : "",
                 o->arg && o->arg_optional ? "]" : "", "");
        fprintf(f, "  %-26s %s\n", left, o->help ? o->help : "");
    }
}

void ob_opt_list(FILE *f, const struct ob_option *o)
{
    for (; o->name; o++) {
        if (o->val > 0 && o->val < 128)
            fprintf(f, "-%c\n", o->val);
        fprintf(f, "--%s%s%s\n", o->name, o->arg ? "=" : "", o->arg ? o->arg : "");
    }
}

int ob_opt_shared(int c, const char *prog, const struct ob_option *opts, char **argv)
{
    switch (c) {
    case OB_OPT_VERSION:
        printf("%s %s\n", prog, OB_VERSION);
        return 0;
    case OB_OPT_LIST:
        ob_opt_list(stdout, opts);
        return 0;
    case ':':
        fprintf(stderr, "%s: option '%s' needs an argument\n", prog, argv[optind - 1]);
        return OB_EXIT_USAGE;
    }
    fprintf(stderr, "%s: unknown option '%s'\n", prog, argv[optind - 1]);
    return OB_EXIT_USAGE;
}

bool ob_opt_int(const char *prog, const char *name, const char *arg, int64_t lo, int64_t hi,
                int *out)
{
    int64_t v;
    if (ob_parse_i64(arg, lo, hi, &v)) {
        fprintf(stderr, "%s: --%s: %s\n", prog, name, ob_errmsg());
        return false;
    }
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
