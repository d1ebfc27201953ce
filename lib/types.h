/*
 * types.h — the one list of tensor types. Every table and switch that names types is made from
 * these lists (X-macros): the enum ob_type (1b.h), names and block geometry (types.c), the
 * row quantisers and dequantisers and what they support (quant.c), the weight types and the
 * activation format each takes (types.c: ob_type_supported, ob_type_actfmt; enum ob_actfmt
 * below), the type names and mixes of 1b-synth and 1b-requant (--list-types, which the shell
 * completions ask), their llama.cpp file types (requant.c), the fp16 scales 1b-load --check
 * reads (check.c), the cpu route's scalar kernel table (cpu/kernels/matmul.c), and the hrx
 * routes' kernel dispatch (hrx/mm.hip, hrx/norm.hip, hrx/backend-hrx.c).
 *
 * A row is X(NAME, name, id, blck, bytes, ftype):
 *   NAME   the enum's OB_NAME and the name 1b prints ("Q4_K");
 *   name   the lowercase name of its block struct and functions: ob_block_<name> (blocks.h),
 *          ob_dequant_<name> (arith/dequant.h), ob_dot_<name> (arith/dot.h), the quantiser
 *          q_<name> (quant.c), and of --type ("q4_k");
 *   id     its ggml number as GGUF files store it (1b's own types count from 256);
 *   blck   values a block, bytes its bytes (quant.c checks them against each struct's size);
 *   ftype  llama.cpp's general.file_type of a model all of that type (LLAMA_FTYPE_MOSTLY_*; the
 *          K-quants' _S), -1 where there is none.
 *
 * Which list a row is in says what 1b does with the type; a function a list's use names must
 * exist for each of its rows, and the compiler says which is missing:
 *   OB_TYPES_FLOAT   weight types of float values: every route multiplies them (ob_dot_<name>
 *                    over float32 activations), and they quantise and dequantise exactly;
 *   OB_TYPES_A8      weight types of 32-value blocks whose dot products take A8 activations
 *                    (arith.h), ob_blk_<name> a block: cpu kernels, hrx kernels (mm.hip's generic
 *                    32-value traits), a quantiser, a dequantiser;
 *   OB_TYPES_Q8K     weight types of 256-value super-blocks whose dot products take Q8_K
 *                    activations: the same, with hrx traits of their own in mm.hip (t_<name>);
 *   OB_TYPES_ACT     activation formats a file may hold: dequantised, nothing more;
 *   OB_TYPES_PACK    1b's own, never in a GGUF file: the tile of the npu route's Q4NX packs
 *                    (arith/q4nx.h), quantised and dequantised by quant.c;
 *   OB_TYPES_OTHER   the other GGUF types: their geometry only (a model that has them loads and
 *                    is reported by name; no route runs it).
 * A new weight type is a row in FLOAT, A8 or Q8K plus its arithmetic: the block struct (and
 * OB_FP16_SCALES_<name> beside it), the dequantiser, the dot product, the quantiser (and for
 * Q8K, mm.hip's traits). Its SIMD kernels are optional: the files of cpu/kernels/ fill their
 * tables over the scalar ones, type by type. The order of the weight lists is the order
 * --list-types prints.
 */
#ifndef OB_TYPES_H
#define OB_TYPES_H

#define OB_TYPES_FLOAT(X)                                                                   \
    X(F32, f32, 0, 1, 4, 0)                                                                 \
    X(F16, f16, 1, 1, 2, 1)                                                                 \
    X(BF16, bf16, 30, 1, 2, 32)

#define OB_TYPES_A8(X)                                                                      \
    X(Q8_0, q8_0, 8, 32, 34, 7)                                                             \
    X(Q4_0, q4_0, 2, 32, 18, 2)                                                             \
    X(Q4_1, q4_1, 3, 32, 20, 3)                                                             \
    X(Q5_0, q5_0, 6, 32, 22, 8)                                                             \
    X(Q5_1, q5_1, 7, 32, 24, 9)

#define OB_TYPES_Q8K(X)                                                                     \
    X(Q2_K, q2_k, 10, 256, 84, 10)                                                          \
    X(Q3_K, q3_k, 11, 256, 110, 11)                                                         \
    X(Q4_K, q4_k, 12, 256, 144, 14)                                                         \
    X(Q5_K, q5_k, 13, 256, 176, 16)                                                         \
    X(Q6_K, q6_k, 14, 256, 210, 18)

