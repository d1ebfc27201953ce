/*
 * kernels — speed of the cpu route's matmul kernels (ob_matmul) against the machine's memory
 * bandwidth:
 *
 *   bin/bench/kernels [--types LIST] [--shapes LIST] [--threads LIST] [--widths LIST]
 *                     [--isa LIST] [--layout LIST] [--quick] [--hot] [--json] [...]
 *                     (--help for all)
 *
 * For every weight type x ISA level x shape K x N x thread count x batch width R it times one
 * ob_matmul call: W (N rows of K values of the type) times R activation rows that are already
 * quantised into the type's activation format, writing R x N floats. K is the row length (the
 * input width), N the number of output rows. Default shapes are the Qwen3-0.6B matrices:
 *   1024x2048 (q), 1024x1024 (k, v), 2048x1024 (o), 1024x3072 (gate, up), 3072x1024 (down),
 *   1024x151936 (output / tied embedding).
 *
 * Columns of the table (one line per case; --json gives one JSON object per line instead):
 *   us       median time of one ob_matmul call, microseconds (best in the `best` column)
 *   GB/s     weight bytes of W / median time: the rate at which weights are streamed. With
 *            R = 1 (decode) this is the number to hold against memory bandwidth.
 *   Mdot/s   dot products per second = output values per second = N * R / median time,
 *            in millions. Each dot product is one weight row times one activation row
 *            (K multiply-adds), so GMAC/s = Mdot/s * K / 1000.
 *   xR1      Mdot/s relative to the R = 1 case of the same type, ISA, shape and threads:
 *            how much a batch of R rows gains per row over decoding them one at a time
 *            (R would be ideal: weights read once for all R rows).
 *   actq     time to quantise the R activation rows (ob_act_quantize, one thread), us;
 *            not included in `us`.
 *   %bw      (R = 1 only) GB/s / streaming-read GB/s at the same thread count: the fraction of
 *            the machine's read bandwidth a decode step reaches. 100% is the ceiling for a
 *            matrix that has to come from memory; above 100% means the matrix came from cache.
 *   copies   how many copies of W the calls rotate over (below).
 *
 * Memory bandwidth: a plain streaming read (64-bit integer sum, AVX2 where the CPU has it) of a
 * buffer of --stream-mb MB, far beyond the caches, with each thread count, best of several
 * passes. It is measured again right before each weight type's cases (a shared machine's load
 * drifts), and %bw divides by that measurement; once more at the end.
 *
 * Cold weights: a decode step streams every matrix from memory (Qwen3-0.6B's weights are
 * hundreds of MB), but a 1024x1024 Q4_K matrix is 0.6 MB and would sit in L2/L3 if the same
 * copy were called again and again, inflating GB/s. So each type's weights live in an arena of
 * --rotate MB (default 512, well beyond the L3) holding as many copies of W as fit, and
 * successive calls use successive copies: every call reads its weights from memory, as in a
 * real decode. `--hot` uses one copy for every call instead (the cache-resident ceiling of the
 * kernel); lines whose matrix then fits in the L3 are flagged "hot".
 *
 * Weights are random floats quantised with ob_quant_row (the reference quantisers): 1024 runs
 * of 256 values (32 for the 32-value formats and floats) are quantised once per type and tiled
 * over the arena (speed depends on shapes,
 * not on values), so the 151936-row output matrix costs a copy, not a quantisation.
 *
 * Timing: per case, calls repeat until at least --reps calls and --time seconds, or until
 * --max-time seconds have passed (at least one call); a case whose predicted call time (from
 * the previous width) exceeds --max-call is skipped and says so.
 *
 * The ISA level is ob_isa_select's (the best the CPU runs, or OB_SIMD=scalar|avx2|avx512);
 * --isa scalar,avx2 runs several levels side by side in one run.
 *
 * The layout of W: as the cpu route's copy of the weights holds the type at that level
 * (--layout route, the default: in panels for the types the level wants so, kernels.h), or
 * rows, or panels (matrix.h; each copy of W packed from the row layout's, once per shape);
 * --layout rows,panels runs both side by side. A level's name carries "/p8" when W is in
 * panels; shapes panels cannot hold (N not a multiple of 8) are skipped for it.
 *
 * Exit status: 0 ok, 2 usage, 4 ISA not available, 5 other failure.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "1b.h"
#include "cpu/kernels/kernels.h"
#include "quant.h"
#include "../cmd/cli.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#define PROG "kernels"
#define MAXL 32                    /* entries in one list option */
#define UNIT 32                    /* K: a multiple of this (the 32-value formats' block) */
#define NUNITS 1024                /* distinct quantised units per type */

/* ---- small helpers ------------------------------------------------------------------------ */

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static uint64_t rng_state;
static uint64_t rnd(void)
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
/* uniform in [-1, 1) */
static float rnd_sym(void) { return (float)((double)(rnd() >> 11) * 0x1p-52 - 1.0); }

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/*
 * Memory advised to 2 MB pages, as the cpu route holds its weights (lib/cpu/weights.h
 * ob_model_weights): the arena of weight copies and the streaming-read buffer, so that the two
 * stream through the same kind of page. Freed with hfree.
 */
#define HUGE_BYTES ((size_t)2 << 20)
static size_t huge_round(size_t n) { return (n + HUGE_BYTES - 1) / HUGE_BYTES * HUGE_BYTES; }

static void *hmalloc(size_t n)
{
    size_t len = huge_round(n) + HUGE_BYTES;
    char *r = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (r == MAP_FAILED) {
        fprintf(stderr, PROG ": out of memory (%zu bytes)\n", n);
        exit(OB_EXIT_FAILURE);
    }
    char *p = (char *)(((uintptr_t)r + HUGE_BYTES - 1) & ~(uintptr_t)(HUGE_BYTES - 1));
    size_t head = (size_t)(p - r), tail = len - head - huge_round(n);
    if (head)
        munmap(r, head);
    if (tail)
        munmap(p + huge_round(n), tail);
    (void)madvise(p, huge_round(n), MADV_HUGEPAGE);  /* EINVAL without THP: 4 KB pages */
    return p;
}

static void hfree(void *p, size_t n)
{
    munmap(p, huge_round(n));
}

