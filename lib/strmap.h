/*
 * strmap.h — string -> int64 hash map for vocabularies and other large string sets.
 * Keys are arbitrary bytes (length given), copied on insert. Not thread-safe for writers;
 * any number of concurrent readers once filled.
 */
#ifndef OB_STRMAP_H
#define OB_STRMAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct ob_strmap;
struct ob_strmap *ob_strmap_new(size_t expect);
void ob_strmap_free(struct ob_strmap *m);
/* 0 inserted, 1 key existed (value replaced only if replace), -1 out of memory */
int ob_strmap_put(struct ob_strmap *m, const char *key, size_t len, int64_t val, bool replace);
bool ob_strmap_get(const struct ob_strmap *m, const char *key, size_t len, int64_t *val);
size_t ob_strmap_size(const struct ob_strmap *m);

#endif
