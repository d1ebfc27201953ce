/*
 * types.c — names and block geometry of every type of the one list (types.h): every ggml
 * tensor type a GGUF file may name, whether or not 1b has kernels for it (a model with an
 * unsupported type still loads and is reported by name), and 1b's own (OB_Q4NX, the tile of
 * the npu route's packs, which no GGUF file may name).
 */
#include <string.h>
#include <strings.h>

#include "1b.h"

struct tinfo {
    const char *name;
    uint32_t id, blck, size;
};

/* indexed by id */
#define ROW(NAME, name, id, blck, bytes, ftype) [OB_##NAME] = {#NAME, id, blck, bytes},
static const struct tinfo types[OB_TYPE_COUNT] = {OB_TYPES_GGUF(ROW)};
#undef ROW

#define ROW(NAME, name, id, blck, bytes, ftype) {#NAME, id, blck, bytes},
static const struct tinfo own[] = {OB_TYPES_PACK(ROW)};
#undef ROW

bool ob_type_known(uint32_t t)
{
    return t < OB_TYPE_COUNT && types[t].name != NULL;
}

/* the row of a known type or of one of 1b's own; NULL for other ids */
static const struct tinfo *info(uint32_t t)
{
    if (ob_type_known(t))
        return &types[t];
    for (size_t k = 0; k < sizeof own / sizeof own[0]; k++)
        if (own[k].id == t)
            return &own[k];
    return NULL;
}

const char *ob_type_name(uint32_t t)
{
    static _Thread_local char buf[32];
    const struct tinfo *i = info(t);
    if (i)
        return i->name;
    snprintf(buf, sizeof buf, "type#%u", t);
    return buf;
}

int ob_type_from_name(const char *name)
{
    for (uint32_t t = 0; t < OB_TYPE_COUNT; t++)
        if (types[t].name && strcasecmp(types[t].name, name) == 0)
            return (int)t;
    return -1;
}

uint32_t ob_type_blck(uint32_t t)
{
    const struct tinfo *i = info(t);
    return i ? i->blck : 0;
}

uint32_t ob_type_size(uint32_t t)
{
    const struct tinfo *i = info(t);
    return i ? i->size : 0;
}

bool ob_type_is_float(uint32_t t)
{
#define IS(NAME, name, id, blck, bytes, ftype) t == OB_##NAME ||
    return OB_TYPES_FLOAT(IS) t == OB_F64;
#undef IS
}

bool ob_type_row_bytes(uint32_t t, uint64_t n, uint64_t *out)
{
    uint32_t blck = ob_type_blck(t);
    if (!blck || n % blck)
        return false;
    return !__builtin_mul_overflow(n / blck, (uint64_t)ob_type_size(t), out);
}
