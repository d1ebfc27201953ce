/*
 * kernels.c — the cpu kernels against their scalar references, bit for bit (TAP).
 *
 *   kernels [MODEL.gguf ...]
 *
 * The types under test are read from the kernel tables (ob_kernels), not listed here:
 *  - every entry of every level's table (dot, actq, gemm, gemv) has a scalar reference (the scalar
 *    table's dot or actq for that type or format), every type ob_type_supported accepts has a
 *    scalar dot, and this test knows how to make raw blocks of every type in the tables;
 *  - every weight type's dot at every ISA level this CPU has, with 1..4 activation rows per
 *    call, against the scalar reference (dot.h) on random valid blocks (our quantisers), random
 *    raw blocks (random bytes with finite scales), and real blocks from the models given;
 *  - the activation quantisers at every level against arith.h, including ties, zeros, huge and
 *    tiny values, NaN and Inf;
 *  - ob_matmul: every row of a many-row product equals the one-row product, and the result is
 *    the same for 1, 2, 3 and 7 threads;
 *  - every type through ob_matmul (its few-row dot or GEMV path and its many-row GEMM path) and
 *    through the GEMM and GEMV entries directly, at odd shapes (partial block octets, odd N, every row count up
 *    to 13 and more), with weight rows holding NaN, Inf, subnormal and zero fp16 scales (F16C
 *    converts a signalling NaN to a quiet one: the products must still match), against the
 *    scalar reference element by element;
 *  - matrices in panels (the layout the cpu route's copy holds some types in) through
 *    ob_matmul and the panel entries, against the scalar reference on the rows.
 * Prints the first differing value when something differs.
 */
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/kernels/kernels.h"
#include "quant.h"
#include "tap.h"

static float frand(void)
{
    return (float)((int64_t)(tap_rand() >> 40) - (1 << 23)) / (float)(1 << 23);
}

static float gauss(void)
{
    return frand() + frand() + frand();
}

/* the weight types under test: every type with a scalar dot, in id order (tables_check) */
static uint32_t types[OB_TYPE_COUNT];
static int n_types;

static int n_isa;

static bool is_float_type(uint32_t t)
{
    return t == OB_F32 || t == OB_F16 || t == OB_BF16;
}

/*
 * The fp16 fields of a block type that hold scales (byte offsets; the count is returned): raw
 * random blocks get finite values there. -1 for a block type this test does not know, which
 * tables_check reports: a new type in the tables needs its scale fields named here.
 */
static int scale_fields(uint32_t t, int offs[2])
{
    switch (t) {
    case OB_Q4_0: case OB_Q5_0: case OB_Q8_0: offs[0] = 0; return 1;
    case OB_Q4_1: case OB_Q5_1: case OB_Q4_K: case OB_Q5_K: offs[0] = 0; offs[1] = 2; return 2;
    case OB_Q2_K: offs[0] = 80; offs[1] = 82; return 2;
    case OB_Q3_K: offs[0] = 108; return 1;
    case OB_Q6_K: offs[0] = 208; return 1;
    }
    return -1;
}

/* finite values where a raw random row needs them: every scale field, every float element */
static void fix_scales(uint32_t t, uint8_t *row, size_t bytes)
{
    size_t bs = ob_type_size(t);
    int offs[2] = {-1, -1};
    switch (t) {
    case OB_F16:
        for (size_t i = 0; i < bytes; i += 2) {
            uint16_t h = ob_f32_to_fp16(gauss());
            memcpy(row + i, &h, 2);
        }
        return;
    case OB_BF16:
        for (size_t i = 0; i < bytes; i += 2) {
            uint16_t h = ob_f32_to_bf16(gauss());
            memcpy(row + i, &h, 2);
        }
        return;
    case OB_F32:
        for (size_t i = 0; i < bytes; i += 4) {
            float f = gauss();
            memcpy(row + i, &f, 4);
        }
        return;
    }
    int nf = scale_fields(t, offs);
    for (size_t b = 0; b < bytes; b += bs)
        for (int k = 0; k < nf; k++) {
            /* any finite fp16, including subnormals and large values */
            uint16_t h;
            do
                h = (uint16_t)tap_rand();
            while ((h & 0x7c00) == 0x7c00);
            memcpy(row + b + offs[k], &h, 2);
        }
}

/*
 * The tables themselves, at every level: no SIMD entry without a scalar reference, no supported
 * type without a scalar dot, every type in the tables known to this test (raw blocks,
 * quantiser). Fills types[]. A level this CPU cannot run holds the entries of the best it can
 * (its own are set by code of that level: host/simd.h), so its own entries are judged only
 * where the CPU runs it.
 */