#define OB_TYPES_ACT(X)                                                                     \
    X(Q8_K, q8_k, 15, 256, 292, -1)

#define OB_TYPES_PACK(X)                                                                    \
    X(Q4NX, q4nx, 256, 32, 20, -1)

#define OB_TYPES_OTHER(X)                                                                   \
    X(Q8_1, q8_1, 9, 32, 36, -1)                                                            \
    X(IQ2_XXS, iq2_xxs, 16, 256, 66, -1)                                                    \
    X(IQ2_XS, iq2_xs, 17, 256, 74, -1)                                                      \
    X(IQ3_XXS, iq3_xxs, 18, 256, 98, -1)                                                    \
    X(IQ1_S, iq1_s, 19, 256, 50, -1)                                                        \
    X(IQ4_NL, iq4_nl, 20, 32, 18, -1)                                                       \
    X(IQ3_S, iq3_s, 21, 256, 110, -1)                                                       \
    X(IQ2_S, iq2_s, 22, 256, 82, -1)                                                        \
    X(IQ4_XS, iq4_xs, 23, 256, 136, -1)                                                     \
    X(I8, i8, 24, 1, 1, -1)                                                                 \
    X(I16, i16, 25, 1, 2, -1)                                                               \
    X(I32, i32, 26, 1, 4, -1)                                                               \
    X(I64, i64, 27, 1, 8, -1)                                                               \
    X(F64, f64, 28, 1, 8, -1)                                                               \
    X(IQ1_M, iq1_m, 29, 256, 56, -1)                                                        \
    X(TQ1_0, tq1_0, 34, 256, 54, -1)                                                        \
    X(TQ2_0, tq2_0, 35, 256, 66, -1)                                                        \
    X(MXFP4, mxfp4, 39, 32, 17, -1)                                                         \
    X(NVFP4, nvfp4, 40, 64, 36, -1)                                                         \
    X(Q1_0, q1_0, 41, 128, 18, -1)

/* the weight types: every route's matmul takes them; 1b-synth and 1b-requant make them */
#define OB_TYPES_WEIGHT(X) OB_TYPES_FLOAT(X) OB_TYPES_A8(X) OB_TYPES_Q8K(X)
/* the quantised weight types: the hrx kernels' own (floats have a kernel of their own) */
#define OB_TYPES_QUANT(X) OB_TYPES_A8(X) OB_TYPES_Q8K(X)
/* what quant.c quantises, and (with OB_TYPES_ACT) dequantises */
#define OB_TYPES_QUANTISE(X) OB_TYPES_WEIGHT(X) OB_TYPES_PACK(X)
/* every id a GGUF file may name (ob_type_known) */
#define OB_TYPES_GGUF(X) OB_TYPES_WEIGHT(X) OB_TYPES_ACT(X) OB_TYPES_OTHER(X)

/*
 * The activation formats: what a weight type's dot products take as their other operand, on
 * every route (cpu kernels, hrx kernels, npu-sim's tiles), chosen by the weight type's list:
 *   OB_ACT_F32   float32 values, for OB_TYPES_FLOAT;
 *   OB_ACT_Q8K   Q8_K blocks of 256 values (arith/blocks.h struct ob_block_q8_k), for
 *                OB_TYPES_Q8K;
 *   OB_ACT_A8    A8 blocks of 32 values (arith/arith.h struct ob_act_a8), for OB_TYPES_A8.
 * ob_type_actfmt, ob_act_align and ob_act_row_bytes (1b.h, types.c) say which and how big;
 * hrx/hrx.h's OB_HRX_ACT_* are the same numbers (backend-hrx.c checks it).
 */
enum ob_actfmt { OB_ACT_F32 = 0, OB_ACT_Q8K = 1, OB_ACT_A8 = 2 };

/* a row as a case label: switch (t) { OB_TYPES_WEIGHT(OB_TYPE_CASE) return true; } */
#define OB_TYPE_CASE(NAME, name, id, blck, bytes, ftype) case OB_##NAME:

#endif
