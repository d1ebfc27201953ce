/*
 * types.c — names and block geometry of every type of the one list (types.h): every ggml
 * tensor type a GGUF file may name, whether or not 1b has kernels for it (a model with an
 * unsupported type still loads and is reported by name), and 1b's own (OB_Q4NX, the tile of
 * the npu route's packs, which no GGUF file may name); which of them are weight types every
 * route multiplies, and the activation formats of their dot products.
 */
#include <string.h>
#include <strings.h>

#include "1b.h"
#include "arith/arith.h"

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

/* the weight types: every route multiplies them (the cpu route's scalar table has a dot for
 * each, tests/unit/kernels.c checks) */
bool ob_type_supported(uint32_t t)
{
    switch (t) {
    OB_TYPES_WEIGHT(OB_TYPE_CASE)
        return true;
    }
    return false;
}

/* the activation format of a weight type's dot products, by its list */
int ob_type_actfmt(uint32_t t)
{
    switch (t) {
    OB_TYPES_Q8K(OB_TYPE_CASE)
        return OB_ACT_Q8K;
    OB_TYPES_A8(OB_TYPE_CASE)
        return OB_ACT_A8;
    }
    return OB_ACT_F32;
}

int ob_act_align(int fmt)
{
    return fmt == OB_ACT_Q8K ? 256 : fmt == OB_ACT_A8 ? 32 : 1;
}

size_t ob_act_row_bytes(int fmt, int k)
{
    if (fmt == OB_ACT_Q8K)
        return (size_t)(k / 256) * sizeof(struct ob_block_q8_k);
    if (fmt == OB_ACT_A8)
        return (size_t)(k / 32) * sizeof(struct ob_act_a8);
    return (size_t)k * sizeof(float);
}

bool ob_type_row_bytes(uint32_t t, uint64_t n, uint64_t *out)
{
    uint32_t blck = ob_type_blck(t);
    if (!blck || n % blck)
        return false;
    return !__builtin_mul_overflow(n / blck, (uint64_t)ob_type_size(t), out);
}