static void tables_check(void)
{
    const struct ob_kernel_table *ref = ob_kernels(OB_ISA_SCALAR);
    char why[512] = "";
    size_t wl = 0;
    int bad = 0;
#define WHY(...)                                                                    \
    do {                                                                            \
        bad++;                                                                      \
        if (wl < sizeof why - 1)                                                    \
            wl += (size_t)snprintf(why + wl, sizeof why - wl, __VA_ARGS__);         \
    } while (0)
    for (uint32_t t = 0; t < OB_TYPE_COUNT; t++) {
        if (ref->dot[t])
            types[n_types++] = t;
        if (ob_type_supported(t) && !ref->dot[t])
            WHY(" %s: supported without a scalar dot;", ob_type_name(t));
        for (int isa = 1; isa < OB_ISA_COUNT; isa++) {
            const struct ob_kernel_table *kt = ob_kernels(isa);
            if (kt->dot[t] && !ref->dot[t])
                WHY(" %s dot %s: no scalar reference;", ob_isa_name(isa), ob_type_name(t));
            static const char *const en[4] = {"gemm", "gemv", "panel gemm", "panel gemv"};
            for (int e = 0; e < 4; e++) {
                const struct ob_gemm *g = e == 0 ? &kt->gemm[t] : e == 1 ? &kt->gemv[t]
                                        : e == 2 ? &kt->pgemm[t] : &kt->pgemv[t];
                if (g->run && !ref->dot[t])
                    WHY(" %s %s %s: no scalar reference;", ob_isa_name(isa), en[e],
                        ob_type_name(t));
                if (g->run && (!g->prep || !g->prep_bytes || !g->scratch_bytes ||
                               g->panel < 1 || g->min_rows < 1))
                    WHY(" %s %s %s: incomplete entry;", ob_isa_name(isa), en[e], ob_type_name(t));
                /* the panel entries take whole panels */
                if (e >= 2 && g->run && g->panel % OB_PANEL_ROWS)
                    WHY(" %s %s %s: panel %d;", ob_isa_name(isa), en[e], ob_type_name(t),
                        g->panel);
            }
            /* a level that wants a type in panels reads them with its own kernels, from one row
             * on (else the copy in panels would run through the rows copied back) */
            if ((kt->panels >> t & 1) && (!kt->pgemv[t].run || kt->pgemv[t].min_rows != 1 ||
                                          !kt->pgemm[t].run))
                WHY(" %s %s: wanted in panels without panel kernels;", ob_isa_name(isa),
                    ob_type_name(t));
        }
        if (ref->panels >> t & 1)
            WHY(" scalar %s: wanted in panels;", ob_type_name(t));
    }
    for (int fmt = 0; fmt < 3; fmt++)
        for (int isa = 0; isa < OB_ISA_COUNT; isa++)
            if (!ob_kernels(isa)->actq[fmt] || (isa && !ref->actq[fmt]))
                WHY(" %s actq format %d: missing or without a scalar reference;",
                    ob_isa_name(isa), fmt);
    for (int i = 0; i < n_types; i++) {
        int offs[2];
        uint32_t t = types[i];
        if (!is_float_type(t) && scale_fields(t, offs) < 0)
            WHY(" %s: kernels.c does not know its scale fields (scale_fields);", ob_type_name(t));
        if (!ob_quant_supported(t))
            WHY(" %s: no reference quantiser for test rows;", ob_type_name(t));
        int blk = (int)ob_type_blck(t);
        if (!is_float_type(t) && blk != 32 && blk != 256)
            WHY(" %s: block size %d not covered by the shapes here;", ob_type_name(t), blk);
    }
#undef WHY
    ok(bad == 0 && n_types > 0, "kernel tables: %d weight types with a scalar dot, every SIMD "
       "entry at every level has a scalar reference%s", n_types, why);
#if defined(__x86_64__)
    /* the AVX-512 level computes with kernels of its own, none inherited from AVX2: a dot for
     * every weight type, a GEMM for every quantised one, both activation quantisers */
    if (ob_isa_best() < OB_ISA_AVX512)
        printf("ok %d - avx512 table: its own kernels # SKIP cpu lacks avx512\n", ++n_test);
    else {
        const struct ob_kernel_table *k5 = ob_kernels(OB_ISA_AVX512), *k2 = ob_kernels(OB_ISA_AVX2);
        char miss[512] = "";
        size_t ml = 0;
        for (int i = 0; i < n_types; i++) {
            uint32_t t = types[i];
            bool q = ob_type_actfmt(t) != OB_ACT_F32;
            if (k5->dot[t] == k2->dot[t] && ml < sizeof miss - 1)
                ml += (size_t)snprintf(miss + ml, sizeof miss - ml, " dot:%s", ob_type_name(t));
            if (q && (!k5->gemm[t].run || k5->gemm[t].run == k2->gemm[t].run) && ml < sizeof miss - 1)
                ml += (size_t)snprintf(miss + ml, sizeof miss - ml, " gemm:%s", ob_type_name(t));
            /* an AVX2 GEMV would take the place of the AVX-512 dot kernel below min_rows */
            if (k2->gemv[t].run && k5->gemv[t].run == k2->gemv[t].run && ml < sizeof miss - 1)
                ml += (size_t)snprintf(miss + ml, sizeof miss - ml, " gemv:%s", ob_type_name(t));
        }
        for (int fmt = OB_ACT_Q8K; fmt <= OB_ACT_A8; fmt++)
            if (k5->actq[fmt] == k2->actq[fmt] && ml < sizeof miss - 1)
                ml += (size_t)snprintf(miss + ml, sizeof miss - ml, " actq:%d", fmt);
        ok(ml == 0, "avx512 table: its own dot for every type, GEMM for every quantised type, "
           "GEMV wherever AVX2 has one, activation quantisers%s%s", ml ? "; inherited:" : "",
           miss);
    }
#endif
    printf("# types under test:");
    for (int i = 0; i < n_types; i++)
        printf(" %s", ob_type_name(types[i]));
    printf("\n");
    for (int isa = 1; isa < OB_ISA_COUNT; isa++) {
        const struct ob_kernel_table *kt = ob_kernels(isa), *below = ob_kernels(isa - 1);
        printf("# %s: own", ob_isa_name(isa));
        for (int i = 0; i < n_types; i++) {
            uint32_t t = types[i];
            if (kt->dot[t] != below->dot[t])
                printf(" dot:%s", ob_type_name(t));
            if (kt->gemm[t].run && kt->gemm[t].run != below->gemm[t].run)
                printf(" gemm:%s", ob_type_name(t));
            if (kt->gemv[t].run && kt->gemv[t].run != below->gemv[t].run)
                printf(" gemv:%s", ob_type_name(t));
        }
        for (int fmt = 0; fmt < 3; fmt++)
            if (kt->actq[fmt] != below->actq[fmt])
                printf(" actq:%d", fmt);
        printf("\n");
    }
}

