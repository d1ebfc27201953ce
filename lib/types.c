/*
 * types.c — block geometry of every ggml tensor type a GGUF file may name, whether or not 1b
 * has kernels for it (a model with an unsupported type still loads and is reported by name),
 * and of OB_Q4NX, the tile of the npu route's packs, which no GGUF file may name.
 */
#include <string.h>
#include <strings.h>

#include "1b.h"

static const struct { const char *name; uint32_t blck, size; } types[OB_TYPE_COUNT] = {
    [OB_F32] = {"F32", 1, 4},         [OB_F16] = {"F16", 1, 2},
    [OB_Q4_0] = {"Q4_0", 32, 18},     [OB_Q4_1] = {"Q4_1", 32, 20},
    [OB_Q5_0] = {"Q5_0", 32, 22},     [OB_Q5_1] = {"Q5_1", 32, 24},
    [OB_Q8_0] = {"Q8_0", 32, 34},     [OB_Q8_1] = {"Q8_1", 32, 36},
    [OB_Q2_K] = {"Q2_K", 256, 84},    [OB_Q3_K] = {"Q3_K", 256, 110},
    [OB_Q4_K] = {"Q4_K", 256, 144},   [OB_Q5_K] = {"Q5_K", 256, 176},
    [OB_Q6_K] = {"Q6_K", 256, 210},   [OB_Q8_K] = {"Q8_K", 256, 292},
    [OB_IQ2_XXS] = {"IQ2_XXS", 256, 66}, [OB_IQ2_XS] = {"IQ2_XS", 256, 74},
    [OB_IQ3_XXS] = {"IQ3_XXS", 256, 98}, [OB_IQ1_S] = {"IQ1_S", 256, 50},
    [OB_IQ4_NL] = {"IQ4_NL", 32, 18}, [OB_IQ3_S] = {"IQ3_S", 256, 110},
    [OB_IQ2_S] = {"IQ2_S", 256, 82},  [OB_IQ4_XS] = {"IQ4_XS", 256, 136},
    [OB_I8] = {"I8", 1, 1},           [OB_I16] = {"I16", 1, 2},
    [OB_I32] = {"I32", 1, 4},         [OB_I64] = {"I64", 1, 8},
    [OB_F64] = {"F64", 1, 8},         [OB_IQ1_M] = {"IQ1_M", 256, 56},
    [OB_BF16] = {"BF16", 1, 2},       [OB_TQ1_0] = {"TQ1_0", 256, 54},
    [OB_TQ2_0] = {"TQ2_0", 256, 66},  [OB_MXFP4] = {"MXFP4", 32, 17},
    [OB_NVFP4] = {"NVFP4", 64, 36},   [OB_Q1_0] = {"Q1_0", 128, 18},
};

bool ob_type_known(uint32_t t)
{
    return t < OB_TYPE_COUNT && types[t].name != NULL;
}

const char *ob_type_name(uint32_t t)
{
    static _Thread_local char buf[32];
    if (t == OB_Q4NX)
        return "Q4NX";
    if (ob_type_known(t))
        return types[t].name;
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
    return t == OB_Q4NX ? 32 : ob_type_known(t) ? types[t].blck : 0;
}

uint32_t ob_type_size(uint32_t t)
{
    return t == OB_Q4NX ? 20 : ob_type_known(t) ? types[t].size : 0;
}

bool ob_type_is_float(uint32_t t)
{
    return t == OB_F32 || t == OB_F16 || t == OB_BF16 || t == OB_F64;
}

bool ob_type_row_bytes(uint32_t t, uint64_t n, uint64_t *out)
{
    uint32_t blck = ob_type_blck(t);
    if (!blck || n % blck)
        return false;
    return !__builtin_mul_overflow(n / blck, (uint64_t)ob_type_size(t), out);
}
