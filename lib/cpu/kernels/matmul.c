/*
 * matmul.c — matrix times many rows on the cpu route: the scalar kernels (thin loops over the
 * references in dot.h and arith.h), the per-ISA kernel tables, and the threaded driver.
 *
 * Y[r][n] = dot(W row n, X row r) for a weight matrix W (N rows of K values, any supported
 * type) and R activation rows X quantised into W's activation format. The driver splits the
 * N output rows into chunks that the pool's threads take in any order; a thread computes
 * whole dot products, never part of one, so no result depends on the thread count. Two ways
 * through a chunk, chosen by R alone (never by the thread count), each computing exactly the
 * one-row bits:
 *  - few rows (decode, small batches): the dot kernel, one weight row against groups of up to
 *    OB_MAXR activation rows (weights reused from registers);
 *  - many rows (prefill, wide batches), where the level has a GEMM kernel for the type: the
 *    activation rows are converted once into the kernel's layout, then each thread decodes its
 *    weight rows into its own scratch once and runs every activation row against them.
 * A matrix in panels (matrix.h; the cpu route's copy holds the types a level wants so) takes
 * the level's panel entries instead (pgemv, pgemm), or, at a level without them, the dot
 * kernel on each panel's rows copied back.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/kernels/kernels.h"

/* ---- scalar kernels ------------------------------------------------------------------------ */

/* one per weight type of the list (types.h): ob_dot_<name> (dot.h) over each activation row,
 * a block of the weight type a block of its activation format */
#define SCALAR_ROWS(NAME, name, id, blck, bytes, ftype)                                 \
    static void rows_##name(const void *w, const void *a, size_t as, int nr, int k,     \
                            float *out)                                                 \
    {                                                                                   \
        for (int r = 0; r < nr; r++)                                                    \
            out[r] = ob_dot_##name(w, (const void *)((const char *)a + r * as), k / blck); \
    }
OB_TYPES_WEIGHT(SCALAR_ROWS)
#undef SCALAR_ROWS

static void actq_f32(const float *x, void *q, int n)
{
    memcpy(q, x, (size_t)n * sizeof(float));
}

static void actq_q8k(const float *x, void *q, int n)
{
    ob_quantize_q8k(x, q, n);
}

static void actq_a8(const float *x, void *q, int n)
{
    ob_quantize_a8(x, q, n);
}

void ob_kernels_scalar(struct ob_kernel_table *t)
{
#define SET(NAME, name, id, blck, bytes, ftype) t->dot[OB_##NAME] = rows_##name;
    OB_TYPES_WEIGHT(SET)
#undef SET
    t->actq[OB_ACT_F32] = actq_f32;
    t->actq[OB_ACT_Q8K] = actq_q8k;
    t->actq[OB_ACT_A8] = actq_a8;
}

#if !defined(__x86_64__)
void ob_kernels_avx2(struct ob_kernel_table *t) { (void)t; }
void ob_kernels_avx512(struct ob_kernel_table *t) { (void)t; }
#endif

/* ---- tables -------------------------------------------------------------------------------- */

static struct ob_kernel_table tables[OB_ISA_COUNT];
static pthread_once_t tables_once = PTHREAD_ONCE_INIT;

/* a level's entries over the level below's, where the CPU runs the level (simd.h) */
static void tables_init(void)
{
    int best = ob_isa_best();
    ob_kernels_scalar(&tables[OB_ISA_SCALAR]);
    tables[OB_ISA_AVX2] = tables[OB_ISA_SCALAR];
    if (best >= OB_ISA_AVX2)
        ob_kernels_avx2(&tables[OB_ISA_AVX2]);
    tables[OB_ISA_AVX512] = tables[OB_ISA_AVX2];
    if (best >= OB_ISA_AVX512)
        ob_kernels_avx512(&tables[OB_ISA_AVX512]);
}

const struct ob_kernel_table *ob_kernels(int isa)
{
    pthread_once(&tables_once, tables_init);
    return &tables[isa < 0 || isa >= OB_ISA_COUNT ? OB_ISA_SCALAR : isa];
}