/* compare one weight row against a set of activation rows at every ISA and nr */
static long compare_row(uint32_t t, const void *w, int k, const void *act, size_t as, int nact,
                        char *why, size_t whylen)
{
    const struct ob_kernel_table *ref = ob_kernels(OB_ISA_SCALAR);
    float want[64], got[OB_MAXR];
    long bad = 0;
    for (int r = 0; r < nact; r++)
        ref->dot[t](w, (const char *)act + r * as, as, 1, k, &want[r]);
    for (int isa = 0; isa < n_isa; isa++) {
        const struct ob_kernel_table *kt = ob_kernels(isa);
        for (int nr = 1; nr <= OB_MAXR; nr++)
            for (int r0 = 0; r0 + nr <= nact; r0 += nr) {
                kt->dot[t](w, (const char *)act + r0 * as, as, nr, k, got);
                for (int i = 0; i < nr; i++)
                    if (memcmp(&got[i], &want[r0 + i], 4) != 0) {
                        if (!bad)
                            snprintf(why, whylen, "%s k=%d isa=%s nr=%d row %d: %.9g != %.9g",
                                     ob_type_name(t), k, ob_isa_name(isa), nr, r0 + i,
                                     (double)got[i], (double)want[r0 + i]);
                        bad++;
                    }
            }
    }
    return bad;
}

static void dots_random(void)
{
    static const int ks[] = {256, 512, 1024, 1536, 3072};
    static float x[8][3072], wf[3072];
    static uint8_t w[3072 * 4], act[8][3072 * 4];
    for (int ti = 0; ti < n_types; ti++) {
        uint32_t t = types[ti];
        int fmt = ob_type_actfmt(t);
        long bad = 0, n = 0;
        char why[256] = "";
        for (int it = 0; it < 400; it++) {
            int k = ks[it % 5];
            if (is_float_type(t))
                k = it % 3 == 0 ? ks[it % 5] : 1 + (int)(tap_rand() % 1200);   /* tails too */
            else if (ob_type_blck(t) == 32 && it % 2)
                k = 32 * (1 + (int)(tap_rand() % 96));                         /* block tails */
            size_t as = ob_act_row_bytes(fmt, k);
            for (int r = 0; r < 8; r++) {
                float sc = it % 7 == 0 ? 1e-3f : it % 7 == 1 ? 30.0f : 1.0f;
                for (int i = 0; i < k; i++)
                    x[r][i] = gauss() * sc * (i % 61 == 0 ? 8.0f : 1.0f);
                ob_kernels(OB_ISA_SCALAR)->actq[fmt](x[r], act[0] + r * as, k);
            }
            uint64_t rb;
            ob_type_row_bytes(t, (uint64_t)k, &rb);
            if (it % 2 == 0) {                       /* a valid row from our quantiser */
                for (int i = 0; i < k; i++)
                    wf[i] = gauss() * (it % 4 == 0 ? 0.01f : 1.0f);
                ob_quant_row(t, wf, w, k);
            } else {                                 /* raw random bytes, finite scales */
                for (uint64_t i = 0; i < rb; i++)
                    w[i] = (uint8_t)tap_rand();
                fix_scales(t, w, rb);
            }
            bad += compare_row(t, w, k, act[0], as, 8, why, sizeof why);
            n += 8;
        }
        ok(bad == 0, "%s: %ld dot products x %d ISA levels x nr 1..4 equal the scalar reference%s%s",
           ob_type_name(t), n, n_isa, bad ? ": " : "", why);
    }
}

/*
 * RMSNorm as a route composes it (lib/cpu/backend-cpu.c's rms_row): the sum of squares from
 * the level's F32 dot kernel, then ob_rms_factor and ob_rms_apply; equal to ob_rmsnorm at every
 * level, for row lengths with tails, rows of huge, tiny, subnormal and zero values, and one
 * special value (NaN, Inf) per row.
 */
static void rms_composed(void)
{
    static float x[5000], w[5000], want[5000], got[5000];
    long bad = 0, n_rows = 0;
    char why[160] = "";
    for (int it = 0; it < 600; it++) {
        int n = it % 3 == 0 ? 8 << (it % 6) : 1 + (int)(tap_rand() % 5000);
        float sc = it % 5 == 0 ? 1e-20f : it % 5 == 1 ? 1e19f : it % 5 == 2 ? 1e-41f : 1.0f;
        for (int i = 0; i < n; i++) {
            x[i] = it % 11 == 0 ? 0.0f : gauss() * sc;
            w[i] = gauss();
        }
        if (it % 7 == 3)
            x[tap_rand() % (uint64_t)n] = it % 2 ? NAN : -INFINITY;
        float eps = it % 2 ? 1e-6f : 1e-5f;
        ob_rmsnorm(x, w, want, n, eps);
        for (int isa = 0; isa < n_isa; isa++) {
            float ss;
            ob_kernels(isa)->dot[OB_F32](x, x, 0, 1, n, &ss);
            ob_rms_apply(x, ob_rms_factor(ss, n, eps), w, got, n);
            for (int i = 0; i < n; i++)
                if (ob_f32_bits(got[i]) != ob_f32_bits(want[i])) {
                    if (!bad)
                        snprintf(why, sizeof why, ": %s n=%d y[%d]: %08x != %08x",
                                 ob_isa_name(isa), n, i, ob_f32_bits(got[i]),
                                 ob_f32_bits(want[i]));
                    bad++;
                }
            n_rows++;
        }
    }
    ok(bad == 0, "rmsnorm composed from each level's F32 dot, ob_rms_factor and ob_rms_apply "
       "equals ob_rmsnorm: %ld rows%s", n_rows, why);
}

