/*
 * local.c — open the in-process route of a command: model, context and engine (local.h).
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "local.h"

int ob_local_open(const struct ob_local_params *p, struct ob_local **out)
{
    *out = NULL;
    if (!p->model)
        return ob_seterr(OB_EUSAGE, "no model");
    if (p->parallel < 1 || p->parallel > 256)
        return ob_seterr(OB_EUSAGE, "parallel %d is outside [1, 256]", p->parallel);
    if (p->cache_slots < 0 || p->cache_slots > 256)
        return ob_seterr(OB_EUSAGE, "cache slots %d is outside [0, 256]", p->cache_slots);
    struct ob_local *l = calloc(1, sizeof *l);
    if (!l)
        return ob_seterr(OB_ENOMEM, "out of memory");
    int e = ob_model_open(p->model, &l->m);
    if (!e) {
        const struct ob_hparams *hp = ob_model_hparams(l->m);
        int n_ctx = p->n_ctx;
        if (!n_ctx)
            n_ctx = hp->n_ctx_train && hp->n_ctx_train < OB_LOCAL_CTX_DEFAULT
                        ? (int)hp->n_ctx_train : OB_LOCAL_CTX_DEFAULT;
        long cpus = sysconf(_SC_NPROCESSORS_ONLN);
        struct ob_ctx_params cp = {
            .route = p->route ? p->route : "cpu",
            .n_threads = p->threads ? p->threads : cpus > 0 ? (int)cpus : 1,
            .n_slots = p->parallel + p->cache_slots, .n_ctx = n_ctx, .max_batch = p->max_batch,
            .dev = {.index = p->device},
        };
        e = ob_ctx_new(l->m, &cp, &l->ctx);
    }
    if (!e && p->spec == OB_SPEC_DRAFT && !p->draft_model)
        e = ob_seterr(OB_EUSAGE, "speculation by a draft model needs one (--draft MODEL)");
    if (!e && p->draft_model) {
        const struct ob_ctx_params *cp = ob_ctx_params(l->ctx);
        struct ob_drafter_params dp = {
            .model = p->draft_model, .route = p->draft_route ? p->draft_route : cp->route,
            .threads = cp->n_threads, .device = p->device, .n_slots = p->parallel,
            .n_ctx = cp->n_ctx,
        };
        e = ob_drafter_open(&dp, ob_model_tok(l->m), &l->draft);
    }
    struct ob_engine_params ep = {
        .parallel = p->parallel, .chunk = p->chunk, .spec_max = p->spec_max,
        .spec_fixed = p->spec_fixed,
        .spec = p->spec != OB_SPEC_DEFAULT ? p->spec : l->draft ? OB_SPEC_DRAFT : OB_SPEC_OFF,
        .draft = l->draft ? ob_drafter_draft_many : NULL, .draft_user = l->draft,
    };
    if (!e)
        e = ob_engine_new(l->ctx, &ep, &l->eng);
    if (e) {
        ob_local_free(l);
        return e;
    }
    *out = l;
    return 0;
}

bool ob_opt_gpu(const char *arg, struct ob_local_params *p)
{
    return ob_opt_int("gpu", arg, 0, 255, &p->device);
}

const struct ob_opt_word ob_spec_words[] = {
    {"off", OB_SPEC_OFF}, {"ngram", OB_SPEC_NGRAM}, {"draft", OB_SPEC_DRAFT}, {NULL, 0},
};

bool ob_opt_spec(int c, const char *arg, struct ob_local_params *p)
{
    if (c == OB_OPT_SPEC)
        return ob_opt_choice("spec", arg, ob_spec_words, &p->spec);
    if (c == OB_OPT_DRAFT) {
        p->draft_model = arg;
        return true;
    }
    if (c == OB_OPT_DRAFT_DEVICE) {
        p->draft_route = arg;
        return true;
    }
    if (c == OB_OPT_SPEC_FIXED) {
        p->spec_fixed = true;
        return true;
    }
    return ob_opt_int("spec-max", arg, 1, OB_SPEC_MAX, &p->spec_max);
}

bool ob_route_is_url(const char *route)
{
    return route && strstr(route, "://") != NULL;
}

int ob_opt_route(int c, const char *arg, struct ob_route_opts *o)
{
    struct ob_local_params *p = &o->lp;
    const char *local = NULL;      /* the option, when only an in-process route takes it */
    bool ok = true;
    switch (c) {
    case 'd':
    case OB_OPT_URL:
        if (c == OB_OPT_URL || ob_route_is_url(arg)) {
            o->url = arg;
        } else {
            p->route = arg;
            local = "-d";
        }
        break;
    case 't': ok = ob_opt_int("threads", arg, 1, 1024, &p->threads); local = "-t"; break;
    case OB_OPT_GPU: ok = ob_opt_gpu(arg, p); local = "--gpu"; break;
    case OB_OPT_CTX: ok = ob_opt_int("ctx", arg, 2, 1 << 24, &p->n_ctx); local = "--ctx"; break;
    case OB_OPT_CHUNK: ok = ob_opt_int("chunk", arg, 0, 1 << 20, &p->chunk); local = "--chunk"; break;
    case OB_OPT_CACHE_SLOTS:
        ok = ob_opt_int("cache-slots", arg, 0, 256, &p->cache_slots);
        local = "--cache-slots";
        break;
    case OB_OPT_SPEC: local = "--spec"; break;
    case OB_OPT_SPEC_MAX: local = "--spec-max"; break;
    case OB_OPT_DRAFT: local = "--draft"; break;
    case OB_OPT_DRAFT_DEVICE: local = "--draft-device"; break;
    case OB_OPT_SPEC_FIXED: local = "--spec-fixed"; break;
    case OB_OPT_WAIT:
    case OB_OPT_TIMEOUT:
    case OB_OPT_RETRIES: ok = ob_opt_server(c, arg, &o->srv); break;
    default: return 0;
    }
    if (c >= OB_OPT_SPEC && c <= OB_OPT_SPEC_FIXED)
        ok = ob_opt_spec(c, arg, p);
    if (local && !o->local_only)
        o->local_only = local;
    return ok ? 1 : -1;
}