static void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p) {
        fprintf(stderr, PROG ": out of memory (%zu bytes)\n", n);
        exit(OB_EXIT_FAILURE);
    }
    return p;
}

/* the L3 a core sees (per CCX on AMD), bytes; 0 if unknown */
static size_t l3_bytes(void)
{
    FILE *f = fopen("/sys/devices/system/cpu/cpu0/cache/index3/size", "r");
    if (f) {
        unsigned long v = 0;
        char unit = 0;
        int n = fscanf(f, "%lu%c", &v, &unit);
        fclose(f);
        if (n >= 1 && v > 0)
            return (size_t)v * (unit == 'K' ? 1024 : unit == 'M' ? 1024 * 1024 : 1);
    }
    long s = sysconf(_SC_LEVEL3_CACHE_SIZE);
    return s > 0 ? (size_t)s : 0;
}

/* ---- streaming read ------------------------------------------------------------------------ */

#if defined(__x86_64__)
__attribute__((target("avx2"))) static uint64_t sum_avx2(const uint64_t *p, size_t n)
{
    __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        a0 = _mm256_add_epi64(a0, _mm256_loadu_si256((const __m256i *)(p + i)));
        a1 = _mm256_add_epi64(a1, _mm256_loadu_si256((const __m256i *)(p + i + 4)));
        a2 = _mm256_add_epi64(a2, _mm256_loadu_si256((const __m256i *)(p + i + 8)));
        a3 = _mm256_add_epi64(a3, _mm256_loadu_si256((const __m256i *)(p + i + 12)));
    }
    a0 = _mm256_add_epi64(_mm256_add_epi64(a0, a1), _mm256_add_epi64(a2, a3));
    uint64_t t[4];
    _mm256_storeu_si256((__m256i *)t, a0);
    uint64_t s = t[0] + t[1] + t[2] + t[3];
    for (; i < n; i++)
        s += p[i];
    return s;
}
#endif

static uint64_t sum_plain(const uint64_t *p, size_t n)
{
    uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    size_t i = 0;
    for (; i + 4 <= n; i += 4) {
        s0 += p[i];
        s1 += p[i + 1];
        s2 += p[i + 2];
        s3 += p[i + 3];
    }
    for (; i < n; i++)
        s0 += p[i];
    return s0 + s1 + s2 + s3;
}

static int have_avx2;

#define STREAM_CHUNK (4u << 20)    /* bytes per pool task */

struct stream_job {
    const uint64_t *buf;
    size_t words;
    uint64_t *sums;                /* one per task, so the reads cannot be optimised away */
};

static void stream_task(void *ctx, int i, int thread)
{
    (void)thread;
    const struct stream_job *j = ctx;
    size_t per = STREAM_CHUNK / 8, a = (size_t)i * per, n = j->words - a < per ? j->words - a : per;
#if defined(__x86_64__)
    if (have_avx2) {
        j->sums[i] = sum_avx2(j->buf + a, n);
        return;
    }
#endif
    j->sums[i] = sum_plain(j->buf + a, n);
}

struct stream_result {
    double best, med;              /* GB/s */
    int passes;
};

static struct stream_result stream_read(struct ob_pool *pool, const uint64_t *buf, size_t bytes,
                                        int passes)
{
    size_t words = bytes / 8;
    int ntask = (int)((bytes + STREAM_CHUNK - 1) / STREAM_CHUNK);
    uint64_t *sums = xmalloc((size_t)ntask * sizeof *sums);
    struct stream_job j = {buf, words, sums};
    double t[64];
    if (passes > 64)
        passes = 64;
    volatile uint64_t sink = 0;
    for (int p = 0; p < passes; p++) {
        double t0 = now();
        ob_pool_run(pool, stream_task, &j, ntask);
        t[p] = now() - t0;
        for (int i = 0; i < ntask; i++)
            sink += sums[i];
    }
    (void)sink;
    free(sums);
    struct stream_result r = {0, 0, passes};
    double best = t[0];
    for (int p = 1; p < passes; p++)
        best = t[p] < best ? t[p] : best;
    r.best = (double)words * 8 / best * 1e-9;
    r.med = (double)words * 8 / median(t, passes) * 1e-9;
    return r;
}

/* ---- options --------------------------------------------------------------------------------- */

enum {
    OPT_TYPES = 256, OPT_SHAPES, OPT_THREADS, OPT_WIDTHS, OPT_ISA, OPT_LAYOUT, OPT_REPS, OPT_TIME,
    OPT_MAXTIME, OPT_MAXCALL, OPT_ROTATE, OPT_HOT, OPT_STREAM, OPT_QUICK, OPT_JSON, OPT_SEED,
};

static const struct ob_option options[] = {
    {"types", OPT_TYPES, "LIST", "weight types, e.g. q4_k,q6_k,f32 (default: all 13 the cpu route has)"},
    {"shapes", OPT_SHAPES, "LIST", "KxN shapes, e.g. 1024x2048,640x262144 (default: Qwen3-0.6B's six); K a multiple of 32 (of 256 for the K-quants, skipped otherwise)"},
    {"threads", OPT_THREADS, "LIST", "thread counts (default 1,2)"},
    {"widths", OPT_WIDTHS, "LIST", "batch widths R, activation rows per call (default 1,4,16,64,512)"},
    {"isa", OPT_ISA, "LIST", "scalar, avx2, avx512 (default: OB_SIMD, else the best the CPU runs)"},
    {"layout", OPT_LAYOUT, "LIST", "route, rows, panels: how W is held (default route: as the cpu route's copy holds the type at the level)"},
    {"reps", OPT_REPS, "N", "at least N timed calls per case (default 5)"},
    {"time", OPT_TIME, "SEC", "at least SEC seconds of calls per case (default 0.1)"},
    {"max-time", OPT_MAXTIME, "SEC", "stop a case after SEC seconds (default 0.5; one call at least)"},
    {"max-call", OPT_MAXCALL, "SEC", "skip cases predicted to take longer than SEC per call (default 3; 0: never skip)"},
    {"rotate", OPT_ROTATE, "MB", "rotate calls over copies of W filling MB megabytes (default 512)"},
    {"hot", OPT_HOT, NULL, "call the same copy of W every time (cache-resident ceiling)"},
    {"stream-mb", OPT_STREAM, "MB", "buffer for the streaming-read bandwidth (default 512)"},
    {"quick", OPT_QUICK, NULL, "widths 1,16,512, shorter cases (reps 3, time 0.03, max-time 0.3, max-call 1), 256 MB buffers"},
    {"json", OPT_JSON, NULL, "JSON lines on stdout instead of the table"},
    {"seed", OPT_SEED, "N", "random seed of weights and activations (default 1)"},
    OB_OPT_ROWS_SHARED,
    {0},
};

