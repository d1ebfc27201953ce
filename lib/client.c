/*
 * client.c — the request interface (client.h): open the route a command names, and hand each
 * call to its implementation (client-local.c in process, net/client-oai.c on a server).
 */
#include <stdlib.h>

#include "client.h"

int ob_client_open(const struct ob_client_params *p, struct ob_client **out)
{
    *out = NULL;
    return p->r->url ? ob_client_open_oai(p, out) : ob_client_open_local(p, out);
}

void *ob_client_new(size_t size, const struct ob_client_ops *ops, const struct ob_client_params *p)
{
    struct ob_client *c = calloc(1, size);
    if (!c)
        return NULL;
    c->ops = ops;
    c->p = *p;
    c->r = *p->r;
    c->p.r = &c->r;
    return c;
}

void ob_client_close(struct ob_client *c)
{
    if (c)
        c->ops->close(c);
}

const char *ob_client_route(const struct ob_client *c)
{
    return c->route;
}

const char *ob_client_model(const struct ob_client *c)
{
    return c->model;
}

struct ob_model *ob_client_local_model(const struct ob_client *c)
{
    return c->local;
}

const char *ob_client_note(const struct ob_client *c)
{
    return c->note;
}

bool ob_client_refused(int e)
{
    return e == OB_EFORMAT || e == OB_ERANGE || e == OB_EUNSUPP || e == OB_EUSAGE ||
           e == OB_ENOTFOUND;
}

int ob_client_submit(struct ob_client *c, const struct ob_client_req *q, uint64_t *handle)
{
    return c->ops->submit(c, q, handle);
}

void ob_client_cancel(struct ob_client *c, uint64_t handle)
{
    c->ops->cancel(c, handle);
}

int ob_client_score(struct ob_client *c, const struct ob_client_score *s)
{
    return c->ops->score(c, s);
}

int ob_client_poll(struct ob_client *c, double wait_s)
{
    return c->ops->poll(c, wait_s);
}

int ob_client_in_flight(const struct ob_client *c)
{
    return c->in_flight;
}

int ob_client_window(const struct ob_client *c)
{
    return c->local ? 2 * c->p.parallel : c->p.parallel;
}

void ob_client_stats(const struct ob_client *c, struct ob_client_stats *s)
{
    c->ops->stats(c, s);
}

void ob_client_report(const struct ob_client *c, FILE *f, const char *prog, bool verbose)
{
    c->ops->report(c, f, prog, verbose);
}

int ob_client_release(struct ob_client *c, const cJSON *rec, int width, int rounds,
                      ob_client_copy_fn fn, void *user)
{
    if (c->in_flight)
        return ob_seterr(OB_EUSAGE, "the barrier needs an idle client");
    return c->ops->release(c, rec, width, rounds, fn, user);
}
