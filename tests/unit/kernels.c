/*
 * kernels.c — the cpu kernels against their scalar references, bit for bit (TAP).
 *
 *   kernels [MODEL.gguf ...]
 *
 *  - every weight type's dot at every ISA level this CPU has, with 1..4 activation rows per
 *    call, against the scalar reference (dot.h) on random valid blocks (our quantisers), random
 *    raw blocks (random bytes with finite scales), and real blocks from the models given;
 *  - the activation quantisers at every level against arith.h, including ties, zeros, huge and
 *    tiny values, NaN and Inf;
 *  - ob_matmul: every row of a many-row product equals the one-row product, and the result is
 *    the same for 1, 2, 3 and 7 threads.
 * Prints the first differing value when something differs.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kernels.h"
#include "quant.h"

static int n_test, n_fail;

static void ok(int cond, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void ok(int cond, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    printf("%s %d - ", cond ? "ok" : "not ok", ++n_test);
    vprintf(fmt, ap);
    printf("\n");
    va_end(ap);
    if (!cond)
        n_fail++;
}

static uint64_t rng = 42;
static uint64_t next(void)
{
    uint64_t z = (rng += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static float frand(void)
{
    return (float)((int64_t)(next() >> 40) - (1 << 23)) / (float)(1 << 23);
}

static float gauss(void)
{
    return frand() + frand() + frand();
}

static const uint32_t types[] = {OB_F32, OB_F16, OB_BF16, OB_Q4_0, OB_Q4_1, OB_Q5_0, OB_Q5_1,
                                 OB_Q8_0, OB_Q2_K, OB_Q3_K, OB_Q4_K, OB_Q5_K, OB_Q6_K};
#define NTYPES (int)(sizeof types / sizeof types[0])

static int n_isa;

/* fp16 field offsets of each block type that must hold a finite scale in raw random blocks */
static void fix_scales(uint32_t t, uint8_t *row, size_t bytes)
{
    size_t bs = ob_type_size(t);
    int offs[2] = {-1, -1};
    switch (t) {
    case OB_Q4_0: case OB_Q5_0: case OB_Q8_0: case OB_Q4_K: case OB_Q5_K:
        offs[0] = 0;
        if (t == OB_Q4_K || t == OB_Q5_K)
            offs[1] = 2;
        break;
    case OB_Q4_1: case OB_Q5_1: offs[0] = 0; offs[1] = 2; break;
    case OB_Q2_K: offs[0] = 80; offs[1] = 82; break;
    case OB_Q3_K: offs[0] = 108; break;
    case OB_Q6_K: offs[0] = 208; break;
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
    for (size_t b = 0; b < bytes; b += bs)
        for (int k = 0; k < 2; k++)
            if (offs[k] >= 0) {
                /* any finite fp16, including subnormals and large values */
                uint16_t h;
                do
                    h = (uint16_t)next();
                while ((h & 0x7c00) == 0x7c00);
                memcpy(row + b + offs[k], &h, 2);
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
    for (int ti = 0; ti < NTYPES; ti++) {
        uint32_t t = types[ti];
        int fmt = ob_type_actfmt(t);
        long bad = 0, n = 0;
        char why[256] = "";
        for (int it = 0; it < 400; it++) {
            int k = ks[it % 5];
            if (t == OB_F32 || t == OB_F16 || t == OB_BF16)
                k = it % 3 == 0 ? ks[it % 5] : 1 + (int)(next() % 1200);   /* tails too */
            else if (ob_type_blck(t) == 32 && it % 2)
                k = 32 * (1 + (int)(next() % 96));                         /* block tails */
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
                    w[i] = (uint8_t)next();
                fix_scales(t, w, rb);
            }
            bad += compare_row(t, w, k, act[0], as, 8, why, sizeof why);
            n += 8;
        }
        ok(bad == 0, "%s: %ld dot products x %d ISA levels x nr 1..4 equal the scalar reference%s%s",
           ob_type_name(t), n, n_isa, bad ? ": " : "", why);
    }
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
            case 3: v = (float)((int)(next() % 255) - 127) + 0.5f; break;   /* ties */
            case 4: v = i % 256 < 128 ? 0.0f : v; break;         /* zero blocks */
            case 5: v = i == 77 ? NAN : i == 300 ? INFINITY : v; break;
            case 6: v = (i & 31) == 0 ? 127.0f : (float)((int)(next() % 255) - 127) * 0.5f; break;
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
            uint64_t ri = next() % t->ne[1];
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
    static const uint32_t mt[] = {OB_Q4_K, OB_Q6_K, OB_Q8_0, OB_Q4_1, OB_F32, OB_F16};
    for (size_t ti = 0; ti < sizeof mt / sizeof mt[0]; ti++) {
        uint32_t t = mt[ti];
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

int main(int argc, char **argv)
{
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
    dots_random();
    actq();
    for (int i = 1; i < argc; i++)
        real_blocks(argv[i]);
    matmul();
    printf("1..%d\n", n_test);
    return n_fail ? 1 : 0;
}