struct shape { int k, n; };

struct cfg {
    uint32_t types[MAXL];
    int ntypes;
    struct shape shapes[MAXL];
    int nshapes;
    int threads[MAXL], nthreads;
    int widths[MAXL], nwidths;
    int isas[OB_ISA_COUNT], nisas;
    int layouts[3], nlayouts;      /* enum lay */
    struct level { int isa, lay; } lv[3 * OB_ISA_COUNT];   /* isas x layouts */
    int nlv;
    int reps;
    double time, max_time, max_call;
    double rotate_mb, stream_mb;
    bool hot, json;
    uint64_t seed;
};

enum lay { LAY_ROUTE, LAY_ROWS, LAY_PANELS };
static const char *const lay_names[] = {"route", "rows", "panels"};

/* whether level l holds weights of this type in panels (where a shape allows) */
static bool lv_panels(const struct level *l, uint32_t type)
{
    return l->lay == LAY_PANELS || (l->lay == LAY_ROUTE && (ob_kernels(l->isa)->panels >> type & 1));
}

/* the level's name in the tables: the ISA, "/p8" when W is in panels */
static const char *lv_name(const struct level *l, uint32_t type, char *buf, size_t n)
{
    snprintf(buf, n, "%s%s", ob_isa_name(l->isa), lv_panels(l, type) ? "/p8" : "");
    return buf;
}

static const uint32_t all_types[] = {OB_F32, OB_F16, OB_BF16, OB_Q4_0, OB_Q4_1, OB_Q5_0,
                                     OB_Q5_1, OB_Q8_0, OB_Q2_K, OB_Q3_K, OB_Q4_K, OB_Q5_K,
                                     OB_Q6_K};
static const struct shape qwen3_shapes[] = {{1024, 2048}, {1024, 1024}, {2048, 1024},
                                            {1024, 3072}, {3072, 1024}, {1024, 151936}};

/* split a comma list in place; returns the count or -1 when there are more than MAXL */
static int split(char *s, char **item)
{
    int n = 0;
    for (char *tok = strtok(s, ","); tok; tok = strtok(NULL, ",")) {
        if (n == MAXL)
            return -1;
        item[n++] = tok;
    }
    return n;
}

static int parse_types(const char *arg, struct cfg *c)
{
    char buf[1024], *item[MAXL];
    snprintf(buf, sizeof buf, "%s", arg);
    int m = split(buf, item);
    if (m <= 0) {
        fprintf(stderr, PROG ": --types: expected a comma-separated list\n");
        return 1;
    }
    c->ntypes = 0;
    for (int i = 0; i < m; i++) {
        if (strcmp(item[i], "all") == 0) {
            for (size_t t = 0; t < sizeof all_types / sizeof all_types[0] && c->ntypes < MAXL; t++)
                c->types[c->ntypes++] = all_types[t];
            continue;
        }
        int t = ob_type_from_name(item[i]);
        if (t < 0 || !ob_type_supported((uint32_t)t) || !ob_quant_supported((uint32_t)t)) {
            fprintf(stderr, PROG ": --types: '%s' is not a weight type the cpu route supports\n",
                    item[i]);
            return 1;
        }
        if (c->ntypes == MAXL) {
            fprintf(stderr, PROG ": --types: too many\n");
            return 1;
        }
        c->types[c->ntypes++] = (uint32_t)t;
    }
    return 0;
}

static int parse_shapes(const char *arg, struct cfg *c)
{
    char buf[1024], *item[MAXL];
    snprintf(buf, sizeof buf, "%s", arg);
    int m = split(buf, item);
    if (m <= 0) {
        fprintf(stderr, PROG ": --shapes: expected a comma-separated list of KxN\n");
        return 1;
    }
    for (int i = 0; i < m; i++) {
        char *x = strchr(item[i], 'x');
        int64_t k, n;
        if (!x) {
            fprintf(stderr, PROG ": --shapes: '%s' is not KxN\n", item[i]);
            return 1;
        }
        *x = 0;
        if (ob_parse_i64(item[i], UNIT, 1 << 20, &k) || ob_parse_i64(x + 1, 1, 1 << 24, &n) ||
            k % UNIT) {
            fprintf(stderr, PROG ": --shapes: K must be a multiple of %d up to 2^20 and N in "
                    "[1, 2^24]\n", UNIT);
            return 1;
        }
        c->shapes[i] = (struct shape){(int)k, (int)n};
    }
    c->nshapes = m;
    return 0;
}

static int parse_isas(const char *arg, struct cfg *c, int best)
{
    char buf[256], *item[MAXL];
    snprintf(buf, sizeof buf, "%s", arg);
    int m = split(buf, item);
    if (m <= 0 || m > OB_ISA_COUNT) {
        fprintf(stderr, PROG ": --isa: expected a list of scalar, avx2, avx512\n");
        return OB_EXIT_USAGE;
    }
    for (int i = 0; i < m; i++) {
        int found = -1;
        for (int l = 0; l < OB_ISA_COUNT; l++)
            if (strcmp(item[i], ob_isa_name(l)) == 0)
                found = l;
        if (found < 0) {
            fprintf(stderr, PROG ": --isa: '%s': expected scalar, avx2 or avx512\n", item[i]);
            return OB_EXIT_USAGE;
        }
        if (found > best) {
            fprintf(stderr, PROG ": --isa: %s, but this CPU runs only up to %s\n", item[i],
                    ob_isa_name(best));
            return OB_EXIT_DEVICE;
        }
        c->isas[i] = found;
    }
    c->nisas = m;
    return 0;
}

