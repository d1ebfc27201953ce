/*
 * kernels.h — the cpu route's compute kernels, internal to lib/.
 *
 * Every kernel has a scalar reference (lib/arith/arith.h, lib/arith/dot.h) that defines its bits;
 * SIMD versions (one file per ISA: *-avx2.c, *-avx512.c) must be bitwise equal to it, which
 * tests/unit/kernels.c checks on random and real inputs. The ISA is chosen once at run time
 * (CPU detection, or OB_SIMD=scalar|avx2|avx512) and never changes a result bit.
 *
 * Thread safety: kernels are pure functions of their arguments; the pool (pool.c) runs them on
 * disjoint output ranges.
 */
#ifndef OB_KERNELS_H
#define OB_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "1b.h"
#include "host/pool.h"
#include "host/simd.h"
#include "matrix.h"
#include "arith/dot.h"

#define OB_MAXR 4                  /* activation rows one kernel call takes (weight reuse) */

/*
 * One weight row w (k values of its type) against nr <= OB_MAXR activation rows starting at a,
 * a_stride bytes apart, in the weight type's activation format: out[r] = dot(w, a_r).
 * Results are bitwise equal to the scalar reference whatever nr is.
 */
typedef void (*ob_dotrows_fn)(const void *w, const void *a, size_t a_stride, int nr, int k,
                              float *out);
/* Quantise n floats (a multiple of the format's block) into the activation format. */
typedef void (*ob_actq_fn)(const float *x, void *q, int n);

/*
 * Many activation rows against many weight rows (prefill, wide batches): optional per type and
 * ISA level (run NULL where a level has none). For one ob_matmul call the driver converts the
 * nr activation rows once into the kernel's own layout (prep: prep_bytes(k, nr) bytes at p,
 * 32-byte aligned), then calls run on the pool's threads for disjoint ranges [n0, n1) of
 * weight rows (row_bytes apart from w), each with scratch_bytes(k) bytes of its own thread's
 * scratch (32-byte aligned):
 *     y[r * ldy + n] = dot(w row n, x row r)   for r < nr, n0 <= n < n1,
 * bitwise equal to the one-row reference whatever nr, n0, n1 are. min_rows: the driver uses
 * run from this many activation rows on, dot below. panel: the weight rows run decodes at once;
 * the driver's ranges are multiples of it (but for the last), so that no panel is cut short.
 */
struct ob_gemm {
    int min_rows;
    int panel;
    size_t (*prep_bytes)(int k, int nr);
    void (*prep)(const void *x, size_t x_stride, int nr, int k, void *p);
    size_t (*scratch_bytes)(int k);
    void (*run)(const void *w, size_t row_bytes, int n0, int n1, int k, const void *p, int nr,
                float *y, size_t ldy, void *scratch);
};

/*
 * gemv: optional, the few-row way with prepared activations. Where a level has it for a type,
 * the driver uses it instead of dot for nr below gemm's min_rows (from gemv's min_rows on):
 * the same prep / run protocol as ob_gemm, panel 1, run taking any nr (tiles of up to OB_MAXR)
 * and prefetching its own weight rows OB_PF_BYTES ahead (it streams them once, as decode
 * does). Same bits as the one-row reference.
 */
struct ob_kernel_table {
    ob_dotrows_fn dot[OB_TYPE_COUNT];
    ob_actq_fn actq[3];            /* by enum ob_actfmt (types.h) */
    struct ob_gemm gemm[OB_TYPE_COUNT];
    struct ob_gemm gemv[OB_TYPE_COUNT];
    /*
     * The same two entries over a matrix held in panels (matrix.h OB_LAYOUT_P8): w is the
     * matrix's data, row_bytes its rows' bytes, n0 and n1 multiples of 8 (panel is 8). Where a
     * level has none for a type, ob_matmul copies each panel's rows back and runs the dot
     * entry (slow; the same bits).
     */
    struct ob_gemm pgemm[OB_TYPE_COUNT];
    struct ob_gemm pgemv[OB_TYPE_COUNT];
    /* the types (bit 1 << type) this level reads faster in panels: the cpu route's copy of the
     * weights holds its matrices of these types so (cpu/weights.h ob_model_weights) */
    uint64_t panels;
};

