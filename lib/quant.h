/*
 * quant.h — the host's weight-format API (lib/quant.c): the reference quantisers and the row
 * dequantiser. The formats themselves (block layouts, fp16/bf16 conversions, scale helpers)
 * are canonical arithmetic and live in lib/arith/blocks.h, included here; the per-block
 * dequantisers that ob_dequant_row loops over in lib/arith/dequant.h.
 *
 * Thread safety: every function is pure (no global state) and may run on any thread.
 */
#ifndef OB_QUANT_H
#define OB_QUANT_H

#include <stdbool.h>
#include <stdint.h>

#include "arith/blocks.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Dequantise n values (n a multiple of the type's block size) of type `type` (enum ob_type) from
 * src to dst. Supported (ob_dequant_supported): the weight types, the activation formats and
 * 1b's own pack type of the list (types.h: OB_TYPES_QUANTISE, OB_TYPES_ACT). Returns 0,
 * OB_EUSAGE (bad n) or OB_EUNSUPP (other types).
 */
int ob_dequant_row(uint32_t type, const void *src, float *dst, int64_t n);

/*
 * Quantise n float32 values (n a multiple of the block size) into blocks of `type` at dst. The
 * reference quantisers are deterministic (same input, same bytes, on every machine): they use
 * only + - * / and comparisons on float32, in a fixed order. Supported (ob_quant_supported):
 * the weight types and 1b's own pack type of the list (types.h: OB_TYPES_QUANTISE): F32, F16,
 * BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 (the same bytes as gguf-py's quantisers), Q2_K, Q3_K,
 * Q4_K, Q5_K, Q6_K (a least-squares search per sub-block, see quant.c), Q4NX (range or
 * least-squares, bf16 step and zero, see quant.c). Returns 0; OB_EUSAGE (bad n); OB_EUNSUPP;
 * OB_ERANGE when a block-quantised type gets a non-finite value or a block whose scale does
 * not fit fp16.
 */
int ob_quant_row(uint32_t type, const float *src, void *dst, int64_t n);

bool ob_quant_supported(uint32_t type);
bool ob_dequant_supported(uint32_t type);

/*
 * Mixes: the type each tensor of a model gets under a name such as "q4_k_m" (1b-synth --type,
 * 1b-requant --type): a weight type's name (OB_TYPES_WEIGHT of types.h, f32 .. q6_k) makes
 * every matrix that type, the K-quant mixes (q3_k_s .. q5_k_m) follow llama-quantize's
 * choices; vectors are F32 (see quant.c).
 */
struct ob_mix_tensor {
    const char *name;              /* GGUF name: "blk.3.ffn_down.weight", "output.weight" */
    uint32_t n_dims;               /* 1: a vector */
    uint64_t ne0;                  /* values per row */
    uint32_t n_layer;              /* blocks of the model */
    bool tied;                     /* no output.weight: token_embd is the output projection */
};
bool ob_mix_known(const char *mix);
const char *ob_mix_names(void);    /* space-separated, in ob_list_types' order */
/* llama.cpp's general.file_type of a model made with the mix (LLAMA_FTYPE_*: a weight type's
 * is its column of types.h; q3_k, q4_k and q5_k get their _S file type); -1 for none */
int ob_mix_file_type(const char *mix);
/* 0 and the type; OB_EUSAGE for an unknown mix, OB_EUNSUPP when no type fits the rows */
int ob_mix_type(const char *mix, const struct ob_mix_tensor *t, uint32_t *out);

#ifdef __cplusplus
}
#endif
#endif
