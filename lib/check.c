/*
 * check.c — read every byte of every tensor and count non-finite values: float elements of
 * F32/F16/BF16/F64 tensors, and the fp16/f32 scale fields of quantised blocks (a NaN scale
 * poisons a whole block however valid its quants are). Also the file's sha256.
 *
 * Scale fields are located by byte offset inside each block: offsetof on the block layouts in
 * lib/arith/blocks.h where 1b has them, the ggml layouts' offsets for the types it only reads.
 */
#include <stdlib.h>
#include <string.h>

#include <stddef.h>

#include "1b.h"
#include "arith/blocks.h"

struct tstat {
    uint64_t values;               /* elements or scale fields examined */
    uint64_t nan, inf;
    bool scales_checked;
};

struct ob_check {
    char sha256[65];
    uint64_t n;
    struct tstat *t;
    uint64_t nan, inf, bytes;
};

/* fp16 scale offsets within a block, per type; n == 0: the type's scales are not checked */
#define OFF(t, f) ((uint8_t)offsetof(struct ob_block_##t, f))
#define OFF_(t, f) OFF(t, f),
#define ONE_(t, f) + 1
/* a quantised weight type of the list (types.h): the fields blocks.h names */
#define ROW(NAME, name, id, blck, bytes, ftype)                                     \
    {OB_##NAME, 0 OB_FP16_SCALES_##name(ONE_), {OB_FP16_SCALES_##name(OFF_)}},
static const struct { uint32_t type; uint8_t n; uint8_t off[2]; } fp16_scales[] = {
    OB_TYPES_QUANT(ROW)
    {OB_Q8_1, 2, {OFF(q8_1, d), OFF(q8_1, s)}},
    /* types 1b reads but has no layouts for: the fp16 scale offsets of ggml's blocks */
    {OB_IQ2_XXS, 1, {0}},
    {OB_IQ2_XS, 1, {0}},   {OB_IQ3_XXS, 1, {0}},  {OB_IQ1_S, 1, {0}},    {OB_IQ4_NL, 1, {0}},
    {OB_IQ3_S, 1, {0}},    {OB_IQ2_S, 1, {0}},    {OB_IQ4_XS, 1, {0}},   {OB_TQ1_0, 1, {52}},
    {OB_TQ2_0, 1, {64}},
};
#undef ROW

static void count_h16(uint16_t h, struct tstat *s)      /* IEEE half */
{
    if ((h & 0x7c00) == 0x7c00) {
        if (h & 0x03ff)
            s->nan++;
        else
            s->inf++;
    }
}

static void count_f32(uint32_t u, struct tstat *s)
{
    if ((u & 0x7f800000u) == 0x7f800000u) {
        if (u & 0x007fffffu)
            s->nan++;
        else
            s->inf++;
    }
}

static void check_tensor(const struct ob_gguf_tensor *t, struct tstat *s)
{
    const uint8_t *p = t->data;
    uint64_t nb = t->nbytes;
    s->scales_checked = true;
    switch (t->type) {
    case OB_F32:
        for (uint64_t i = 0; i < nb; i += 4) {
            uint32_t u;
            memcpy(&u, p + i, 4);
            count_f32(u, s);
        }
        s->values = nb / 4;
        return;
    case OB_F64:
        for (uint64_t i = 0; i < nb; i += 8) {
            uint64_t u;
            memcpy(&u, p + i, 8);
            if ((u & 0x7ff0000000000000ull) == 0x7ff0000000000000ull)
                (u & 0x000fffffffffffffull) ? s->nan++ : s->inf++;
        }
        s->values = nb / 8;
        return;
    case OB_F16:
    case OB_BF16:
        for (uint64_t i = 0; i < nb; i += 2) {
            uint16_t h;
            memcpy(&h, p + i, 2);
            if (t->type == OB_F16)
                count_h16(h, s);
            else
                count_f32((uint32_t)h << 16, s);
        }
        s->values = nb / 2;
        return;
    case OB_Q8_K: {                    /* f32 scale first */
        uint32_t bs = ob_type_size(t->type);
        for (uint64_t b = 0; b < nb; b += bs) {
            uint32_t u;
            memcpy(&u, p + b, 4);
            count_f32(u, s);
            s->values++;
        }
        return;
    }
    }
    for (size_t k = 0; k < sizeof fp16_scales / sizeof fp16_scales[0]; k++) {
        if (fp16_scales[k].type != t->type)
            continue;
        uint32_t bs = ob_type_size(t->type);
        for (uint64_t b = 0; b < nb; b += bs)
            for (int j = 0; j < fp16_scales[k].n; j++) {
                uint16_t h;
                memcpy(&h, p + b + fp16_scales[k].off[j], 2);
                count_h16(h, s);
                s->values++;
            }
        return;
    }
    /* integer tensors have nothing to check; other block types have no fp16 scale to read */
    s->scales_checked = t->type == OB_I8 || t->type == OB_I16 || t->type == OB_I32 ||
                        t->type == OB_I64;
    volatile uint8_t sink = 0;             /* still read every page: --check reads the file */
    for (uint64_t i = 0; i < nb; i += 4096)
        sink ^= p[i];
    (void)sink;
}

int ob_check_model(const struct ob_gguf *g, const char *path, struct ob_check **out)
{
    struct ob_check *c = calloc(1, sizeof *c);
    if (!c)
        return ob_seterr(OB_ENOMEM, "out of memory");
    c->n = ob_gguf_n_tensors(g);
    c->t = calloc(c->n ? c->n : 1, sizeof *c->t);
    if (!c->t) {
        free(c);
        return ob_seterr(OB_ENOMEM, "out of memory");
    }
    int e = ob_sha256_file(path, c->sha256);
    if (e) {
        ob_check_free(c);
        return e;
    }
    for (uint64_t i = 0; i < c->n; i++) {
        const struct ob_gguf_tensor *t = ob_gguf_tensor_at(g, i);
        check_tensor(t, &c->t[i]);
        c->nan += c->t[i].nan;
        c->inf += c->t[i].inf;
        c->bytes += t->nbytes;
    }
    *out = c;
    return 0;
}

void ob_check_free(struct ob_check *c)
{
    if (!c)
        return;
    free(c->t);
    free(c);
}

bool ob_check_ok(const struct ob_check *c)
{
    return c->nan == 0 && c->inf == 0;
}

cJSON *ob_check_json(const struct ob_check *c)
{
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "sha256", c->sha256);
    ob_json_add_u64(j, "tensor_bytes", c->bytes);
    ob_json_add_u64(j, "nan", c->nan);
    ob_json_add_u64(j, "inf", c->inf);
    uint64_t unchecked = 0;
    for (uint64_t i = 0; i < c->n; i++)
        unchecked += !c->t[i].scales_checked;
    ob_json_add_u64(j, "tensors_unchecked", unchecked);
    cJSON_AddBoolToObject(j, "ok", ob_check_ok(c));
    return j;
}

void ob_check_tensor_json(const struct ob_check *c, uint64_t i, cJSON *rec)
{
    const struct tstat *s = &c->t[i];
    ob_json_add_u64(rec, "checked_values", s->values);
    ob_json_add_u64(rec, "nan", s->nan);
    ob_json_add_u64(rec, "inf", s->inf);
    cJSON_AddBoolToObject(rec, "scales_checked", s->scales_checked);
}
