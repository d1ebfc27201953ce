/*
 * engine-open.h — what the engine's unit tests (engine.c, engine-fail.c) share: the model,
 * its context and engine opened as the commands open them (lib/local.h), and the prompt record
 * {"prompt":"Once upon a time"} read as 1b-gen reads it (BOS where the model wants one).
 */
#ifndef OB_ENGINE_OPEN_H
#define OB_ENGINE_OPEN_H

#include <stdio.h>

#include "local.h"
#include "record.h"

/* On failure: a "not ok" line and a plan, and false (the test then exits 1). */
static bool __attribute__((unused)) engine_open(const struct ob_local_params *lp,
                                                struct ob_local **L, struct ob_req *q)
{
    static const char rec_text[] = "{\"id\":\"t\",\"prompt\":\"Once upon a time\"}";
    struct ob_req_defaults d = {0};
    cJSON *rec = NULL;
    *L = NULL;
    int e = ob_json_parse(rec_text, sizeof rec_text - 1, 0, &rec);
    if (!e && !(e = ob_local_open(lp, L)) && (e = ob_req_parse(rec, (*L)->m, &d, 1, q)))
        ob_req_free(q);
    cJSON_Delete(rec);
    if (e) {
        printf("not ok 1 - open %s: %s\n1..1\n", lp->model, ob_errmsg());
        ob_local_free(*L);
        return false;
    }
    return true;
}

#endif