static void actq(void)
{
    static float x[4096];
    static uint8_t q0[8192], q1[8192];
    long bad = 0;
    char why[160] = "";
    for (int it = 0; it < 3000; it++) {
        int mode = it % 8;
        for (int i = 0; i < 4096; i++) {
            float v = gauss();
            switch (mode) {
            case 1: v *= 1e-38f; break;                          /* subnormal scales */
            case 2: v *= 1e30f; break;
            case 3: v = (float)((int)(tap_rand() % 255) - 127) + 0.5f; break;   /* ties */
            case 4: v = i % 256 < 128 ? 0.0f : v; break;         /* zero blocks */
            case 5: v = i == 77 ? NAN : i == 300 ? INFINITY : v; break;
            case 6: v = (i & 31) == 0 ? 127.0f : (float)((int)(tap_rand() % 255) - 127) * 0.5f; break;
            }
            x[i] = v;
        }
        for (int fmt = OB_ACT_Q8K; fmt <= OB_ACT_A8; fmt++) {
            size_t bytes = ob_act_row_bytes(fmt, 4096);
            ob_kernels(OB_ISA_SCALAR)->actq[fmt](x, q0, 4096);
            for (int isa = 1; isa < n_isa; isa++) {
                memset(q1, 0xa5, bytes);
                ob_kernels(isa)->actq[fmt](x, q1, 4096);
                if (memcmp(q0, q1, bytes) != 0) {
                    if (!bad)
                        snprintf(why, sizeof why, "format %d isa %s mode %d", fmt,
                                 ob_isa_name(isa), mode);
                    bad++;
                }
            }
        }
    }
    ok(bad == 0, "activation quantisers: 3000 rows x 2 formats, every ISA byte-equal to arith.h%s%s",
       bad ? ": " : "", why);
}

static void real_blocks(const char *path)
{
    struct ob_gguf *g;
    if (ob_gguf_open(path, &g)) {
        ok(0, "open %s: %s", path, ob_errmsg());
        return;
    }
    static float x[8][16384];
    static uint8_t act[8 * 16384 * 2];
    long bad = 0, n = 0;
    char why[256] = "";
    int types_seen = 0;
    uint32_t seen[OB_TYPE_COUNT] = {0};
    for (uint64_t i = 0; i < ob_gguf_n_tensors(g); i++) {
        const struct ob_gguf_tensor *t = ob_gguf_tensor_at(g, i);
        if (t->n_dims != 2 || !ob_type_supported(t->type) || t->ne[0] > 16384 ||
            seen[t->type] >= 6)
            continue;
        types_seen += !seen[t->type]++;
        int k = (int)t->ne[0], fmt = ob_type_actfmt(t->type);
        size_t as = ob_act_row_bytes(fmt, k);
        uint64_t rb;
        ob_type_row_bytes(t->type, t->ne[0], &rb);
        for (int r = 0; r < 8; r++) {
            for (int j = 0; j < k; j++)
                x[r][j] = gauss();
            ob_kernels(OB_ISA_SCALAR)->actq[fmt](x[r], act + r * as, k);
        }
        for (int row = 0; row < 16; row++) {
            uint64_t ri = tap_rand() % t->ne[1];
            bad += compare_row(t->type, (const uint8_t *)t->data + ri * rb, k, act, as, 8, why,
                               sizeof why);
            n += 8;
        }
    }
    const char *base = strrchr(path, '/');
    ok(bad == 0 && n > 0, "%s: %ld real-row dots over %d types equal the scalar reference%s%s",
       base ? base + 1 : path, n, types_seen, bad ? ": " : "", why);
    ob_gguf_close(g);
}

static void matmul(void)
{
    const int K = 1024, N = 301, R = 37;
    static float wf[1024], x[37][1024], y1[37 * 301], yn[37 * 301], yt[37 * 301];
    static uint8_t wq[301 * 1024 * 4], xq[37 * 1024 * 4];
    for (int ti = 0; ti < n_types; ti++) {
        uint32_t t = types[ti];
        uint64_t rb;
        ob_type_row_bytes(t, K, &rb);
        for (int n = 0; n < N; n++) {
            for (int i = 0; i < K; i++)
                wf[i] = gauss();
            ob_quant_row(t, wf, wq + n * rb, K);
        }
        int fmt = ob_type_actfmt(t);
        size_t as = ob_act_row_bytes(fmt, K);
        for (int r = 0; r < R; r++) {
            for (int i = 0; i < K; i++)
                x[r][i] = gauss();
            ob_act_quantize(OB_ISA_SCALAR, t, x[r], K, xq + r * as);
        }
        struct ob_matrix w = {t, K, N, rb, wq};
        int isa = ob_isa_best();
        for (int r = 0; r < R; r++)
            ob_matmul(NULL, isa, &w, xq + r * as, as, 1, y1 + r * N, N);
        ob_matmul(NULL, isa, &w, xq, as, R, yn, N);
        ok(memcmp(y1, yn, sizeof y1) == 0, "%s: %d rows at once == one row at a time",
           ob_type_name(t), R);
        int same = 1;
        static const int threads[] = {1, 2, 3, 7};
        for (int ti2 = 0; ti2 < 4; ti2++) {
            struct ob_pool *p;
            ob_pool_new(threads[ti2], &p);
            for (int rep = 0; rep < 3; rep++) {
                memset(yt, 0, sizeof yt);
                ob_matmul(p, isa, &w, xq, as, R, yt, N);
                same &= memcmp(yt, yn, sizeof yt) == 0;
            }
            ob_pool_free(p);
        }
        /* and the scalar reference by hand for every element */
        long bad = 0;
        for (int r = 0; r < R; r++)
            for (int n = 0; n < N; n++) {
                float v;
                ob_kernels(OB_ISA_SCALAR)->dot[t](wq + n * rb, xq + r * as, as, 1, K, &v);
                bad += memcmp(&v, &yn[r * N + n], 4) != 0;
            }
        ok(same && bad == 0, "%s: 1, 2, 3, 7 threads give the same bits, equal to the reference",
           ob_type_name(t));
    }
}