/* ---- the threaded driver --------------------------------------------------------------------- */

struct mm_job {
    const struct ob_kernel_table *kt;
    const struct ob_gemm *gm;      /* the gemm or gemv entry of the prepared paths */
    const struct ob_matrix *w;
    const void *x;
    size_t x_stride;
    int nr;
    float *y;
    size_t ldy;
    int chunk;                     /* weight rows per task */
    /* GEMM path */
    const void *prep;              /* activations in the kernel's layout */
    char *scratch;                 /* per thread, sbytes each (the dot path over panels: a
                                      panel's rows copied back) */
    size_t sbytes;
    bool prefetch;                 /* dot path: prefetch weight rows ahead */
};

/*
 * Tasks per thread: the GEMMs take 8 (load balance); the few-row paths (up to OB_MAXR
 * activation rows), which stream their weights once, take 2: every task restarts the prefetch
 * (its first lines fetched at once, the window ahead stopping at its end), and with 8 a
 * 2-thread decode of Qwen3-0.6B Q4_K_M ran 5 % slower (bench/gen, 48.3 against 51.2 tok/s on
 * an AVX-512 Xeon; 1 thread the same).
 */
#define GEMM_TASKS 8
#define STREAM_TASKS 2

#define RTILE 64                   /* activation rows kept hot in cache while weights stream */

static void mm_task(void *ctx, int task, int thread)
{
    const struct mm_job *j = ctx;
    const struct ob_matrix *w = j->w;
    ob_dotrows_fn dot = j->kt->dot[w->type];
    int n0 = task * j->chunk, n1 = n0 + j->chunk < w->n ? n0 + j->chunk : w->n;
    float out[OB_MAXR];
    if (j->prefetch)
        ob_pf_task(w->data, w->row_bytes, n0, n1);
    for (int r0 = 0; r0 < j->nr; r0 += RTILE) {
        int r1 = r0 + RTILE < j->nr ? r0 + RTILE : j->nr;
        for (int n = n0; n < n1; n++) {
            const char *wr = (const char *)w->data + (size_t)n * w->row_bytes;
            if (w->layout == OB_LAYOUT_P8) {
                /* a level without panel kernels: the panel's rows back in the row layout */
                char *rows = j->scratch + (size_t)thread * j->sbytes;
                if (n % OB_PANEL_ROWS == 0)
                    for (int i = 0; i < OB_PANEL_ROWS; i++)
                        ob_panel_row(w, n + i, rows + (size_t)i * w->row_bytes);
                wr = rows + (size_t)(n % OB_PANEL_ROWS) * w->row_bytes;
            }
            /* decode streams each weight once: prefetch ahead (kernels.h; quantised rows only:
             * float rows stream well without, and F32 lost a little) */
            if (j->prefetch)
                ob_pf_row(w->data, w->row_bytes, n, n1);
            for (int r = r0; r < r1; r += OB_MAXR) {
                int m = r1 - r < OB_MAXR ? r1 - r : OB_MAXR;
                dot(wr, (const char *)j->x + (size_t)r * j->x_stride, j->x_stride, m, w->k, out);
                for (int i = 0; i < m; i++)
                    j->y[(size_t)(r + i) * j->ldy + n] = out[i];
            }
        }
    }
}

static void gemm_task(void *ctx, int task, int thread)
{
    const struct mm_job *j = ctx;
    const struct ob_matrix *w = j->w;
    int n0 = task * j->chunk, n1 = n0 + j->chunk < w->n ? n0 + j->chunk : w->n;
    j->gm->run(w->data, w->row_bytes, n0, n1, w->k, j->prep, j->nr, j->y, j->ldy,
                             j->scratch + (size_t)thread * j->sbytes);
}

static void *alloc32(size_t n)
{
    void *p = NULL;
    return posix_memalign(&p, 64, n ? n : 1) ? NULL : p;
}

/*
 * Through a gemm or gemv entry: the activation rows converted once, tasks of whole panels
 * (the weight rows the kernel decodes at once), `tasks` a thread, at least min_chunk rows each.
 */