/* how far ahead the few-row paths prefetch weights: about twice memory latency x bandwidth
 * (the hardware prefetchers stop at page boundaries; 4096 streamed slower, bench/kernels) */
#define OB_PF_BYTES 2048

/*
 * The few-row paths' prefetch, into the L2 (prefetcht2, locality 1) and not the L1: an L1
 * prefetch holds one of the core's few L1 fill buffers until its line arrives, which capped
 * one core's stream below the plain streaming read (Q8_0 and Q6_K R = 1 at 80-85 % of it on an
 * AVX-512 Xeon, 95-110 % with the L2 hint; the non-temporal hint streamed 35-40 % slower, and
 * on the GEMMs' panel prefetch the hint made no difference). A task over weight rows [n0, n1)
 * first fetches the first OB_PF_BYTES of its range at once (the window ahead never covers them:
 * R = 1 streamed 2-8 % faster so, at 1 and 2 threads), then before row n the row OB_PF_BYTES
 * on, never past the range's end.
 */
static inline void ob_pf_span(const void *base, size_t at, size_t n, size_t end)
{
    /* offsets, not pointers: bounded by a comparison with a pointer past the range's end,
     * GCC 12 dropped the whole loop (such a pointer may not exist, so it may assume the
     * comparison away) and decode lost 14 % */
    for (size_t o = 0; o < n && at + o < end; o += 64)
        __builtin_prefetch((const char *)base + at + o, 0, 1);
}

static inline void ob_pf_task(const void *w, size_t row_bytes, int n0, int n1)
{
    ob_pf_span(w, (size_t)n0 * row_bytes, OB_PF_BYTES, (size_t)n1 * row_bytes);
}

/*
 * How far ahead the panel kernels (matrix.h's layout, one stream of 8 rows) prefetch with nr
 * activation rows: 2304 bytes (two Q4_K panel blocks) at one row, 4608 at more. With 2304, two
 * rows streamed 20-40 % slower; 4608 to 9216 measured alike, and 4608 cost one row 3-5 % on
 * the 151936-row matrix (bench/kernels, Q4_K on an AVX-512 Xeon at avx2).
 */
static inline size_t ob_pf_panel(int nr)
{
    return nr == 1 ? 2304 : 4608;
}

static inline void ob_pf_row(const void *w, size_t row_bytes, int n, int n1)
{
    ob_pf_span(w, (size_t)n * row_bytes + OB_PF_BYTES, row_bytes, (size_t)n1 * row_bytes);
}

/* the table of one ISA; entries a level does not have are filled from the level below, and
 * a level this CPU cannot run has the entries of the best it can (host/simd.h) */
const struct ob_kernel_table *ob_kernels(int isa);
void ob_kernels_scalar(struct ob_kernel_table *t);
void ob_kernels_avx2(struct ob_kernel_table *t);
void ob_kernels_avx512(struct ob_kernel_table *t);

/* ---- matrices (struct ob_matrix: lib/matrix.h) ---- */

/* y[r * ldy + i] = dot(w row i, x row r) for r < nr, i < w->n; x rows are x_stride bytes apart
 * in w's activation format (ob_act_quantize). */
int ob_matmul(struct ob_pool *pool, int isa, const struct ob_matrix *w, const void *x,
              size_t x_stride, int nr, float *y, size_t ldy);
/* Quantise one row of k floats into the activation format of weight type wtype
 * (ob_type_actfmt; the formats and their row bytes: types.h, 1b.h). */
int ob_act_quantize(int isa, uint32_t wtype, const float *x, int k, void *q);

#endif