static int parse_layouts(const char *arg, struct cfg *c)
{
    char buf[256], *item[MAXL];
    snprintf(buf, sizeof buf, "%s", arg);
    int m = split(buf, item);
    if (m <= 0 || m > 3) {
        fprintf(stderr, PROG ": --layout: expected a list of route, rows, panels\n");
        return OB_EXIT_USAGE;
    }
    for (int i = 0; i < m; i++) {
        int found = -1;
        for (int l = 0; l < 3; l++)
            if (strcmp(item[i], lay_names[l]) == 0)
                found = l;
        if (found < 0) {
            fprintf(stderr, PROG ": --layout: '%s': expected route, rows or panels\n", item[i]);
            return OB_EXIT_USAGE;
        }
        c->layouts[i] = found;
    }
    c->nlayouts = m;
    return 0;
}

/* ---- one case ---------------------------------------------------------------------------------- */

struct result {
    bool skipped;
    int calls, copies;
    double med, best;              /* seconds per call */
    double actq;                   /* seconds to quantise the R rows */
    double gbps, mdots, xr1, bw;   /* bw: fraction of streaming read (R = 1), else < 0 */
};

static void print_header(void)
{
    printf("%-5s %-9s %3s %5s %7s %4s %6s %5s %10s %10s %8s %9s %7s %9s %6s\n", "type", "isa",
           "thr", "K", "N", "R", "copies", "calls", "us", "best", "GB/s", "Mdot/s", "xR1",
           "actq_us", "%bw");
}

static void print_line(uint32_t type, const char *level, int thr, struct shape s, int r,
                       const struct result *res, bool hot_flag, double skipped_pred)
{
    printf("%-5s %-9s %3d %5d %7d %4d ", ob_type_name(type), level, thr, s.k, s.n, r);
    if (res->skipped) {
        printf("skipped: predicted %.1f s per call > --max-call\n", skipped_pred);
        return;
    }
    char xr1[16] = "-", bw[16] = "-";
    if (res->xr1 > 0)
        snprintf(xr1, sizeof xr1, "%.2f", res->xr1);
    if (res->bw >= 0)
        snprintf(bw, sizeof bw, "%.0f%%", 100 * res->bw);
    printf("%6d %5d %10.1f %10.1f %8.2f %9.1f %7s %9.1f %6s%s\n", res->copies, res->calls,
           res->med * 1e6, res->best * 1e6, res->gbps, res->mdots, xr1, res->actq * 1e6, bw,
           hot_flag ? " hot" : "");
}

static void json_line(uint32_t type, int isa, bool panels, int thr, struct shape s, int r,
                      size_t wbytes, const struct result *res, bool hot_flag, double stream_gbps,
                      double pred)
{
    char id[128];
    snprintf(id, sizeof id, "kernels/%s/%s%s/t%d/%dx%d/r%d", ob_type_name(type), ob_isa_name(isa),
             panels ? "/p8" : "", thr, s.k, s.n, r);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "id", id);
    cJSON_AddStringToObject(o, "bench", "kernels");
    cJSON_AddStringToObject(o, "type", ob_type_name(type));
    cJSON_AddStringToObject(o, "isa", ob_isa_name(isa));
    cJSON_AddStringToObject(o, "layout", panels ? "panels" : "rows");
    cJSON_AddNumberToObject(o, "threads", thr);
    cJSON_AddNumberToObject(o, "k", s.k);
    cJSON_AddNumberToObject(o, "n", s.n);
    cJSON_AddNumberToObject(o, "width", r);
    cJSON_AddNumberToObject(o, "weight_bytes", (double)wbytes);
    if (res->skipped) {
        cJSON_AddBoolToObject(o, "skipped", true);
        cJSON_AddNumberToObject(o, "predicted_s", pred);
    } else {
        cJSON_AddNumberToObject(o, "copies", res->copies);
        cJSON_AddNumberToObject(o, "calls", res->calls);
        cJSON_AddNumberToObject(o, "us_median", res->med * 1e6);
        cJSON_AddNumberToObject(o, "us_best", res->best * 1e6);
        cJSON_AddNumberToObject(o, "gbps", res->gbps);
        cJSON_AddNumberToObject(o, "gbps_best", (double)wbytes / res->best * 1e-9);
        cJSON_AddNumberToObject(o, "mdot_per_s", res->mdots);
        if (res->xr1 > 0)
            cJSON_AddNumberToObject(o, "x_r1", res->xr1);
        cJSON_AddNumberToObject(o, "actq_us", res->actq * 1e6);
        cJSON_AddBoolToObject(o, "hot", hot_flag);
        if (res->bw >= 0) {
            cJSON_AddNumberToObject(o, "stream_gbps", stream_gbps);
            cJSON_AddNumberToObject(o, "stream_ratio", res->bw);
        }
    }
    ob_jsonl_write(stdout, o);
    cJSON_Delete(o);
}

/* time ob_matmul on one case; W copy i % copies for call i */
static void time_matmul(const struct cfg *c, struct ob_pool *pool, int isa, uint32_t type,
                        struct shape s, size_t rb, const uint8_t *arena, int layout, int copies,
                        const void *xq, size_t xs, int r, float *y, double *times, int maxcalls,
                        struct result *res)
{
    size_t mbytes = rb * (size_t)s.n;
    double start = now();
    int calls = 0;
    for (;;) {
        struct ob_matrix w = {type, s.k, s.n, rb, arena + (size_t)(calls % copies) * mbytes,
                              layout};
        double t0 = now();
        int rc = ob_matmul(pool, isa, &w, xq, xs, r, y, (size_t)s.n);
        double t1 = now();
        if (rc) {
            fprintf(stderr, PROG ": ob_matmul: %s\n", ob_errmsg());
            exit(OB_EXIT_FAILURE);
        }
        times[calls++] = t1 - t0;
        double el = t1 - start;
        if ((calls >= c->reps && el >= c->time) || el >= c->max_time || calls == maxcalls)
            break;
    }
    double best = times[0];
    for (int i = 1; i < calls; i++)
        best = times[i] < best ? times[i] : best;
    res->calls = calls;
    res->best = best;
    res->med = median(times, calls);
}