/*
 * Count the values of got (R x N) whose bits differ from want's in *bad; for the first
 * difference of all (*bad was 0), why gets the case (fmt, ...) and the value's place and bits.
 */
__attribute__((format(printf, 8, 9)))
static void diff_vals(const float *got, const float *want, int R, int N, long *bad, char *why,
                      size_t wn, const char *fmt, ...)
{
    for (int i = 0; i < R * N; i++) {
        if (memcmp(&got[i], &want[i], 4) == 0)
            continue;
        if (!*bad) {
            va_list ap;
            va_start(ap, fmt);
            int n = vsnprintf(why, wn, fmt, ap);
            va_end(ap);
            if (n >= 0 && (size_t)n < wn)
                snprintf(why + n, wn - (size_t)n, " y[%d][%d]: %08x != %08x", i / N, i % N,
                         ob_f32_bits(got[i]), ob_f32_bits(want[i]));
        }
        (*bad)++;
    }
}

/*
 * One special value in a weight row: a quantised type gets one fp16 scale field of one block
 * set to a NaN (signalling or quiet, either sign, with payload), an infinity, a subnormal or
 * -0; a float type one element. One per row, so that the reference's result never depends on
 * which of two NaNs an addition keeps (which the C standard leaves to the compiler).
 */
static void special_scale(uint32_t t, uint8_t *row, int k, int which)
{
    static const uint16_t h16[] = {0x7c01, 0x7d55, 0xfc2a, 0x7e00, 0xfe01, 0x7c00, 0xfc00,
                                   0x0001, 0x83ff, 0x8000, 0x0000};
    static const uint16_t b16[] = {0x7f81, 0xffaa, 0x7fc0, 0x7f80, 0xff80, 0x0001, 0x8000};
    uint16_t h = h16[which % (int)(sizeof h16 / sizeof h16[0])];
    if (t == OB_F32) {
        uint32_t u = which % 3 == 0 ? 0x7f800001u : which % 3 == 1 ? 0xff800000u : 0x00000001u;
        memcpy(row + 4 * (tap_rand() % (uint64_t)k), &u, 4);
        return;
    }
    if (t == OB_F16 || t == OB_BF16) {
        if (t == OB_BF16)
            h = b16[which % (int)(sizeof b16 / sizeof b16[0])];
        memcpy(row + 2 * (tap_rand() % (uint64_t)k), &h, 2);
        return;
    }
    int offs[2], nf = scale_fields(t, offs);
    int nb = k / (int)ob_type_blck(t);
    size_t b = tap_rand() % (uint64_t)nb;
    memcpy(row + b * ob_type_size(t) + offs[tap_rand() % (uint64_t)nf], &h, 2);
}