static int run_prepared(struct ob_pool *pool, const struct ob_kernel_table *kt,
                        const struct ob_gemm *gm, const struct ob_matrix *w, const void *x,
                        size_t x_stride, int nr, float *y, size_t ldy, int min_chunk, int tasks)
{
    int threads = ob_pool_threads(pool);
    struct mm_job j = {.kt = kt, .gm = gm, .w = w, .x = x, .x_stride = x_stride, .nr = nr,
                       .y = y, .ldy = ldy};
    int pan = gm->panel, chunk = (w->n / (threads * tasks) + pan - 1) / pan * pan;
    j.chunk = chunk < pan ? pan : chunk;
    if (j.chunk < min_chunk)
        j.chunk = min_chunk;
    j.sbytes = (gm->scratch_bytes(w->k) + 63) / 64 * 64;
    void *prep = alloc32(gm->prep_bytes(w->k, nr));
    j.scratch = alloc32(j.sbytes * (size_t)threads);
    if (!prep || !j.scratch) {
        free(prep);
        free(j.scratch);
        return ob_seterr(OB_ENOMEM, "out of memory for a %d-row product", nr);
    }
    gm->prep(x, x_stride, nr, w->k, prep);
    j.prep = prep;
    ob_pool_run(pool, gemm_task, &j, (w->n + j.chunk - 1) / j.chunk);
    free(prep);
    free(j.scratch);
    return 0;
}

int ob_matmul(struct ob_pool *pool, int isa, const struct ob_matrix *w, const void *x,
              size_t x_stride, int nr, float *y, size_t ldy)
{
    const struct ob_kernel_table *kt = ob_kernels(isa);
    if (!kt->dot[w->type])
        return ob_seterr(OB_EUNSUPP, "no kernel for %s weights", ob_type_name(w->type));
    int threads = ob_pool_threads(pool);
    bool panels = w->layout == OB_LAYOUT_P8;
    const struct ob_gemm *gm = panels ? &kt->pgemm[w->type] : &kt->gemm[w->type];
    const struct ob_gemm *gv = panels ? &kt->pgemv[w->type] : &kt->gemv[w->type];
    if (gm->run && nr >= gm->min_rows)
        return run_prepared(pool, kt, gm, w, x, x_stride, nr, y, ldy, 1, GEMM_TASKS);
    if (gv->run && nr >= gv->min_rows)
        return run_prepared(pool, kt, gv, w, x, x_stride, nr, y, ldy, 4, STREAM_TASKS);
    /* tasks of whole weight rows (whole panels); many activation rows (float weights) balance
     * like a GEMM */
    int chunk = w->n / (threads * (nr <= OB_MAXR ? STREAM_TASKS : GEMM_TASKS));
    if (chunk < 4)
        chunk = 4;
    if (panels)
        chunk = (chunk + OB_PANEL_ROWS - 1) / OB_PANEL_ROWS * OB_PANEL_ROWS;
    struct mm_job j = {.kt = kt, .w = w, .x = x, .x_stride = x_stride, .nr = nr, .y = y,
                       .ldy = ldy, .chunk = chunk,
                       .prefetch = !panels && nr <= OB_MAXR &&
                                   ob_type_actfmt(w->type) != OB_ACT_F32};
    if (panels) {
        j.sbytes = (OB_PANEL_ROWS * w->row_bytes + 63) / 64 * 64;
        if (!(j.scratch = alloc32(j.sbytes * (size_t)threads)))
            return ob_seterr(OB_ENOMEM, "out of memory for a %d-row product", nr);
    }
    ob_pool_run(pool, mm_task, &j, (w->n + chunk - 1) / chunk);
    free(j.scratch);
    return 0;
}

int ob_act_quantize(int isa, uint32_t wtype, const float *x, int k, void *q)
{
    int fmt = ob_type_actfmt(wtype);
    if (k % ob_act_align(fmt))
        return ob_seterr(OB_EUSAGE, "row of %d values is not a multiple of %d", k,
                         ob_act_align(fmt));
    ob_kernels(isa)->actq[fmt](x, q, k);
    return 0;
}
