/*
 * 1b.h — the public API of lib1b, the library every 1b command is built on.
 *
 * Conventions (they hold for every function below unless its comment says otherwise):
 * - Functions return int: 0 on success, a negative OB_E* code on failure. When they fail they
 *   leave a one-line, human-readable reason in a thread-local buffer read by ob_errmsg()
 *   (what went wrong and where: byte offset, key, tensor name, line number).
 * - Outputs are the last arguments. An object returned through an out-pointer belongs to the
 *   caller and is freed with the matching _close/_free function; NULL is accepted by every
 *   _close/_free.
 * - Pointers returned by accessors (strings, tensor infos, metadata values) point into the
 *   object they came from and stay valid until that object is closed.
 * - The library never prints and never exits; commands map OB_E* codes to exit statuses with
 *   ob_exit_status().
 * - Objects are not internally locked: one object, one thread at a time, unless a comment says
 *   otherwise. Distinct objects may be used from distinct threads.
 */
#ifndef OB_1B_H
#define OB_1B_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdbool.h>

#include <cJSON.h>

#include "types.h"

#ifdef __cplusplus
extern "C" {
#endif

#define OB_VERSION "0.1.0"

/* ---- errors and exit statuses ------------------------------------------------------------ */

enum ob_err {
    OB_OK       = 0,
    OB_EUSAGE   = -1,  /* a caller passed an invalid argument or option value */
    OB_EFORMAT  = -2,  /* input data is malformed: model file, record, archive, request */
    OB_EIO      = -3,  /* a read, write, open or mmap failed (errno is in the message) */
    OB_ENOMEM   = -4,  /* an allocation failed or a memory budget was exceeded */
    OB_EUNSUPP  = -5,  /* well-formed input that this build cannot handle (type, arch) */
    OB_EDEVICE  = -6,  /* a route or device is not built in or not present */
    OB_ERANGE   = -7,  /* a value is out of its allowed range (context length, ...) */
    OB_ENOTFOUND= -8,  /* a key, tensor or file that was asked for does not exist */
    OB_EINTERNAL= -9,  /* a bug: an invariant of the library failed */
};

/* Exit statuses shared by every command (documented in 1b(7)). */
enum ob_exit {
    OB_EXIT_OK       = 0,  /* success */
    OB_EXIT_NO       = 1,  /* the answer is "no": a difference was found, a check failed */
    OB_EXIT_USAGE    = 2,  /* bad command line */
    OB_EXIT_DATA     = 3,  /* bad input data: model file, record, archive */
    OB_EXIT_DEVICE   = 4,  /* route or device not built in or not available */
    OB_EXIT_FAILURE  = 5,  /* any other failure: I/O, memory, internal */
};

const char *ob_errmsg(void);             /* reason for the last failure on this thread */
const char *ob_strerror(int err);        /* short name of an OB_E* code */
int ob_exit_status(int err);             /* OB_E* -> OB_EXIT_* */
/* Set the thread-local message (printf-style) and return err; used by lib/ and by commands
 * that produce their own errors in the same shape. */
int ob_seterr(int err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Prefix the current message with a formatted context ("path: old message"); returns err. */
int ob_errprefix(int err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
#ifdef __clang_analyzer__
/* What clang's static analyzer (make lint) cannot see from the file it analyses, told as
 * macros that only it compiles (the build calls the functions themselves): ob_seterr and
 * ob_errprefix return err (err.c), so a path through "return ob_seterr(OB_E..., ...)" is a
 * failure, not a success with its outputs unset; cJSON's type tests are false for NULL
 * (cJSON.c), so "cJSON_IsString(v) ? v->valuestring : ..." reads no NULL. (One more below:
 * ob_jsonl_next.) */
#define ob_seterr(err, ...) \
    __extension__({ int ob_err_ = (err); ob_seterr(ob_err_, __VA_ARGS__); ob_err_; })
#define ob_errprefix(err, ...) \
    __extension__({ int ob_err_ = (err); ob_errprefix(ob_err_, __VA_ARGS__); ob_err_; })
#define OB_CJSON_IS_(f, x) __extension__({ const cJSON *ob_x_ = (x); ob_x_ && (f)(ob_x_); })
#define cJSON_IsInvalid(x) OB_CJSON_IS_(cJSON_IsInvalid, x)
#define cJSON_IsFalse(x)   OB_CJSON_IS_(cJSON_IsFalse, x)
#define cJSON_IsTrue(x)    OB_CJSON_IS_(cJSON_IsTrue, x)
#define cJSON_IsBool(x)    OB_CJSON_IS_(cJSON_IsBool, x)
#define cJSON_IsNull(x)    OB_CJSON_IS_(cJSON_IsNull, x)
#define cJSON_IsNumber(x)  OB_CJSON_IS_(cJSON_IsNumber, x)
#define cJSON_IsString(x)  OB_CJSON_IS_(cJSON_IsString, x)
#define cJSON_IsArray(x)   OB_CJSON_IS_(cJSON_IsArray, x)
#define cJSON_IsObject(x)  OB_CJSON_IS_(cJSON_IsObject, x)
#define cJSON_IsRaw(x)     OB_CJSON_IS_(cJSON_IsRaw, x)
#endif

/* ---- ggml tensor types -------------------------------------------------------------------- */

/* Type ids as stored in GGUF files (ggml numbering; gaps are ids retired upstream), and 1b's
 * own from 256 on, outside ggml's numbering and never in a GGUF file (ob_type_known says no, so
 * the reader and writer refuse them): OB_Q4NX, the tile of the npu route's Q4NX packs, 32
 * values in 20 bytes (lib/arith/q4nx.h, man/1b.7). The ids, names and geometry come from the
 * one list of types, types.h: OB_F32 = 0, OB_F16 = 1, OB_Q4_0 = 2, ... OB_Q4_K = 12, ... */
#define OB_TYPE_ENUM_(NAME, name, id, blck, bytes, ftype) OB_##NAME = id,
#define OB_TYPE_ID_(NAME, name, id, blck, bytes, ftype) char NAME[id + 1];
union ob_type_ids_ { OB_TYPES_GGUF(OB_TYPE_ID_) };  /* its size: one past the largest GGUF id */
enum ob_type {
    OB_TYPES_GGUF(OB_TYPE_ENUM_)
    OB_TYPES_PACK(OB_TYPE_ENUM_)
    OB_TYPE_COUNT = sizeof(union ob_type_ids_),     /* 42 */
};
#undef OB_TYPE_ID_
#undef OB_TYPE_ENUM_

/* Block geometry of a type: `blck` values are stored in `size` bytes. Returns false for an id
 * that names no GGUF type (never assigned or retired, or OB_Q4NX, which the other functions
 * below know). */
bool ob_type_known(uint32_t type);
const char *ob_type_name(uint32_t type);        /* "Q4_K"; "type#31" style for unknown ids */
int ob_type_from_name(const char *name);        /* case-insensitive; -1 if unknown */
uint32_t ob_type_blck(uint32_t type);           /* 0 for unknown ids */
uint32_t ob_type_size(uint32_t type);           /* 0 for unknown ids */
bool ob_type_is_float(uint32_t type);           /* F32, F16, BF16, F64 */
/* A weight type (types.h: OB_TYPES_WEIGHT), what the routes' matmuls take (the cpu route has
 * a dot-product kernel for each). */
bool ob_type_supported(uint32_t type);
/* The activation format its dot products take (enum ob_actfmt, types.h): OB_ACT_Q8K for a
 * K-quant, OB_ACT_A8 for a 32-value format, OB_ACT_F32 for a float type and any other id. */
int ob_type_actfmt(uint32_t type);
/* Values of one block of activation format fmt: a row's length must be a multiple of it. */
int ob_act_align(int fmt);
/* Bytes of a row of k values (a multiple of ob_act_align(fmt)) in activation format fmt. */
size_t ob_act_row_bytes(int fmt, int k);
/* Bytes of one row of n values; false when n is not a multiple of the block or overflows. */
bool ob_type_row_bytes(uint32_t type, uint64_t n, uint64_t *out);
/* --list-types of 1b-synth and 1b-requant (the shell completions ask it): what their --type
 * takes, one name a line: 1b's own pack types first when `packs` (q4nx), then the weight types
 * of types.h (f32 .. q6_k) and the K-quant mixes (q3_k_s .. q5_k_m). */
void ob_list_types(FILE *f, bool packs);

/* ---- GGUF files ----------------------------------------------------------------------------- */

/* Metadata value types as stored in GGUF. */
enum ob_gguf_vtype {
    OB_GGUF_U8 = 0, OB_GGUF_I8 = 1, OB_GGUF_U16 = 2, OB_GGUF_I16 = 3, OB_GGUF_U32 = 4,
    OB_GGUF_I32 = 5, OB_GGUF_F32 = 6, OB_GGUF_BOOL = 7, OB_GGUF_STRING = 8,
    OB_GGUF_ARRAY = 9, OB_GGUF_U64 = 10, OB_GGUF_I64 = 11, OB_GGUF_F64 = 12,
};

/*
 * A decoded metadata value. Scalars are widened into u/i/f (the stored width is `type`);
 * strings are not NUL-terminated (use len). Arrays of scalars point at the raw little-endian
 * elements in the file (`data`, elem size from ob_gguf_vtype_size); arrays of strings or of
 * arrays are decoded into `elems`. Everything points into the ob_gguf it came from.
 */
struct ob_gguf_value {
    uint32_t type;                 /* enum ob_gguf_vtype */
    union {
        uint64_t u;                /* U8 U16 U32 U64 BOOL */
        int64_t i;                 /* I8 I16 I32 I64 */
        double f;                  /* F32 F64 */
        struct { const char *ptr; uint64_t len; } str;
        struct {
            uint32_t elem_type;
            uint64_t n;
            const void *data;                  /* scalar elements, packed */
            const struct ob_gguf_value *elems; /* STRING or ARRAY elements, else NULL */
        } arr;
    };
};

struct ob_gguf_kv {
    const char *key;               /* NUL-terminated copy */
    uint64_t offset;               /* byte offset of the key in the file */
    struct ob_gguf_value val;
};

struct ob_gguf_tensor {
    const char *name;              /* NUL-terminated copy */
    uint32_t n_dims;               /* 1..4 */
    uint64_t ne[4];                /* ne[0] is the contiguous (row) dimension; unused dims are 1 */
    uint32_t type;                 /* enum ob_type */
    uint64_t offset;               /* from the start of the data section */
    uint64_t nbytes;
    const void *data;              /* into the mapped file */
};

struct ob_gguf;

size_t ob_gguf_vtype_size(uint32_t vtype);      /* bytes of a scalar type; 0 for STRING/ARRAY */
const char *ob_gguf_vtype_name(uint32_t vtype);

/* Open and validate a GGUF file (v2 or v3) and mmap it. Every count, size and offset is checked
 * against the file before it is used; a bad file fails with OB_EFORMAT and a message naming the
 * byte offset and the key or tensor. Types without kernels are accepted (reported by name). */
int ob_gguf_open(const char *path, struct ob_gguf **out);
/* The same over a caller-owned buffer that must outlive the handle (fuzzing, tests). */
int ob_gguf_open_mem(const void *data, size_t size, struct ob_gguf **out);
void ob_gguf_close(struct ob_gguf *g);

uint32_t ob_gguf_version(const struct ob_gguf *g);
uint64_t ob_gguf_file_size(const struct ob_gguf *g);
uint64_t ob_gguf_data_offset(const struct ob_gguf *g);   /* start of the tensor data section */
uint32_t ob_gguf_alignment(const struct ob_gguf *g);
uint64_t ob_gguf_n_kv(const struct ob_gguf *g);
const struct ob_gguf_kv *ob_gguf_kv_at(const struct ob_gguf *g, uint64_t i);
const struct ob_gguf_value *ob_gguf_get(const struct ob_gguf *g, const char *key);
uint64_t ob_gguf_n_tensors(const struct ob_gguf *g);
const struct ob_gguf_tensor *ob_gguf_tensor_at(const struct ob_gguf *g, uint64_t i);
const struct ob_gguf_tensor *ob_gguf_tensor(const struct ob_gguf *g, const char *name);

/* Typed getters: OB_ENOTFOUND if the key is absent, OB_EFORMAT if its type does not fit. Any
 * integer type converts to the requested one when the value is in range. */
int ob_gguf_get_u64(const struct ob_gguf *g, const char *key, uint64_t *out);
int ob_gguf_get_u32(const struct ob_gguf *g, const char *key, uint32_t *out);
int ob_gguf_get_f32(const struct ob_gguf *g, const char *key, float *out);
int ob_gguf_get_bool(const struct ob_gguf *g, const char *key, bool *out);
/* The string is copied NUL-terminated into a malloc'd buffer owned by the caller. */
int ob_gguf_get_str(const struct ob_gguf *g, const char *key, char **out);
/* Array of `elem_type` elements (OB_EFORMAT if not an array of that type). */
int ob_gguf_get_arr(const struct ob_gguf *g, const char *key, uint32_t elem_type,
                    const struct ob_gguf_value **out);

/* Scalar array element i widened like the scalar fields (caller checks bounds and type). */
uint64_t ob_gguf_arr_u(const struct ob_gguf_value *arr, uint64_t i);
int64_t ob_gguf_arr_i(const struct ob_gguf_value *arr, uint64_t i);
double ob_gguf_arr_f(const struct ob_gguf_value *arr, uint64_t i);

/* Convert a metadata value to JSON (arrays in full; strings as UTF-8 with invalid bytes
 * escaped as U+FFFD). Returns NULL on allocation failure. */
cJSON *ob_gguf_value_json(const struct ob_gguf_value *v);

/* ---- GGUF writer ---------------------------------------------------------------------------- */

/*
 * Builds a GGUF v3 file: metadata in insertion order (setting an existing key replaces its
 * value in place), tensors in insertion order, each aligned to general.alignment (default 32).
 * Values and names are copied. Tensor data is either borrowed (must stay valid until
 * ob_gguf_writer_write returns) or produced by a callback at write time, so that a large model
 * never has to sit in memory at once. The file is written to a temporary name beside `path`
 * and renamed into place only when complete.
 */
struct ob_gguf_writer;
typedef int (*ob_gguf_fill_fn)(void *ctx, uint64_t index, void *buf, uint64_t nbytes);

int ob_gguf_writer_new(struct ob_gguf_writer **out);
void ob_gguf_writer_free(struct ob_gguf_writer *w);
int ob_gguf_writer_set(struct ob_gguf_writer *w, const char *key, const struct ob_gguf_value *v);
int ob_gguf_writer_set_u32(struct ob_gguf_writer *w, const char *key, uint32_t v);
int ob_gguf_writer_set_i32(struct ob_gguf_writer *w, const char *key, int32_t v);
int ob_gguf_writer_set_u64(struct ob_gguf_writer *w, const char *key, uint64_t v);
int ob_gguf_writer_set_f32(struct ob_gguf_writer *w, const char *key, float v);
int ob_gguf_writer_set_bool(struct ob_gguf_writer *w, const char *key, bool v);
int ob_gguf_writer_set_str(struct ob_gguf_writer *w, const char *key, const char *v);
/* Array of n scalars of `elem_type`, packed little-endian in `data`. */
int ob_gguf_writer_set_arr(struct ob_gguf_writer *w, const char *key, uint32_t elem_type,
                           uint64_t n, const void *data);
int ob_gguf_writer_set_str_arr(struct ob_gguf_writer *w, const char *key, uint64_t n,
                               const char *const *strs, const uint64_t *lens);
/* Copy every metadata pair of an open file (e.g. to re-quantise it). */
int ob_gguf_writer_copy_meta(struct ob_gguf_writer *w, const struct ob_gguf *g);
/* ne[] as in struct ob_gguf_tensor; data may be NULL when fill is given. */
int ob_gguf_writer_add_tensor(struct ob_gguf_writer *w, const char *name, uint32_t type,
                              uint32_t n_dims, const uint64_t ne[], const void *data,
                              ob_gguf_fill_fn fill, void *fill_ctx);
int ob_gguf_writer_write(struct ob_gguf_writer *w, const char *path);

/* ---- model files ------------------------------------------------------------------------------ */

/* Resolve a MODEL argument to a GGUF path that can be mmapped: a GGUF file is returned as is
 * (strdup'd); an archive holding exactly one .gguf is extracted once into the cache (see
 * archive.c) and the cached file's path is returned. */
int ob_model_resolve(const char *path, char **gguf_path);

/* Read every tensor of an open model and count non-finite values in float tensors and in the
 * scales of quantised blocks; also hash the file (path is the file g was opened from). */
struct ob_check;
int ob_check_model(const struct ob_gguf *g, const char *path, struct ob_check **out);
void ob_check_free(struct ob_check *c);
bool ob_check_ok(const struct ob_check *c);             /* no NaN, no Inf */
cJSON *ob_check_json(const struct ob_check *c);
void ob_check_tensor_json(const struct ob_check *c, uint64_t i, cJSON *rec);

/* ---- Q4NX packs: the npu route's weights (1b-requant --type q4nx; format in 1b(7)) ---------- */

/*
 * A pack is a directory: manifest.json (format, version, architecture, hyper-parameters, the
 * source GGUF's sha256, its files with their sizes and sha256, every Q4NX tensor with its
 * file, offset and shape), meta.gguf (the source's metadata: tokenizer, chat template, and
 * the tensors that stay float) and weights.q4nx (the tiles). ob_model_open opens one like a
 * GGUF; these functions read it for inspection (1b-load).
 */
#define OB_PACK_VERSION 1
struct ob_pack;
struct ob_pack_tensor {
    const char *name;
    uint32_t type;                 /* OB_Q4NX */
    uint64_t k, n;                 /* values per row, rows (shape [k, n] as GGUF's ne) */
    const char *file;              /* its file in the pack */
    uint64_t offset, nbytes;       /* in that file */
    const void *data;              /* mapped */
    const char *from;              /* the source tensor's type ("Q4_K") */
};
/* A directory holding a manifest.json: a pack, whether or not a valid one. */
bool ob_pack_is(const char *path);
/* Open a pack directory: the manifest is read and checked (format, version, every file there
 * with the size it gives, every tensor inside its file with the size its shape needs, the
 * hyper-parameters equal to the meta GGUF's), meta.gguf opened, the tiles mapped. A bad pack
 * fails with OB_EFORMAT naming the file and what is wrong. */
int ob_pack_open(const char *dir, struct ob_pack **out);
void ob_pack_close(struct ob_pack *p);
struct ob_gguf *ob_pack_meta(const struct ob_pack *p);  /* owned by the pack */
struct ob_hparams;
const struct ob_hparams *ob_pack_hparams(const struct ob_pack *p);
const cJSON *ob_pack_manifest(const struct ob_pack *p);
const char *ob_pack_sha256(const struct ob_pack *p);   /* of manifest.json: the pack's identity */
uint64_t ob_pack_bytes(const struct ob_pack *p);       /* all its files */
uint64_t ob_pack_n_tensors(const struct ob_pack *p);
const struct ob_pack_tensor *ob_pack_tensor_at(const struct ob_pack *p, uint64_t i);
const struct ob_pack_tensor *ob_pack_tensor(const struct ob_pack *p, const char *name);
/* Read every file and compare its sha256 with the manifest's (OB_EFORMAT naming the first that
 * differs), and count the tiles' NaN and Inf steps and zeros. */
int ob_pack_verify(const struct ob_pack *p, uint64_t *nan, uint64_t *inf);

/* ---- re-quantisation (lib/requant.c; 1b-requant) --------------------------------------------- */

/*
 * Re-quantise a GGUF model (a file, or an archive holding one) into a GGUF of another type or
 * mix (the names of ob_mix_names in quant.h: "q8_0", "q4_k_m", ...), or into a Q4NX pack
 * directory ("q4nx"). Every tensor is dequantised to float32 and quantised again with the
 * canonical quantisers (quant.c), rows split over n_threads threads: the output's bytes depend
 * only on the input's. A tensor whose type does not change is copied. The output is written
 * under a temporary name beside it and renamed into place when whole; an existing output is
 * replaced only when force is set (a directory only when it is a Q4NX pack), and never when it
 * is the input (or holds it).
 */
struct ob_requant_tensor {
    uint64_t index, count;         /* its place among the input's tensors */
    const char *name;
    uint32_t n_dims;
    uint64_t ne[4];
    uint32_t from, to;             /* types (enum ob_type; to may be OB_Q4NX) */
    bool copied;                   /* the same type: the bytes copied unchanged */
    uint64_t bytes_in, bytes_out;
    /* the output's values against the input's (dequantised): root mean square error, largest
     * absolute error, and the input's root mean square */
    double rmse, max_abs, rms;
};
struct ob_requant_summary {
    uint64_t tensors, requantised, copied, params, bytes_in, bytes_out;
    double rmse, max_abs, rms;     /* over every value of every tensor */
    bool input_quantised;          /* some input tensor was quantised: errors are measured
                                      against its dequantised values, not an original */
    char sha256[65];               /* of the output GGUF; of a pack's manifest.json */
    char source_sha256[65];        /* of the input GGUF */
};
struct ob_requant_params {
    const char *type;              /* a mix, or "q4nx" */
    int n_threads;
    bool force;
    /* called after each tensor, in the input's order (may be NULL) */
    void (*tensor_done)(void *user, const struct ob_requant_tensor *t);
    void *user;
};
int ob_requant(const char *in, const char *out, const struct ob_requant_params *p,
               struct ob_requant_summary *sum);

/* ---- chat templates --------------------------------------------------------------------------- */

/* Name the chat template in tokenizer.chat_template by its content (no Jinja engine):
 * "qwen3" (ChatML with thinking), "chatml", "llama3", "llama2", "gemma", "phi3", "unknown" for
 * a template we cannot name, "none" when the string is NULL or empty. */
const char *ob_chat_detect(const char *tmpl);
/* The template 1b uses for a model of architecture `arch` whose file has none: the Gemma 3 turn
 * format (family "gemma", see lib/chat.h) for "gemma3", NULL for the others. */
const char *ob_chat_builtin(const char *arch);

/* ---- model hyper-parameters ----------------------------------------------------------------- */

enum ob_arch { OB_ARCH_UNKNOWN = 0, OB_ARCH_LLAMA, OB_ARCH_QWEN2, OB_ARCH_QWEN3, OB_ARCH_GEMMA3 };
enum ob_act { OB_ACT_SILU = 0, OB_ACT_GELU = 1 };     /* gate activation: SwiGLU / GeGLU */
enum ob_rope { OB_ROPE_NORM = 0, OB_ROPE_NEOX = 2 };   /* rotate pairs (2i,2i+1) / (i,i+d/2) */

struct ob_hparams {
    char arch[32];                 /* general.architecture */
    int arch_id;                   /* enum ob_arch */
    bool supported;                /* 1b has a forward pass for this architecture */
    uint32_t n_vocab, n_ctx_train;
    uint32_t n_embd, n_layer, n_ff;
    uint32_t n_head, n_head_kv, head_dim, head_dim_v;
    uint32_t n_rot;                /* rotary dimensions per head (<= head_dim) */
    float rms_eps, rope_base;
    int rope_type;                 /* enum ob_rope */
    bool qk_norm;                  /* per-head RMSNorm of q and k before RoPE (qwen3) */
    bool tied_output;              /* output projection = token embedding */
    bool attn_bias;                /* q/k/v biases (qwen2) */
    /* gemma3 (all zero / false / head_dim for the others) */
    bool embd_scale;               /* embedding rows times sqrtf(n_embd) */
    bool post_norms;               /* RMSNorm of the attention and FFN outputs before the adds */
    int ffn_act;                   /* enum ob_act */
    uint32_t attn_scale_dim;       /* scores are scaled by 1 / sqrt(attn_scale_dim) */
    uint32_t n_swa;                /* sliding window of the local layers, in keys; 0: none */
    uint32_t swa_pattern;          /* with n_swa: layer l is local unless l % swa_pattern ==
                                      swa_pattern - 1 (swa_pattern 0: every layer local) */
    float rope_base_swa;           /* rope base of the local layers */
};

/* Does layer l attend through the sliding window (with the local rope base)? */
bool ob_hparams_layer_swa(const struct ob_hparams *hp, uint32_t l);
/* The hyper-parameters as a JSON object: 1b-load's "hparams", a pack manifest's (gemma3 adds
 * its own fields). */
cJSON *ob_hparams_json(const struct ob_hparams *hp);

/* Read the hyper-parameters of any architecture; for supported ones, check they are usable. */
int ob_hparams_read(const struct ob_gguf *g, struct ob_hparams *hp);
/* Bytes of KV cache for n_ctx positions (f16 keys and values). */
uint64_t ob_hparams_kv_bytes(const struct ob_hparams *hp, uint64_t n_ctx);
const char *ob_rope_name(int rope);
/* the name of an enum ob_arch (as in a GGUF's general.architecture), "?" for another */
const char *ob_arch_name(int arch);

/* ---- models and inference contexts ----------------------------------------------------------- */

/*
 * A model open for inference: the GGUF mapped, hyper-parameters, tokenizer and every tensor
 * checked. Immutable and shareable between threads and contexts.
 */
struct ob_model;
struct ob_tok;
int ob_model_open(const char *path, struct ob_model **out);
void ob_model_close(struct ob_model *m);
const struct ob_hparams *ob_model_hparams(const struct ob_model *m);
const struct ob_tok *ob_model_tok(const struct ob_model *m);
/* the file's tokenizer.chat_template; for a gemma3 file without one, ob_chat_builtin's
 * Gemma 3 turn format (chat.h); NULL if none (chat messages are then refused, chat.h) */
const char *ob_model_chat_template(const struct ob_model *m);
const char *ob_model_path(const struct ob_model *m);
const char *ob_model_name(const struct ob_model *m);
const struct ob_gguf *ob_model_gguf(const struct ob_model *m);
/* sha256 of the model file (computed once, then remembered) */
int ob_model_sha256(struct ob_model *m, const char **hex);

/*
 * An inference context: one route's backend with the KV cache of n_slots sequences of n_ctx
 * positions each. Not thread-safe: one caller at a time (it runs its own thread pool).
 */
struct ob_device_opts {
    int index;                     /* which device of the route's kind: 0 the first */
    uint64_t mem_limit;            /* bytes the context may budget at most; 0: the device's */
};
struct ob_ctx_params {
    const char *route;             /* "cpu" (default when NULL), "ref", ... (route.c) */
    int n_threads;                 /* host threads */
    int n_slots;
    int n_ctx;
    int max_batch;                 /* token rows per backend pass (larger batches are split) */
    struct ob_device_opts dev;
};
struct ob_ctx;
int ob_ctx_new(struct ob_model *m, const struct ob_ctx_params *p, struct ob_ctx **out);
void ob_ctx_free(struct ob_ctx *c);
const char *ob_ctx_route(const struct ob_ctx *c);
const char *ob_ctx_device(const struct ob_ctx *c);   /* what it runs on: "avx512", a GPU */
struct ob_model *ob_ctx_model(const struct ob_ctx *c);
const struct ob_ctx_params *ob_ctx_params(const struct ob_ctx *c);
/* bytes of KV cache for n_slots x n_ctx */
uint64_t ob_ctx_kv_bytes(const struct ob_model *m, int n_slots, int n_ctx);
/*
 * Would a context of n_slots x n_ctx positions fit on a route's device? Fills *out with the
 * device (a GPU's name; the host for host routes and hrx-sim), its memory (after d->mem_limit),
 * the device memory of the weights (0 where they stay in the mapped file), the KV cache, and
 * fits: both within the 80% of the memory that ob_ctx_new budgets. OB_EUSAGE for an unknown
 * route, OB_EDEVICE when it is not built in or its device is absent, OB_EUNSUPP when it has
 * no kernels for the model's weights.
 */
struct ob_route_fit {
    char device[64];
    uint64_t mem_bytes, weight_bytes, kv_bytes;
    bool fits;
};
int ob_route_fit(struct ob_model *m, const char *route, const struct ob_device_opts *d,
                 int n_slots, int n_ctx, struct ob_route_fit *out);
/*
 * Run n token rows: row i is token tok[i] of slot seq[i] at position pos[i]; its K and V are
 * stored in the slot's cache before attention, so rows of one slot must come in increasing
 * position. The logits of rows want[0..n_want) (increasing) go to out32[j * n_vocab ..] (and,
 * on routes that compute in float64, out64). A row's logits depend only on its own tokens and
 * positions, never on the rest of the batch.
 */
int ob_ctx_forward(struct ob_ctx *c, int n, const int32_t *tok, const int32_t *pos,
                   const int32_t *seq, const int32_t *want, int n_want, float *out32,
                   double *out64);
/* copy the cache of positions [0, n_pos) from slot src to slot dst (prompt cache) */
int ob_ctx_kv_copy(struct ob_ctx *c, int dst, int src, int n_pos);
/*
 * Is route name (NULL: "cpu") in this binary, and is its device there? 0 with what its probe
 * found (the device's name, the memory it offers); OB_EDEVICE saying what is missing (not
 * built: how to build it; no device: what was looked for); OB_EUSAGE for an unknown route.
 * *built tells the first two apart.
 */
int ob_route_probe(const char *name, const struct ob_device_opts *d, bool *built,
                   char device[64], uint64_t *mem_bytes);

/*
 * OpenBLAS (the ref route) picks its kernels when it loads, before main(), and 0.3.21
 * misdetects newer EPYC CPUs (~5x slower). Call this first thing in main(), before getopt
 * reorders argv: when OPENBLAS_CORETYPE is unset it sets it ("Haswell" on x86-64 with AVX2 and
 * FMA) and re-executes /proc/self/exe with the same argv; when it is set, or no choice applies,
 * it returns 0 at once. It returns only on those paths or when the re-exec failed (OB_EIO; the
 * program may go on with OpenBLAS's own choice). ob_blas_info reports the kernel set in use
 * ("Haswell") and OpenBLAS's own thread count (pinned to 1 by the ref route, whose n_threads
 * run whole weight panels: see lib/ref/backend-ref.c).
 */
int ob_blas_env(int argc, char **argv);
void ob_blas_info(const char **coretype, int *n_threads);

/* ---- synthetic models ------------------------------------------------------------------------ */

/* Shape and contents of a synthetic model (see synth.c). */
struct ob_synth {
    const char *preset;            /* name it came from, or NULL */
    const char *arch;              /* "qwen3", "qwen2", "llama", "gemma3" */
    uint32_t n_vocab, n_embd, n_layer, n_head, n_head_kv, head_dim, n_ff, n_ctx;
    float rope_base, rms_eps;
    bool tied;                     /* output projection = token embedding */
    const char *mix;               /* weight type of the matrices: "f32", "q8_0", "q4_k_m", ... */
    uint64_t seed;
    const char *tokenizer;         /* HF tokenizer.json for qwen2/qwen3 (the Qwen vocabulary) */
    uint32_t n_swa, swa_pattern;   /* gemma3: sliding window and layer pattern (0: keys absent) */
    bool no_chat_template;         /* write no tokenizer.chat_template (else the arch's, synth.c) */
};
int ob_synth_preset(const char *name, struct ob_synth *out);
const char *ob_synth_preset_names(void);
int ob_synth_write(const struct ob_synth *s, const char *path);

/* ---- JSON-lines records --------------------------------------------------------------------- */

/*
 * Reads one JSON object per line from a stream. Blank lines are skipped. A line that is not a
 * JSON object gives OB_EFORMAT with "NAME:LINE: reason"; the reader stays usable, so a tool
 * may skip the line and go on. A line is read by ob_read_line under the process's limit
 * (ob_set_max_line): a longer one is OB_ERANGE, a NUL byte OB_EFORMAT as soon as it is read,
 * and the rest of such a line is skipped by the next call. A failed read (OB_EIO) or allocation
 * (OB_ENOMEM) is an error, never the end of input.
 */
struct ob_jsonl;
int ob_jsonl_open(FILE *f, const char *name, struct ob_jsonl **out);
void ob_jsonl_close(struct ob_jsonl *r);      /* does not fclose the stream */
/* 1 and *out = a record (caller frees with cJSON_Delete), 0 at end of input, <0 on error. */
int ob_jsonl_next(struct ob_jsonl *r, cJSON **out);
#ifdef __clang_analyzer__
/* for the analyzer (see ob_seterr above): 1 comes with a record */
#define ob_jsonl_next(r, out) __extension__({ cJSON **ob_out_ = (out); \
    int ob_got_ = ob_jsonl_next(r, ob_out_); \
    if (ob_got_ > 0 && !*ob_out_) \
        __builtin_unreachable(); \
    ob_got_; })
#endif
/* The next line as it is (blank ones too; a trailing "\r" removed), for a reader of text lines
 * with the same limits: 1 and *line (valid until the next call), 0 at the end, <0 an error. */
int ob_jsonl_next_line(struct ob_jsonl *r, char **line, size_t *len);
uint64_t ob_jsonl_line(const struct ob_jsonl *r);   /* line number of the last record read */
const char *ob_jsonl_name(const struct ob_jsonl *r);

/* The longest line (without its newline) any reader of JSON lines or text lines takes: a
 * record's cost is bounded by it. --max-line sets it; 0 restores the default. */
#define OB_MAX_LINE_DEFAULT ((size_t)256 << 20)
void ob_set_max_line(size_t bytes);
size_t ob_max_line(void);
/*
 * One line of f into *buf (allocated when NULL, grown with realloc to at most max + 2 bytes;
 * *cap its size), without its newline and NUL-terminated, *len its length. 1 with a line (an
 * empty one, a last line without a newline too), 0 at the end of input. Errors name
 * "NAME:LINENO": OB_EIO a failed read, OB_ENOMEM a failed allocation, OB_ERANGE a line longer
 * than max (read up to max bytes and one more), OB_EFORMAT a NUL byte (read up to it). After
 * an error the stream stands inside the line.
 */
int ob_read_line(FILE *f, const char *name, uint64_t lineno, size_t max, char **buf,
                 size_t *cap, size_t *len);

/* Write one record as one compact line and flush it. OB_EIO if the stream failed. The line is
 * always valid UTF-8: ill-formed bytes in a string are written as U+FFFD. */
int ob_jsonl_write(FILE *f, const cJSON *rec);
/* Compact JSON text of j (cJSON_PrintUnformatted) whose numbers read back to the same doubles:
 * cJSON's own printer may round one to 15 digits (2^53 as 9.00719925474099e+15) and writes
 * non-finite ones as null; those are written as ob_json_f64 does. Free with cJSON_free; NULL
 * when out of memory. Records (ob_jsonl_write) and request bodies are printed with it. */
char *ob_json_print(const cJSON *j);

/*
 * The one way 1b reads JSON text (records, request bodies, server replies, tokenizer files):
 * len bytes (NUL-terminated or not) as one JSON value, with nothing but blanks after it.
 * cJSON's strings end at their first NUL, so cJSON 1.7 cuts a string short at "\u0000" and at
 * an escape such as "\uZZZZ" (which it reads as 0), and it takes raw control bytes and
 * ill-formed UTF-8 into strings that are then written back out as invalid JSON. All of these
 * are refused here (OB_EFORMAT, "what at byte N"), never truncated: a NUL byte, a control
 * byte other than tab, LF and CR (and none of those inside a string), an escape other than
 * \" \\ \/ \b \f \n \r \t \uXXXX, \u0000, an unpaired surrogate, ill-formed UTF-8 (in strings
 * too, unless flags has OB_JSON_ANY_BYTES), a number beyond a double (cJSON would write it back
 * as null), and anything cJSON refuses. *out: the value (cJSON_Delete), NULL on error.
 */
enum {
    OB_JSON_ANY_BYTES = 1,         /* strings may hold ill-formed UTF-8, kept as they are (a
                                      server's token text may be part of a character); whoever
                                      writes them out replaces them (ob_utf8_sanitize) */
};
int ob_json_parse(const char *text, size_t len, int flags, cJSON **out);
/* The same, with a bound on the values the text holds (cJSON makes a node of 64 bytes of each
 * string, number, literal, array and object; object keys live in their values' nodes): a text
 * with more than max_values is refused with OB_ERANGE before cJSON allocates anything, having
 * cost one pass over its bytes. max_values 0: no bound. */
int ob_json_parse_max(const char *text, size_t len, int flags, size_t max_values, cJSON **out);
/* Length of the well-formed UTF-8 sequence at s (1-4; no overlong forms, surrogates or code
 * points above U+10FFFF), or 0 when the byte at s does not start one (NUL counts as
 * ill-formed) or it runs past end. */
int ob_utf8_len(const char *s, const char *end);
/* Strict UTF-8 as above; NUL bytes pass. */
bool ob_utf8_valid(const char *s, size_t n);

/*
 * Float32 in records: the shortest decimal that reads back (strtof) to the same bits, e.g.
 * "-0.031780876". Non-finite values are written as the strings "NaN", "Infinity",
 * "-Infinity" — never null. ob_f32_hex gives the bit pattern as 8 lowercase hex digits.
 */
#define OB_F32_BUFSZ 32
const char *ob_f32_str(float v, char buf[OB_F32_BUFSZ]);
const char *ob_f32_hex(float v, char buf[OB_F32_BUFSZ]);
/* The same for a double (shortest decimal that strtod reads back exactly). */
const char *ob_f64_str(double v, char buf[OB_F32_BUFSZ]);
/* A JSON item for a float32 / float64 as above (a raw number, or a string when non-finite). */
cJSON *ob_json_f32(float v);
cJSON *ob_json_f64(double v);
/* Whole numbers added to an object exactly (raw JSON digits: a cJSON number is a double and
 * would round beyond 2^53), and an array of byte values 0..255 (a token's exact bytes). */
void ob_json_add_int(cJSON *o, const char *key, int64_t v);
void ob_json_add_u64(cJSON *o, const char *key, uint64_t v);
cJSON *ob_json_bytes(const void *b, size_t n);
/* An array of token ids. */
cJSON *ob_json_ids(const int32_t *ids, int n);
/* Read a float32 from a JSON number or one of the non-finite strings. *exact is set to false
 * when the number, read as a double, is not exactly a float32 (a decimal that did not come from
 * a float32; it is rounded to nearest). */
int ob_json_get_f32(const cJSON *item, float *out, bool *exact);
/* Parse 8 hex digits into float bits. */
int ob_f32_from_hex(const char *s, float *out);

/* The largest seed a request may carry, in records, request bodies and options (--seed):
 * 2^53 - 1, the largest integer n such that a JSON number (a double) holds n and every integer
 * below it exactly. A number written as 2^53 + 1 is read as the double 2^53: refused, as on the
 * command line, instead of becoming another seed than the one written. */
#define OB_SEED_MAX (((int64_t)1 << 53) - 1)

/* ---- command-line options ----------------------------------------------------------------- */

/* One row per option. val is the short option character, or a value >= 256 for long-only
 * options; arg is the metavariable ("N", "FILE") or NULL for a flag. */
struct ob_option {
    const char *name;
    int val;
    const char *arg;
    const char *help;
    bool arg_optional;
    bool hidden;                   /* not in --help (still in --list-options) */
};
/* Option values every command shares, and the rows that end every command's table. A
 * command's own long-only options take values from 256 up. */
enum { OB_OPT_VERSION = 0x1000, OB_OPT_LIST };
#define OB_OPT_ROWS_SHARED                                                                \
    {"help", 'h', NULL, "show this help"},                                                \
    {"version", OB_OPT_VERSION, NULL, "show the version"},                                \
    {"list-options", OB_OPT_LIST, NULL, "list options for shell completion", .hidden = true}
/* The row of every command that reads lines (records, results, text): --max-line BYTES sets
 * ob_set_max_line; ob_cmdline_next takes it itself. */
enum { OB_OPT_MAX_LINE = 0x1008 };
#define OB_OPT_ROW_MAX_LINE                                                               \
    {"max-line", OB_OPT_MAX_LINE, "BYTES", "longest input line, K, M or G suffix (default 256M)"}
/* The rows of every command that talks to a server (--url), and where their values go. */
enum { OB_OPT_WAIT = 0x1010, OB_OPT_TIMEOUT, OB_OPT_RETRIES };
#define OB_OPT_ROWS_SERVER                                                                \
    {"wait", OB_OPT_WAIT, "SECONDS", "--url: wait this long for the server to be ready (default 60)"}, \
    {"timeout", OB_OPT_TIMEOUT, "SECONDS", "--url: give up on a request after this long (default 600)"}, \
    {"retries", OB_OPT_RETRIES, "N", "--url: retries after a connection error (default 5)"}
struct ob_server_opts {
    double wait, timeout;          /* seconds */
    int retries;
};
#define OB_SERVER_OPTS_DEFAULT {.wait = 60, .timeout = 600, .retries = 5}
/* c one of OB_OPT_WAIT, OB_OPT_TIMEOUT, OB_OPT_RETRIES: its argument into *so (--wait seconds
 * in [0, 86400], --timeout in [0.001, 86400]: there is always a limit; retries 0 .. 100); false
 * with "--NAME: why" in ob_errmsg(). */
bool ob_opt_server(int c, const char *arg, struct ob_server_opts *so);
/*
 * A command's option loop over one table (rows of its own, then OB_OPT_ROWS_SHARED):
 *
 *     struct ob_cmdline cl = {PROG, SYNOPSIS, ABOUT, options};
 *     while ((c = ob_cmdline_next(&cl, argc, argv)) != -1)
 *         switch (c) { case 't': cl.bad |= !ob_opt_int("threads", optarg, ...); ... }
 *     if (cl.stop)
 *         return cli_answer(&cl);   // cmd/cli.h: --help, --version, --list-options: 0
 *     if (cl.bad)
 *         return usage_error(cl.msg[0] ? cl.msg : "invalid command line");
 *
 * ob_cmdline_next returns the command's own options (getopt_long's value, optarg set) and -1
 * at the end: after the last option; after a shared one was answered (stop, status 0, the
 * text the command writes to stdout in answer, malloc'd); after an unknown option or a
 * missing argument (bad); once the command has set bad (msg then takes the reason its
 * ob_opt_* call left in ob_errmsg(), if any); or when its tables or the answer cannot be
 * allocated (stop, status OB_EXIT_FAILURE, msg "out of memory"). msg holds the first reason
 * the line is bad ("--ctx: '0' is not ...", "unknown option '-x'"), "" when there is none; it
 * prints nothing itself. It frees its tables when it returns -1. optind is the first operand
 * afterwards. Its first call sets SIGPIPE to be ignored: a write to a closed pipe is a failed
 * write (exit 5), not a death by signal. It takes --max-line (OB_OPT_ROW_MAX_LINE) itself.
 */
struct option;
struct ob_cmdline {
    const char *prog, *synopsis, *about;
    const struct ob_option *opts;
    bool bad, stop;
    int status;
    char *answer;                  /* stop with status 0: what stdout gets (malloc'd) */
    char msg[320];                 /* why the line is bad (or the failure of a stop), or "" */
    /* private */
    bool started;
    struct option *longs;
    char *shorts;
};
int ob_cmdline_next(struct ob_cmdline *cl, int argc, char **argv);
/* An option's argument as an integer or a number in [lo, hi]; false with "--NAME: why" in
 * ob_errmsg() (OB_EUSAGE), and *out untouched. ob_opt_u32 takes 1 .. 2^31-1. */
bool ob_opt_int(const char *name, const char *arg, int64_t lo, int64_t hi, int *out);
bool ob_opt_u32(const char *name, const char *arg, uint32_t *out);
/* The same for a 64-bit count or seed in [lo, hi] (0 <= lo <= hi), e.g. --seed 0 .. OB_SEED_MAX. */
bool ob_opt_u64(const char *name, const char *arg, int64_t lo, int64_t hi, uint64_t *out);
bool ob_opt_num(const char *name, const char *arg, double lo, double hi, double *out);
/* A size in bytes with an optional K, M or G suffix (powers of 1024), in [lo, hi]. */
bool ob_opt_size(const char *name, const char *arg, uint64_t lo, uint64_t hi, uint64_t *out);
/* An option's argument as one of a few words (a NULL-terminated table): its value into *out;
 * false with "--NAME: 'ARG' is not W1, W2 or W3" in ob_errmsg(). */
struct ob_opt_word {
    const char *word;
    int value;
};
bool ob_opt_choice(const char *name, const char *arg, const struct ob_opt_word *words,
                   int *out);
/* --thinking's words: on/true 1, off/false 0 */
extern const struct ob_opt_word ob_opt_words_on_off[];
/* An option's argument as a comma-separated list of 1 .. max integers in [lo, hi]: their
 * count, or 0 with "--NAME: why" in ob_errmsg(). */
int ob_opt_int_list(const char *name, const char *arg, int64_t lo, int64_t hi, int *out,
                    int max);

/* ---- small utilities used by commands ------------------------------------------------------- */

/* Strict number parsing for options: whole string, no overflow. */
int ob_parse_i64(const char *s, int64_t min, int64_t max, int64_t *out);
int ob_parse_f64(const char *s, double *out);
/* SHA-256 of a file as 64 lowercase hex digits (OpenSSL). */
int ob_sha256_file(const char *path, char out[65]);
/* A NUL-terminated copy of len bytes in which every ill-formed UTF-8 sequence (and NUL) is
 * replaced by U+FFFD, for JSON strings; NULL when out of memory. */
char *ob_utf8_sanitize(const char *s, size_t len);
/* Directory for cached data: $OB_CACHE_DIR, else $XDG_CACHE_HOME/1b, else ~/.cache/1b. */
int ob_cache_dir(char **out);
/* An input operand opened for reading ("-": standard input). A missing file is OB_ENOTFOUND;
 * a directory or an unreadable file OB_EFORMAT (both bad input: exit status 3); the message
 * names the path. */
int ob_open_input(const char *path, FILE **out);
/* The error an open() of a file the user named failed with, by errno: a path that cannot be
 * opened as a file (missing, dangling, a loop of links, not a directory on the way, too long,
 * not readable, a directory or a device) is bad input, OB_ENOTFOUND or OB_EFORMAT (exit 3);
 * anything else (no file descriptors, an I/O error) OB_EIO (exit 5). */
int ob_open_code(int en);
/*
 * A command's FILE operands in turn: names[0..n) (n 0: "-", standard input), each opened with
 * ob_open_input, passed to fn(user, name, f) and closed after it (standard input is left
 * open). An operand that cannot be opened is passed to fn with f NULL and the reason in
 * ob_errmsg() ("FILE: No such file or directory", strerror's words); the loop goes on after it
 * only when keep_going. fn returns 0 to go on, > 0 to read no more operands, or a negative
 * OB_E* that ends the loop and is returned (else 0). *unopened: the exit status of the worst
 * operand that could not be opened (3 missing or unreadable, 5 an I/O error; 0 none).
 */
typedef int (*ob_input_fn)(void *user, const char *name, FILE *f);
int ob_each_input(char *const *names, int n, bool keep_going, ob_input_fn fn, void *user,
                  int *unopened);
/* A report's output operand (--json FILE) opened for writing ("-": standard output, which
 * ob_stdout_close closes), before the work, so that an unwritable one is found at once: OB_EIO
 * "FILE: why". ob_output_record writes one record to it and closes it: OB_EIO "FILE: write: why"
 * ("stdout: ..." for standard output) when the record did not reach it. */
int ob_open_output(const char *path, FILE **out);
/* the option row of such a report, in the commands that write one */
#define OB_OPT_ROW_JSON(val) \
    {"json", (val), "FILE", "write the full report as JSON to FILE (- : standard output)"}
int ob_output_record(FILE *f, const char *path, const cJSON *rec);
/* At the end of a command: flush and close standard output. OB_EIO ("stdout: why") if a
 * write to it failed, earlier (its error flag) or now. */
int ob_stdout_close(void);

#ifdef __cplusplus
}
#endif
#endif