static void gemm_shapes(void)
{
    enum { MAXK = 3072, MAXN = 33, MAXR = 40 };
    static const int qk_k[] = {256, 512, 768, 2304, 3072};        /* 1, 2, 3, 9, 12 blocks */
    static const int qk_a8[] = {32, 224, 640, 1056, 2048};        /* 1, 7, 20, 33, 64 blocks */
    static const int qk_f[] = {1, 31, 100, 1024, 1061};
    static const int ns[] = {1, 2, 7, 33};
    static const int rs[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 37, 40};
    static float x[MAXK], wf[MAXK], want[MAXR * MAXN], got[MAXR * MAXN];
    struct ob_pool *pools[3];
    for (int i = 0; i < 3; i++)
        ob_pool_new(i + 1, &pools[i]);
    const struct ob_kernel_table *ref = ob_kernels(OB_ISA_SCALAR);
    for (int ti = 0; ti < n_types; ti++) {
        uint32_t t = types[ti];
        int fmt = ob_type_actfmt(t), blk = (int)ob_type_blck(t);
        const int *ks = blk == 256 ? qk_k : blk == 32 ? qk_a8 : qk_f;
        long bad = 0, n_dots = 0, n_gemm = 0;
        char why[256] = "";
        for (int ki = 0; ki < 5; ki++)
            for (int ni = 0; ni < 4; ni++) {
                int K = ks[ki], N = ns[ni];
                uint64_t rb;
                ob_type_row_bytes(t, (uint64_t)K, &rb);
                /* exactly sized heap buffers: a read past the last row or activation shows
                 * under AddressSanitizer */
                size_t as = ob_act_row_bytes(fmt, K);
                uint8_t *w = malloc((size_t)N * rb), *xq = malloc(MAXR * as);
                if (!w || !xq) {
                    ok(0, "out of memory");
                    return;
                }
                /* weights: quantised, raw random bytes with finite scales, one special scale */
                for (int n = 0; n < N; n++) {
                    uint8_t *row = w + (size_t)n * rb;
                    if (n % 3 == 0) {
                        for (int i = 0; i < K; i++)
                            wf[i] = gauss() * (n % 2 ? 0.01f : 1.0f);
                        ob_quant_row(t, wf, row, K);
                    } else {
                        for (uint64_t i = 0; i < rb; i++)
                            row[i] = (uint8_t)tap_rand();
                        fix_scales(t, row, rb);
                        if (n % 3 == 2)
                            special_scale(t, row, K, (int)(tap_rand() % 11));
                    }
                }
                for (int r = 0; r < MAXR; r++) {
                    for (int i = 0; i < K; i++)
                        x[i] = r == 5 ? 0.0f : gauss() * (r % 3 == 1 ? 50.0f : 1.0f);
                    ob_kernels(OB_ISA_SCALAR)->actq[fmt](x, xq + r * as, K);
                }
                for (int r = 0; r < MAXR; r++)
                    for (int n = 0; n < N; n++)
                        ref->dot[t](w + (size_t)n * rb, xq + r * as, as, 1, K, &want[r * N + n]);
                /* at every level this CPU runs whose entries for t differ from the level
                 * below's (the scalar level: the driver around the reference dots) */
                for (int isa = 0; isa < n_isa; isa++) {
                    const struct ob_kernel_table *kt = ob_kernels(isa);
                    if (isa && kt->dot[t] == ob_kernels(isa - 1)->dot[t] &&
                        kt->gemm[t].run == ob_kernels(isa - 1)->gemm[t].run &&
                        kt->gemv[t].run == ob_kernels(isa - 1)->gemv[t].run)
                        continue;
                    for (int ri = 0; ri < (int)(sizeof rs / sizeof rs[0]); ri++) {
                        int R = rs[ri];
                        /* through ob_matmul at 1, 2, 3 threads */
                        for (int pi = 0; pi < 3; pi++) {
                            if (pi && R % 3)
                                continue;
                            struct ob_matrix m = {t, K, N, rb, w};
                            memset(got, 0xff, sizeof got);
                            ob_matmul(pools[pi], isa, &m, xq, as, R, got, (size_t)N);
                            diff_vals(got, want, R, N, &bad, why, sizeof why,
                                      "matmul K=%d N=%d R=%d threads=%d", K, N, R, pi + 1);
                            n_dots += R * N;
                        }
                        /* the GEMM and GEMV entries themselves, whatever R (the driver uses
                         * them from and below the GEMM's min_rows), over two ranges of weight
                         * rows split at an odd row */
                        for (int e = 0; e < 2; e++) {
                            const struct ob_gemm *gm = e ? &kt->gemv[t] : &kt->gemm[t];
                            if (!gm->run)
                                continue;
                            void *p = NULL, *sc = NULL;
                            if (posix_memalign(&p, 64, gm->prep_bytes(K, R)) ||
                                posix_memalign(&sc, 64, gm->scratch_bytes(K))) {
                                ok(0, "out of memory");
                                return;
                            }
                            gm->prep(xq, as, R, K, p);
                            memset(got, 0xff, sizeof got);
                            int split = N > 3 ? 3 : N;
                            gm->run(w, rb, 0, split, K, p, R, got, (size_t)N, sc);
                            gm->run(w, rb, split, N, K, p, R, got, (size_t)N, sc);
                            diff_vals(got, want, R, N, &bad, why, sizeof why, "%s K=%d N=%d R=%d",
                                      e ? "gemv" : "gemm", K, N, R);
                            n_gemm += R * N;
                            free(p);
                            free(sc);
                        }
                    }
                }
                free(w);
                free(xq);
            }
        ok(bad == 0, "%s: %ld matmul and %ld GEMM/GEMV-entry values (odd shapes, special scales) "
           "equal the scalar reference%s%s", ob_type_name(t), n_dots, n_gemm, bad ? ": " : "",
           why);
    }
    for (int i = 0; i < 3; i++)
        ob_pool_free(pools[i]);
}

/*
 * Matrices in panels (matrix.h OB_LAYOUT_P8), for every type some level has panel entries for
 * or wants in panels: ob_panel_row gives each row back; ob_matmul over the panels at every
 * level this CPU runs (the panel entries, or the scalar level's rows copied back) at 1 to 3
 * threads, and the panel entries directly over two ranges split at a panel, equal the scalar
 * reference on the rows. Weight rows: quantised, random bytes with finite scales, a special
 * scale, quants at their extremes (all 0xff, all 0x80) with scales 1.0; activation rows:
 * random, large, zero, all +1, all -1.
 */