/* time the activation quantisation of r rows of k floats (one thread) */
static double time_actq(int isa, uint32_t type, const float *x, int k, int r, void *xq,
                        size_t xs, double *times, int maxcalls, double min_time)
{
    double start = now();
    int calls = 0;
    for (;;) {
        double t0 = now();
        for (int i = 0; i < r; i++)
            ob_act_quantize(isa, type, x + (size_t)i * k, k, (char *)xq + (size_t)i * xs);
        double t1 = now();
        times[calls++] = t1 - t0;
        if ((calls >= 3 && t1 - start >= min_time) || calls == maxcalls)
            break;
    }
    return median(times, calls);
}

/* print one streaming-read measurement (all thread counts): a comment line, or JSON records */
static void emit_stream(const struct cfg *c, const char *when, const struct stream_result *sr,
                        size_t bytes)
{
    if (!c->json) {
        printf("# streaming read (%s):", when);
        for (int t = 0; t < c->nthreads; t++)
            printf("%s %d thread%s %.2f GB/s (median %.2f)", t ? "," : "", c->threads[t],
                   c->threads[t] > 1 ? "s" : "", sr[t].best, sr[t].med);
        printf("\n");
        return;
    }
    for (int t = 0; t < c->nthreads; t++) {
        char id[96];
        snprintf(id, sizeof id, "stream/t%d/%s", c->threads[t], when);
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "id", id);
        cJSON_AddStringToObject(o, "bench", "stream");
        cJSON_AddStringToObject(o, "when", when);
        cJSON_AddNumberToObject(o, "threads", c->threads[t]);
        cJSON_AddNumberToObject(o, "bytes", (double)bytes);
        cJSON_AddNumberToObject(o, "passes", sr[t].passes);
        cJSON_AddNumberToObject(o, "gbps_best", sr[t].best);
        cJSON_AddNumberToObject(o, "gbps_median", sr[t].med);
        ob_jsonl_write(stdout, o);
        cJSON_Delete(o);
    }
}

/* ---- main ------------------------------------------------------------------------------------------ */