int ob_route_opts_check(const struct ob_route_opts *o)
{
    if (o->url && o->local_only)
        return ob_seterr(OB_EUSAGE, "%s applies to in-process routes, not to a server URL",
                         o->local_only);
    return 0;
}

void ob_local_report(FILE *f, const char *prog, struct ob_local *l)
{
    struct ob_engine_stats s;
    ob_engine_stats(l->eng, &s);
    fprintf(f, "%s: %llu steps, %llu rows, %llu prompt tokens (%llu more from the cache), "
               "%llu generated; speculation: %llu drafted, %llu accepted (%.1f%%) in %llu "
               "verify steps\n", prog, (unsigned long long)s.steps, (unsigned long long)s.rows,
            (unsigned long long)s.tokens_prompt, (unsigned long long)s.tokens_cached,
            (unsigned long long)s.tokens_generated, (unsigned long long)s.spec_drafted,
            (unsigned long long)s.spec_accepted,
            s.spec_drafted ? 100.0 * (double)s.spec_accepted / (double)s.spec_drafted : 0.0,
            (unsigned long long)s.spec_steps);
    if (l->draft && ob_drafter_error(l->draft))
        fprintf(f, "%s: %s (its sequences went on without drafts)\n", prog,
                ob_drafter_error(l->draft));
}

void ob_local_free(struct ob_local *l)
{
    if (!l)
        return;
    ob_engine_free(l->eng);
    ob_drafter_free(l->draft);
    ob_ctx_free(l->ctx);
    ob_model_close(l->m);
    free(l);
}