static void panels(void)
{
    enum { MAXK = 3072, MAXN = 40, MAXR = 37 };
    static const int ks[] = {256, 1024, 3072}, ns[] = {8, 16, 40};
    static const int rs[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 13, 16, 37};
    static float x[MAXK], wf[MAXK], want[MAXR * MAXN], got[MAXR * MAXN];
    static uint8_t row[MAXK * 2];
    struct ob_pool *pools[3];
    for (int i = 0; i < 3; i++)
        ob_pool_new(i + 1, &pools[i]);
    const struct ob_kernel_table *ref = ob_kernels(OB_ISA_SCALAR);
    for (uint32_t t = 0; t < OB_TYPE_COUNT; t++) {
        bool any = false;
        for (int isa = 0; isa < OB_ISA_COUNT; isa++) {
            const struct ob_kernel_table *kt = ob_kernels(isa);
            any |= kt->pgemm[t].run || kt->pgemv[t].run || (kt->panels >> t & 1);
        }
        if (!any)
            continue;
        int fmt = ob_type_actfmt(t);
        long bad = 0, n_vals = 0, n_rows = 0, bad_rows = 0;
        char why[256] = "";
        for (int ki = 0; ki < 3; ki++)
            for (int ni = 0; ni < 3; ni++) {
                int K = ks[ki], N = ns[ni];
                uint64_t rb;
                ob_type_row_bytes(t, (uint64_t)K, &rb);
                size_t as = ob_act_row_bytes(fmt, K);
                uint8_t *w = malloc((size_t)N * rb), *wp = malloc((size_t)N * rb);
                uint8_t *xq = malloc(MAXR * as);
                if (!w || !wp || !xq) {
                    ok(0, "out of memory");
                    return;
                }
                for (int n = 0; n < N; n++) {
                    uint8_t *r = w + (size_t)n * rb;
                    if (n % 4 == 0) {
                        for (int i = 0; i < K; i++)
                            wf[i] = gauss() * (n % 8 ? 0.01f : 1.0f);
                        ob_quant_row(t, wf, r, K);
                    } else if (n % 4 == 3) {
                        memset(r, n % 8 == 3 ? 0xff : 0x80, rb);
                        int offs[2], nf = scale_fields(t, offs);
                        for (uint64_t b = 0; b < rb; b += ob_type_size(t))
                            for (int f = 0; f < nf; f++)
                                memcpy(r + b + offs[f], &(uint16_t){0x3c00}, 2);
                    } else {
                        for (uint64_t i = 0; i < rb; i++)
                            r[i] = (uint8_t)tap_rand();
                        fix_scales(t, r, rb);
                        if (n % 4 == 2)
                            special_scale(t, r, K, (int)(tap_rand() % 11));
                    }
                }
                struct ob_matrix mr = {t, K, N, rb, w, OB_LAYOUT_ROWS};
                struct ob_matrix mp = {t, K, N, rb, wp, OB_LAYOUT_P8};
                if (!ob_panel_fits(&mr)) {
                    bad++;
                    snprintf(why, sizeof why, "K=%d N=%d: ob_panel_fits says no", K, N);
                    continue;
                }
                ob_panel_pack(&mr, wp);
                for (int n = 0; n < N; n++) {
                    memset(row, 0x5a, rb);
                    ob_panel_row(&mp, n, row);
                    bad_rows += memcmp(row, w + (size_t)n * rb, rb) != 0;
                    n_rows++;
                }
                for (int r = 0; r < MAXR; r++) {
                    for (int i = 0; i < K; i++)
                        x[i] = r == 5 ? 0.0f : r == 7 ? 1.0f : r == 8 ? -1.0f
                             : gauss() * (r % 3 == 1 ? 50.0f : 1.0f);
                    ref->actq[fmt](x, xq + r * as, K);
                }
                for (int r = 0; r < MAXR; r++)
                    for (int n = 0; n < N; n++)
                        ref->dot[t](w + (size_t)n * rb, xq + r * as, as, 1, K, &want[r * N + n]);
                for (int isa = 0; isa < n_isa; isa++) {
                    const struct ob_kernel_table *kt = ob_kernels(isa);
                    for (int ri = 0; ri < (int)(sizeof rs / sizeof rs[0]); ri++) {
                        int R = rs[ri];
                        for (int e = 0; e < 5; e++) {    /* ob_matmul at 1, 2, 3 threads, the entries */
                            const struct ob_gemm *gm = e == 3 ? &kt->pgemm[t] : &kt->pgemv[t];
                            memset(got, 0xff, sizeof got);
                            if (e < 3) {
                                ob_matmul(pools[e], isa, &mp, xq, as, R, got, (size_t)N);
                            } else if (gm->run) {
                                void *p = NULL, *sc = NULL;
                                if (posix_memalign(&p, 64, gm->prep_bytes(K, R)) ||
                                    posix_memalign(&sc, 64, gm->scratch_bytes(K))) {
                                    ok(0, "out of memory");
                                    return;
                                }
                                gm->prep(xq, as, R, K, p);
                                gm->run(wp, rb, 0, OB_PANEL_ROWS, K, p, R, got, (size_t)N, sc);
                                gm->run(wp, rb, OB_PANEL_ROWS, N, K, p, R, got, (size_t)N, sc);
                                free(p);
                                free(sc);
                            } else {
                                continue;
                            }
                            diff_vals(got, want, R, N, &bad, why, sizeof why,
                                      "%s %s K=%d N=%d R=%d", ob_isa_name(isa),
                                      e < 3 ? "matmul" : e == 3 ? "panel gemm" : "panel gemv", K,
                                      N, R);
                            n_vals += R * N;
                        }
                    }
                }
                free(w);
                free(wp);
                free(xq);
            }
        ok(bad_rows == 0 && n_rows > 0, "%s in panels: %ld rows read back as they were",
           ob_type_name(t), n_rows);
        ok(bad == 0 && n_vals > 0, "%s in panels: %ld values (matmul, panel entries; random, "
           "special and extreme rows) equal the scalar reference%s%s", ob_type_name(t), n_vals,
           bad ? ": " : "", why);
    }
    for (int i = 0; i < 3; i++)
        ob_pool_free(pools[i]);
}