int main(int argc, char **argv)
{
    struct cfg c = {.reps = 5, .time = 0.1, .max_time = 0.5, .max_call = 3.0,
                    .rotate_mb = 512, .stream_mb = 512, .seed = 1};
    bool quick = false, set_widths = false, set_time = false, set_maxtime = false,
         set_reps = false, set_rotate = false, set_stream = false, set_isa = false,
         set_maxcall = false;
    int best_isa = ob_isa_best();
    struct ob_cmdline cl = {PROG, PROG " [options]",
                            "Time ob_matmul per weight type, shape, thread count and batch width, "
                            "against the streaming-read memory bandwidth.",
                            options};
    for (size_t i = 0; i < sizeof all_types / sizeof all_types[0]; i++)
        c.types[c.ntypes++] = all_types[i];
    memcpy(c.shapes, qwen3_shapes, sizeof qwen3_shapes);
    c.nshapes = (int)(sizeof qwen3_shapes / sizeof qwen3_shapes[0]);
    c.threads[0] = 1;
    c.threads[1] = 2;
    c.nthreads = 2;
    static const int def_widths[] = {1, 4, 16, 64, 512};
    memcpy(c.widths, def_widths, sizeof def_widths);
    c.nwidths = 5;

    int ch;
    while ((ch = ob_cmdline_next(&cl, argc, argv)) != -1) {
        int64_t v;
        double d;
        switch (ch) {
        case OPT_TYPES: cl.bad = parse_types(optarg, &c); break;
        case OPT_SHAPES: cl.bad = parse_shapes(optarg, &c); break;
        case OPT_THREADS: cl.bad = !(c.nthreads = ob_opt_int_list("threads", optarg, 1, 256, c.threads, MAXL)); break;
        case OPT_WIDTHS:
            cl.bad = !(c.nwidths = ob_opt_int_list("widths", optarg, 1, 4096, c.widths, MAXL));
            set_widths = true;
            break;
        case OPT_ISA: {
            int rc = parse_isas(optarg, &c, best_isa);
            if (rc) {
                cl.stop = true;
                cl.status = rc;
            }
            set_isa = true;
            break;
        }
        case OPT_LAYOUT: cl.bad = parse_layouts(optarg, &c) != 0; break;
        case OPT_REPS:
            if (ob_parse_i64(optarg, 1, 10000, &v)) {
                fprintf(stderr, PROG ": --reps: %s\n", ob_errmsg());
                cl.bad = true;
            }
            c.reps = (int)v;
            set_reps = true;
            break;
        case OPT_TIME: case OPT_MAXTIME: case OPT_MAXCALL: case OPT_ROTATE: case OPT_STREAM:
            if (ob_parse_f64(optarg, &d) || !(d >= 0) || d > 1e6) {
                fprintf(stderr, PROG ": --%s: expected a number >= 0\n",
                        ch == OPT_TIME ? "time" : ch == OPT_MAXTIME ? "max-time" :
                        ch == OPT_MAXCALL ? "max-call" : ch == OPT_ROTATE ? "rotate" : "stream-mb");
                cl.bad = true;
                break;
            }
            if (ch == OPT_TIME) { c.time = d; set_time = true; }
            if (ch == OPT_MAXTIME) { c.max_time = d; set_maxtime = true; }
            if (ch == OPT_MAXCALL) { c.max_call = d; set_maxcall = true; }
            if (ch == OPT_ROTATE) { c.rotate_mb = d; set_rotate = true; }
            if (ch == OPT_STREAM) { c.stream_mb = d; set_stream = true; }
            break;
        case OPT_HOT: c.hot = true; break;
        case OPT_QUICK: quick = true; break;
        case OPT_JSON: c.json = true; break;
        case OPT_SEED:
            if (ob_parse_i64(optarg, 0, INT64_MAX, &v)) {
                fprintf(stderr, PROG ": --seed: %s\n", ob_errmsg());
                cl.bad = true;
            }
            c.seed = (uint64_t)v;
            break;
        }
    }
    if (cl.stop)
        return cli_answer(&cl);
    if (!cl.bad && optind < argc) {
        fprintf(stderr, PROG ": unexpected argument '%s'\n", argv[optind]);
        cl.bad = true;
    }
    if (cl.bad) {
        if (cl.msg[0])
            cli_bad(&cl);
        fprintf(stderr, "try '" PROG " --help'\n");
        return OB_EXIT_USAGE;
    }
    if (quick) {
        static const int q_widths[] = {1, 16, 512};
        if (!set_widths) {
            memcpy(c.widths, q_widths, sizeof q_widths);
            c.nwidths = 3;
        }
        if (!set_time)
            c.time = 0.03;
        if (!set_maxtime)
            c.max_time = 0.3;
        if (!set_reps)
            c.reps = 3;
        if (!set_rotate)
            c.rotate_mb = 256;
        if (!set_stream)
            c.stream_mb = 256;
        if (!set_maxcall)
            c.max_call = 1.0;
    }
    if (!set_isa) {
        int isa;
        int rc = ob_isa_select(&isa);
        if (rc) {
            fprintf(stderr, PROG ": %s\n", ob_errmsg());
            return ob_exit_status(rc);
        }
        c.isas[0] = isa;
        c.nisas = 1;
    }
    if (!c.nlayouts)
        c.layouts[c.nlayouts++] = LAY_ROUTE;
    for (int i = 0; i < c.nisas; i++)
        for (int l = 0; l < c.nlayouts; l++)
            c.lv[c.nlv++] = (struct level){c.isas[i], c.layouts[l]};
    if (c.hot)
        c.rotate_mb = 0;
    have_avx2 = ob_cpu_has("avx2", NULL) == 1;     /* CPUID, as OB_CPU_LACKS leaves it */

    /* ---- pools, buffers ---- */
    struct ob_pool *pools[MAXL];
    for (int t = 0; t < c.nthreads; t++)
        if (ob_pool_new(c.threads[t], &pools[t])) {
            fprintf(stderr, PROG ": %s\n", ob_errmsg());
            return OB_EXIT_FAILURE;
        }
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    for (int t = 0; t < c.nthreads; t++)
        if (ncpu > 0 && c.threads[t] > ncpu)
            fprintf(stderr, PROG ": warning: %d threads on %ld online cpus\n", c.threads[t], ncpu);

    int maxk = 0, maxr = 0;
    size_t maxy = 0;
    for (int i = 0; i < c.nshapes; i++)
        maxk = c.shapes[i].k > maxk ? c.shapes[i].k : maxk;
    for (int i = 0; i < c.nwidths; i++)
        maxr = c.widths[i] > maxr ? c.widths[i] : maxr;
    for (int i = 0; i < c.nshapes; i++)
        for (int j = 0; j < c.nwidths; j++) {
            size_t ny = (size_t)c.shapes[i].n * (size_t)c.widths[j];
            maxy = ny > maxy ? ny : maxy;
        }
    rng_state = c.seed;
    float *x = xmalloc((size_t)maxr * (size_t)maxk * sizeof(float));
    for (size_t i = 0; i < (size_t)maxr * (size_t)maxk; i++)
        x[i] = rnd_sym() * (float)(1 + i % 7);       /* a little spread between blocks */
    size_t xq_bytes = (size_t)maxr * ob_act_row_bytes(OB_ACT_F32, maxk);  /* the largest format */
    void *xq = xmalloc(xq_bytes);
    float *y = xmalloc(maxy * sizeof(float));
    memset(y, 0, maxy * sizeof(float));              /* fault the pages in now */
    enum { MAXCALLS = 100000 };
    double *times = xmalloc(MAXCALLS * sizeof(double));

    size_t l3 = l3_bytes();
    size_t stream_bytes = (size_t)(c.stream_mb * 1048576.0) / STREAM_CHUNK * STREAM_CHUNK;
    if (stream_bytes < STREAM_CHUNK)
        stream_bytes = STREAM_CHUNK;
    uint64_t *sbuf = hmalloc(stream_bytes);
    for (size_t i = 0; i < stream_bytes / 8; i++)
        sbuf[i] = i;
    int spasses = quick ? 3 : 5;
    struct stream_result sr[MAXL];
    for (int t = 0; t < c.nthreads; t++)
        sr[t] = stream_read(pools[t], sbuf, stream_bytes, spasses);

    /* ---- header ---- */
    if (!c.json)
        printf("# kernels: ob_matmul per call; weights %s; L3 %.0f MB; stream buffer %.0f MB, "
               "%s sum, best of %d passes\n",
               c.hot ? "hot (one copy, --hot)" : "rotated over copies (cold, from memory)",
               l3 / 1048576.0, stream_bytes / 1048576.0, have_avx2 ? "avx2" : "scalar", spasses);
    emit_stream(&c, "start", sr, stream_bytes);
    if (!c.json)
        print_header();
    fflush(stdout);

    /* R = 1 results and results at the largest width, for the summary: [type][isa][thr][shape] */
    int wmax = 0;
    for (int i = 0; i < c.nwidths; i++)
        wmax = c.widths[i] > wmax ? c.widths[i] : wmax;
    size_t nsum = (size_t)c.ntypes * c.nlv * c.nthreads * c.nshapes;
    struct result *r1 = calloc(nsum, sizeof *r1), *rbig = calloc(nsum, sizeof *rbig);
    /* the streaming read measured just before each type's cases: [type][threads], GB/s */
    double *st = calloc((size_t)c.ntypes * c.nthreads, sizeof *st);
    if (!r1 || !rbig || !st) {
        fprintf(stderr, PROG ": out of memory\n");
        return OB_EXIT_FAILURE;
    }

    /* ---- the weight types ---- */
    for (int ti = 0; ti < c.ntypes; ti++) {
        uint32_t type = c.types[ti];
        /* the tiling unit: one K-quant block, or 32 values (K of a shape that is not a
         * multiple of it is skipped for this type) */
        const int unit = ob_type_blck(type) == 256 ? 256 : UNIT;
        uint64_t ub64;
        ob_type_row_bytes(type, (uint64_t)unit, &ub64);
        size_t ub = (size_t)ub64;
        /* the arena: at least the largest matrix, at least --rotate MB */
        size_t maxm = 0;
        for (int i = 0; i < c.nshapes; i++) {
            size_t m = (size_t)c.shapes[i].n * (size_t)(c.shapes[i].k / unit) * ub;
            maxm = m > maxm ? m : maxm;
        }
        size_t abytes = (size_t)(c.rotate_mb * 1048576.0);
        abytes = abytes < maxm ? maxm : abytes;
        abytes = (abytes + ub - 1) / ub * ub;
        double tq0 = now();
        uint8_t *units = xmalloc(NUNITS * ub);
        float *src = xmalloc((size_t)NUNITS * unit * sizeof(float));
        for (int u = 0; u < NUNITS; u++) {
            float scale = 0.01f * (float)(1 + u % 13);
            for (int i = 0; i < unit; i++)
                src[u * unit + i] = rnd_sym() * scale;
        }
        if (ob_quant_row(type, src, units, (int64_t)NUNITS * unit)) {
            fprintf(stderr, PROG ": quantise %s: %s\n", ob_type_name(type), ob_errmsg());
            return OB_EXIT_FAILURE;
        }
        free(src);
        uint8_t *arena = hmalloc(abytes);
        for (size_t off = 0, u = 0; off < abytes; off += ub, u = (u + 1) % NUNITS)
            memcpy(arena + off, units + u * ub, ub);
        free(units);
        if (!c.json)
            fprintf(stderr, "%s: weights ready (%.0f MB arena, %.2f s)\n", ob_type_name(type),
                    abytes / 1048576.0, now() - tq0);
        /* bandwidth again right before this type's cases: a shared machine's load drifts, and
         * %bw should compare numbers measured side by side */
        if (ti > 0) {
            for (int t = 0; t < c.nthreads; t++)
                sr[t] = stream_read(pools[t], sbuf, stream_bytes, spasses);
            emit_stream(&c, ob_type_name(type), sr, stream_bytes);
        }
        for (int t = 0; t < c.nthreads; t++)
            st[(size_t)ti * c.nthreads + t] = sr[t].best;
        const double *stream_gbps = st + (size_t)ti * c.nthreads;

        uint8_t *parena = NULL;            /* the arena's copies of W in panels, for one shape */
        struct shape pshape = {0, 0};
        for (int ii = 0; ii < c.nlv; ii++) {
            int isa = c.lv[ii].isa;
            char lname[32];
            lv_name(&c.lv[ii], type, lname, sizeof lname);
            for (int si = 0; si < c.nshapes; si++) {
                struct shape s = c.shapes[si];
                if (s.k % unit) {
                    if (ii == 0)
                        fprintf(stderr, "%s: %dx%d skipped: K is not a multiple of %d\n",
                                ob_type_name(type), s.k, s.n, unit);
                    continue;
                }
                size_t rb = (size_t)(s.k / unit) * ub, mbytes = rb * (size_t)s.n;
                int copies = c.hot ? 1 : (int)(abytes / mbytes);
                if (copies < 1)
                    copies = 1;
                bool hot_flag = copies * mbytes <= l3 || (c.hot && mbytes <= l3);
                /* W in panels: each copy packed from the row layout's (once per shape) */
                struct ob_matrix wr = {type, s.k, s.n, rb, arena, OB_LAYOUT_ROWS};
                bool pan = lv_panels(&c.lv[ii], type) && ob_panel_fits(&wr);
                if (lv_panels(&c.lv[ii], type) && !pan) {
                    fprintf(stderr, "%s: %dx%d skipped for %s: not a matrix panels hold\n",
                            ob_type_name(type), s.k, s.n, lname);
                    continue;
                }
                if (pan && (pshape.k != s.k || pshape.n != s.n)) {
                    if (!parena)
                        parena = hmalloc(abytes);
                    for (int cp = 0; cp < copies; cp++) {
                        wr.data = arena + (size_t)cp * mbytes;
                        ob_panel_pack(&wr, parena + (size_t)cp * mbytes);
                    }
                    pshape = s;
                }
                int fmt = ob_type_actfmt(type);
                size_t xs = ob_act_row_bytes(fmt, s.k);
                /* activation quantisation, once per width (independent of threads) */
                double actq[MAXL];
                for (int wi = 0; wi < c.nwidths; wi++)
                    actq[wi] = time_actq(isa, type, x, s.k, c.widths[wi], xq, xs, times, MAXCALLS,
                                         c.time < 0.02 ? c.time : 0.02);
                for (int th = 0; th < c.nthreads; th++) {
                    double ref_mdots = 0;
                    double prev_med = 0;
                    int prev_w = 0;
                    size_t idx = (((size_t)ti * c.nlv + ii) * c.nthreads + th) * c.nshapes + si;
                    for (int wi = 0; wi < c.nwidths; wi++) {
                        int r = c.widths[wi];
                        /* xq holds rows 0 .. max width - 1: time_actq quantised them */
                        struct result res = {0};
                        res.bw = -1;
                        double pred = prev_w ? prev_med * r / prev_w : 0;
                        if (prev_w && c.max_call > 0 && pred > c.max_call) {
                            res.skipped = true;
                        } else {
                            res.copies = copies;
                            time_matmul(&c, pools[th], isa, type, s, rb, pan ? parena : arena,
                                        pan ? OB_LAYOUT_P8 : OB_LAYOUT_ROWS, copies, xq, xs, r,
                                        y, times, MAXCALLS, &res);
                            res.actq = actq[wi];
                            res.gbps = (double)mbytes / res.med * 1e-9;
                            res.mdots = (double)s.n * r / res.med * 1e-6;
                            if (r == 1) {
                                ref_mdots = res.mdots;
                                res.bw = res.gbps / stream_gbps[th];
                                r1[idx] = res;
                            }
                            res.xr1 = ref_mdots > 0 ? res.mdots / ref_mdots : -1;
                            if (r == wmax)
                                rbig[idx] = res;
                            prev_med = res.med;
                            prev_w = r;
                        }
                        if (c.json)
                            json_line(type, isa, pan, c.threads[th], s, r, mbytes, &res, hot_flag,
                                      stream_gbps[th], pred);
                        else
                            print_line(type, lname, c.threads[th], s, r, &res, hot_flag, pred);
                        fflush(stdout);
                    }
                }
            }
        }
        hfree(arena, abytes);
        if (parena)
            hfree(parena, abytes);
    }

    /* ---- bandwidth once more, then the summary ---- */
    for (int t = 0; t < c.nthreads; t++)
        sr[t] = stream_read(pools[t], sbuf, stream_bytes, spasses);
    emit_stream(&c, "end", sr, stream_bytes);

    /*
     * Summary per type, ISA and thread count:
     *  - decode: R = 1 over all shapes together (weight bytes / time), against the best
     *    streaming read;
     *  - xRmax: Mdot/s at the largest width of --widths over Mdot/s at R = 1, over the shapes
     *    measured at both (a skipped case leaves its shape out; `shapes` says how many are in);
     *  - tok/s: with Qwen3-0.6B's six shapes, a matmul-only decode estimate: 28 layers of q, k,
     *    v, o, gate, up, down plus the output matrix, R = 1, one weight type everywhere.
     */
    int rmax = 0;
    for (int i = 0; i < c.nwidths; i++)
        rmax = c.widths[i] > rmax ? c.widths[i] : rmax;
    if (!c.json) {
        char xh[32];
        snprintf(xh, sizeof xh, "xR%d", rmax);
        printf("\n# summary: decGB/s = R=1 over all shapes (bytes/time), %%bw against the "
               "streaming read measured before the type;\n");
        if (rmax > 1)
            printf("# %s = Mdot/s at R=%d / at R=1 over the shapes measured at both;\n", xh, rmax);
        printf("# tok/s = Qwen3-0.6B decode estimate from the matmuls alone (R=1, all six shapes)\n"
               "%-5s %-9s %3s %10s %6s %8s %7s %9s\n",
               "type", "isa", "thr", "decGB/s", "%bw", xh, "shapes", "tok/s");
    }
    for (int ti = 0; ti < c.ntypes; ti++)
        for (int ii = 0; ii < c.nlv; ii++)
            for (int th = 0; th < c.nthreads; th++) {
                char lname[32];
                lv_name(&c.lv[ii], c.types[ti], lname, sizeof lname);
                double bytes = 0, t1 = 0, t1b = 0, dots = 0, tbig = 0;
                int nboth = 0;
                double shape_t[6] = {0};
                bool have_q3[6] = {false};
                for (int si = 0; si < c.nshapes; si++) {
                    size_t idx = (((size_t)ti * c.nlv + ii) * c.nthreads + th) * c.nshapes + si;
                    const struct result *a = &r1[idx], *b = &rbig[idx];
                    if (a->calls == 0)
                        continue;
                    uint64_t rb64;
                    ob_type_row_bytes(c.types[ti], (uint64_t)c.shapes[si].k, &rb64);
                    bytes += (double)rb64 * c.shapes[si].n;
                    t1 += a->med;
                    for (int q = 0; q < 6; q++)
                        if (c.shapes[si].k == qwen3_shapes[q].k &&
                            c.shapes[si].n == qwen3_shapes[q].n) {
                            shape_t[q] = a->med;
                            have_q3[q] = true;
                        }
                    if (rmax > 1 && b->calls) {
                        nboth++;
                        dots += (double)c.shapes[si].n;     /* R = 1 dots; R = rmax has rmax x */
                        t1b += a->med;
                        tbig += b->med;
                    }
                }
                if (t1 <= 0)
                    continue;
                double gbps = bytes / t1 * 1e-9, sg = st[(size_t)ti * c.nthreads + th];
                double xr = nboth ? (dots * rmax / tbig) / (dots / t1b) : -1;
                bool all6 = true;
                for (int q = 0; q < 6; q++)
                    all6 = all6 && have_q3[q];
                double tok = -1;
                if (all6)
                    tok = 1.0 / (28 * (shape_t[0] + 2 * shape_t[1] + shape_t[2] + 2 * shape_t[3] +
                                       shape_t[4]) + shape_t[5]);
                if (c.json) {
                    char id[96];
                    snprintf(id, sizeof id, "summary/%s/%s/t%d", ob_type_name(c.types[ti]),
                             lname, c.threads[th]);
                    cJSON *o = cJSON_CreateObject();
                    cJSON_AddStringToObject(o, "id", id);
                    cJSON_AddStringToObject(o, "bench", "kernels-summary");
                    cJSON_AddStringToObject(o, "type", ob_type_name(c.types[ti]));
                    cJSON_AddStringToObject(o, "isa", ob_isa_name(c.lv[ii].isa));
                    cJSON_AddStringToObject(o, "layout", lv_panels(&c.lv[ii], c.types[ti]) ? "panels" : "rows");
                    cJSON_AddNumberToObject(o, "threads", c.threads[th]);
                    cJSON_AddNumberToObject(o, "decode_gbps", gbps);
                    cJSON_AddNumberToObject(o, "stream_gbps", sg);
                    cJSON_AddNumberToObject(o, "stream_ratio", gbps / sg);
                    if (xr > 0) {
                        cJSON_AddNumberToObject(o, "rmax", rmax);
                        cJSON_AddNumberToObject(o, "x_rmax", xr);
                        cJSON_AddNumberToObject(o, "x_rmax_shapes", nboth);
                    }
                    if (tok > 0)
                        cJSON_AddNumberToObject(o, "qwen3_0_6b_tok_per_s", tok);
                    ob_jsonl_write(stdout, o);
                    cJSON_Delete(o);
                } else {
                    char xs[32] = "-", ns[32] = "-", toks[32] = "-";
                    if (xr > 0) {
                        snprintf(xs, sizeof xs, "%.2f", xr);
                        snprintf(ns, sizeof ns, "%d/%d", nboth, c.nshapes);
                    }
                    if (tok > 0)
                        snprintf(toks, sizeof toks, "%.1f", tok);
                    printf("%-5s %-9s %3d %10.2f %5.0f%% %8s %7s %9s\n", ob_type_name(c.types[ti]),
                           lname, c.threads[th], gbps,
                           100 * gbps / sg, xs, ns, toks);
                }
            }

    for (int t = 0; t < c.nthreads; t++)
        ob_pool_free(pools[t]);
    free(r1);
    free(rbig);
    free(st);
    hfree(sbuf, stream_bytes);
    free(times);
    free(x);
    free(xq);
    free(y);
    return 0;
}