/*
 * The int16 bounds of the SIMD kernels (maddubs pair sums, added in int16 before widening):
 * weight rows whose quant bytes are all 0xff (every quant at its maximum, K-quant scales at
 * their largest 6-bit value or int8 -1), all 0x80 (Q8_0 -128, Q6_K scales -128) or a random
 * mix of 0x00, 0x7f, 0x80, 0xff, with fp16 scales 1.0, against activation rows of all +127,
 * all -127 or random signs: every level's matmul and GEMM/GEMV entries, every R to 16.
 */
static void extremes(void)
{
    enum { MAXR = 16, N = 9 };
    static const uint8_t mix[4] = {0x00, 0x7f, 0x80, 0xff};
    static float x[2048], want[MAXR * N], got[MAXR * N];
    const struct ob_kernel_table *ref = ob_kernels(OB_ISA_SCALAR);
    for (int ti = 0; ti < n_types; ti++) {
        uint32_t t = types[ti];
        if (is_float_type(t))
            continue;
        int fmt = ob_type_actfmt(t), K = ob_type_blck(t) == 256 ? 2048 : 1056;
        uint64_t rb;
        ob_type_row_bytes(t, (uint64_t)K, &rb);
        size_t as = ob_act_row_bytes(fmt, K);
        uint8_t *w = malloc((size_t)N * rb), *xq = malloc(MAXR * as);
        if (!w || !xq) {
            ok(0, "out of memory");
            return;
        }
        for (int n = 0; n < N; n++) {
            uint8_t *row = w + (size_t)n * rb;
            for (uint64_t i = 0; i < rb; i++)
                row[i] = n % 3 == 0 ? 0xff : n % 3 == 1 ? 0x80 : mix[tap_rand() % 4];
            int offs[2], nf = scale_fields(t, offs);
            for (uint64_t b = 0; b < rb; b += ob_type_size(t))
                for (int f = 0; f < nf; f++)
                    memcpy(row + b + offs[f], &(uint16_t){0x3c00}, 2);
        }
        for (int r = 0; r < MAXR; r++) {
            for (int i = 0; i < K; i++)
                x[i] = r % 3 == 0 ? 1.0f : r % 3 == 1 ? -1.0f : tap_rand() % 2 ? 1.0f : -1.0f;
            ref->actq[fmt](x, xq + r * as, K);
        }
        for (int r = 0; r < MAXR; r++)
            for (int n = 0; n < N; n++)
                ref->dot[t](w + (size_t)n * rb, xq + r * as, as, 1, K, &want[r * N + n]);
        long bad = 0, n_vals = 0;
        char why[200] = "";
        for (int isa = 1; isa < n_isa; isa++) {
            const struct ob_kernel_table *kt = ob_kernels(isa);
            for (int R = 1; R <= MAXR; R++)
                for (int e = 0; e < 3; e++) {        /* ob_matmul, the GEMM entry, the GEMV */
                    const struct ob_gemm *gm = e == 1 ? &kt->gemm[t] : &kt->gemv[t];
                    memset(got, 0xff, sizeof got);
                    if (e == 0) {
                        struct ob_matrix m = {t, K, N, rb, w};
                        ob_matmul(NULL, isa, &m, xq, as, R, got, N);
                    } else if (gm->run) {
                        void *p = NULL, *sc = NULL;
                        if (posix_memalign(&p, 64, gm->prep_bytes(K, R)) ||
                            posix_memalign(&sc, 64, gm->scratch_bytes(K))) {
                            ok(0, "out of memory");
                            return;
                        }
                        gm->prep(xq, as, R, K, p);
                        gm->run(w, rb, 0, N, K, p, R, got, N, sc);
                        free(p);
                        free(sc);
                    } else {
                        continue;
                    }
                    for (int i = 0; i < R * N; i++)
                        if (memcmp(&got[i], &want[i], 4) != 0) {
                            if (!bad)
                                snprintf(why, sizeof why, ": %s %s R=%d y[%d][%d]: %.9g != %.9g",
                                         ob_isa_name(isa), e == 0 ? "matmul" : e == 1 ? "gemm" : "gemv",
                                         R, i / N, i % N, (double)got[i], (double)want[i]);
                            bad++;
                        }
                    n_vals += R * N;
                }
        }
        ok(bad == 0, "%s: %ld values with quants and activations at their extremes equal the "
           "scalar reference%s", ob_type_name(t), n_vals, why);
        free(w);
        free(xq);
    }
}

int main(int argc, char **argv)
{
    tap_seed(42);
    if (argc == 2 && strcmp(argv[1], "--best-isa") == 0) {      /* the level OB_SIMD selects */
        int isa;
        if (ob_isa_select(&isa)) {
            fprintf(stderr, "%s\n", ob_errmsg());
            return 4;
        }
        puts(ob_isa_name(isa));
        return 0;
    }
    n_isa = ob_isa_best() + 1;
    printf("# ISA levels tested: scalar%s%s\n", n_isa > 1 ? ", avx2" : "",
           n_isa > 2 ? ", avx512" : "");
    tables_check();
    dots_random();
    rms_composed();
    actq();
    for (int i = 1; i < argc; i++)
        real_blocks(argv[i]);
    matmul();
    gemm_shapes();
    extremes();
    panels();
    /* the levels this CPU lacks were not compared with the reference: one skip line each */
    for (int isa = n_isa; isa < OB_ISA_COUNT; isa++)
        printf("ok %d - %s dot products, quantisers and matmul # SKIP cpu lacks %s\n", ++n_test,
               ob_isa_name(isa), ob_isa_name(isa));
    return tap_done();
}
