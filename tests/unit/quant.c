/*
 * quant — TAP self-tests of lib/quant.c, lib/arith/blocks.h and lib/arith/dequant.h that need no
 * oracle but arithmetic:
 *
 *   quant           the types under test, from the library; block sizes; fp16 and bf16 conversions against a nearest-value search done
 *                   in double; the packed-scale helpers; every dequantiser against the exact
 *                   value computed in double and rounded once (the property that makes the
 *                   GPU port order-independent); errors; determinism of the quantisers
 *   quant rmse      round-trip RMSE of every quantiser on a seeded 64 x 4096 matrix, printed
 *                   as TAP comments; checks only that it is finite and ordered by bit width
 *   quant types     the types the library dequantises (but Q8_K) and quantises, one a line
 *                   ("dequant Q4_K", "quant Q4_K"), for tests/t1300-quant.sh's lists
 *
 * The comparisons with gguf-py are in tests/t1300-quant.sh (with quant-raw and tests/py/quant.py).
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "1b.h"
#include "quant.h"
#include "tap.h"


/* splitmix64: a seeded generator that is the same everywhere */
static uint64_t rng_state;
static uint64_t rnd(void)
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static double rnd_unit(void) { return (double)(rnd() >> 11) * 0x1p-53; }

/* ---- block sizes ----------------------------------------------------------------------------- */

static void test_sizes(void)
{
    static const struct { uint32_t type; size_t size; } s[] = {
        {OB_Q4_0, sizeof(struct ob_block_q4_0)}, {OB_Q4_1, sizeof(struct ob_block_q4_1)},
        {OB_Q5_0, sizeof(struct ob_block_q5_0)}, {OB_Q5_1, sizeof(struct ob_block_q5_1)},
        {OB_Q8_0, sizeof(struct ob_block_q8_0)}, {OB_Q8_1, sizeof(struct ob_block_q8_1)},
        {OB_Q2_K, sizeof(struct ob_block_q2_k)},
        {OB_Q3_K, sizeof(struct ob_block_q3_k)}, {OB_Q4_K, sizeof(struct ob_block_q4_k)},
        {OB_Q5_K, sizeof(struct ob_block_q5_k)}, {OB_Q6_K, sizeof(struct ob_block_q6_k)},
        {OB_Q8_K, sizeof(struct ob_block_q8_k)},
    };
    int bad = 0;
    for (size_t i = 0; i < sizeof s / sizeof s[0]; i++)
        if (s[i].size != ob_type_size(s[i].type)) {
            printf("# %s: struct %zu bytes, ob_type_size %u\n", ob_type_name(s[i].type),
                   s[i].size, ob_type_size(s[i].type));
            bad++;
        }
    ok(!bad, "block structs have the sizes of ob_type_size");
}

/* ---- fp16 / bf16 ------------------------------------------------------------------------------ */

/* The value of a finite fp16 pattern, computed in double from the definition. */
static double fp16_value(uint16_t h)
{
    int e = (h >> 10) & 31, m = h & 1023;
    double v = e ? ldexp(1024 + m, e - 25) : ldexp(m, -24);
    return (h & 0x8000) ? -v : v;
}

static void test_fp16_to_f32(void)
{
    int bad = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        uint32_t got = ob_f32_bits(ob_fp16_to_f32((uint16_t)h)), want;
        if (((h >> 10) & 31) == 31)
            want = (h & 0x8000u) << 16 | 0x7f800000u | (h & 0x3ffu) << 13;
        else {
            float f = (float)fp16_value((uint16_t)h);       /* exact: fp16 fits float */
            want = ob_f32_bits(f);
        }
        if (got != want && bad++ < 5)
            printf("# fp16 %04x -> %08x, want %08x\n", h, got, want);
    }
    ok(!bad, "fp16 -> f32 exact for all 65536 patterns (NaN payloads kept)");
}

/*
 * Reference float -> fp16 by search: the nearest finite fp16 (ties to the even pattern), with
 * 65536 standing for Inf above the largest finite value, as IEEE rounding does.
 */
static uint16_t ref_fp16(float f)
{
    uint32_t x = ob_f32_bits(f);
    uint16_t sign = (x >> 16) & 0x8000;
    if ((x & 0x7fffffff) > 0x7f800000) {
        uint16_t m = (x & 0x7fffff) >> 13;
        return sign | 0x7c00 | (m ? m : 1);
    }
    double a = fabs((double)f);
    uint32_t lo = 0, hi = 0x7c00;            /* value(lo) <= a < value(hi); value(0x7c00) = 65536 */
    if (a >= 65536)
        return sign | 0x7c00;
    while (hi - lo > 1) {
        uint32_t mid = (lo + hi) / 2;
        if (fp16_value(mid) <= a)
            lo = mid;
        else
            hi = mid;
    }
    double vl = fp16_value(lo), vh = hi == 0x7c00 ? 65536.0 : fp16_value(hi);
    uint32_t r = (a - vl < vh - a) ? lo : (a - vl > vh - a) ? hi : ((lo & 1) ? hi : lo);
    return sign | r;
}

/* Reference float -> bf16: nearest of the two bf16 neighbours, ties to even; 2^128 for Inf. */
static double bf16_value(uint16_t h)
{
    if ((h & 0x7fff) == 0x7f80)
        return (h & 0x8000) ? -ldexp(1, 128) : ldexp(1, 128);
    return (double)ob_f32_from_bits((uint32_t)h << 16);
}

static uint16_t ref_bf16(float f)
{
    uint32_t x = ob_f32_bits(f);
    if ((x & 0x7fffffff) > 0x7f800000)
        return (x >> 16) | 0x40;
    if ((x & 0x7fffffff) == 0x7f800000)
        return x >> 16;
    uint16_t lo = x >> 16, hi = lo + 1;      /* same sign: hi is one step further from 0 */
    double a = fabs((double)f), vl = fabs(bf16_value(lo)), vh = fabs(bf16_value(hi));
    if (a - vl < vh - a)
        return lo;
    if (a - vl > vh - a)
        return hi;
    return (lo & 1) ? hi : lo;
}

static void test_f32_to_half(void)
{
    int bad16 = 0, badb = 0;
    rng_state = 1300;
    for (long i = 0; i < 4000000; i++) {
        uint32_t x;
        switch (i & 3) {
        case 0: x = (uint32_t)rnd(); break;                         /* any pattern */
        case 1: x = ((uint32_t)rnd() & 0x807fffff) | (uint32_t)(101 + rnd() % 44) << 23; break;
        case 2: x = ((uint32_t)rnd() & 0xffffe000) | 0x1000; x += (uint32_t)(rnd() % 3) - 1; break;
        default: x = ((uint32_t)rnd() & 0xffff0000) | 0x8000; x += (uint32_t)(rnd() % 3) - 1; break;
        }
        float f = ob_f32_from_bits(x);
        uint16_t g = ob_f32_to_fp16(f), w = ref_fp16(f);
        if (g != w && bad16++ < 5)
            printf("# f32 %08x -> fp16 %04x, want %04x\n", x, g, w);
        g = ob_f32_to_bf16(f);
        w = ref_bf16(f);
        if (g != w && badb++ < 5)
            printf("# f32 %08x -> bf16 %04x, want %04x\n", x, g, w);
    }
    /* every finite fp16 and the midpoints between neighbours (and one float ulp either side) */
    for (uint32_t h = 0; h < 0x7c00; h++)
        for (int s = 0; s < 2; s++) {
            uint16_t hs = (uint16_t)(h | (uint32_t)s << 15);
            float f = ob_fp16_to_f32(hs);
            if (ob_f32_to_fp16(f) != hs && bad16++ < 5)
                printf("# fp16 %04x does not round-trip\n", hs);
            double mid = (fp16_value(hs) + (h + 1 == 0x7c00 ? (s ? -65536.0 : 65536.0)
                                                            : fp16_value(hs + 1))) / 2;
            float fm = (float)mid;                          /* exact: 12 bits */
            float nb[3] = {nextafterf(fm, 0), fm, nextafterf(fm, fm * 2)};
            for (int k = 0; k < 3; k++)
                if (ob_f32_to_fp16(nb[k]) != ref_fp16(nb[k]) && bad16++ < 5)
                    printf("# f32 %08x -> fp16 %04x, want %04x\n", ob_f32_bits(nb[k]),
                           ob_f32_to_fp16(nb[k]), ref_fp16(nb[k]));
        }
    ok(!bad16, "f32 -> fp16 rounds to nearest even (random, every fp16, every midpoint)");

    for (uint32_t h = 0; h < 65536; h++) {
        if ((h & 0x7fff) > 0x7f80)
            continue;
        if (ob_f32_to_bf16(ob_bf16_to_f32((uint16_t)h)) != h && badb++ < 5)
            printf("# bf16 %04x does not round-trip\n", h);
    }
    ok(!badb, "f32 -> bf16 rounds to nearest even (random, every bf16, midpoints)");

    /* NaN and Inf */
    int nanbad = 0;
    static const uint32_t nans[] = {0x7f800001, 0x7fa00000, 0xff800100, 0x7fc00000, 0xffffffff};
    for (size_t i = 0; i < sizeof nans / sizeof nans[0]; i++) {
        float f = ob_f32_from_bits(nans[i]);
        uint16_t h = ob_f32_to_fp16(f), b = ob_f32_to_bf16(f);
        nanbad += (h & 0x7c00) != 0x7c00 || !(h & 0x3ff) || (h >> 15) != (nans[i] >> 31);
        nanbad += (b & 0x7fc0) != 0x7fc0 || (b >> 15) != (nans[i] >> 31);
        nanbad += !isnan(ob_fp16_to_f32(h)) || !isnan(ob_bf16_to_f32(b));
    }
    nanbad += ob_f32_to_fp16(INFINITY) != 0x7c00 || ob_f32_to_fp16(-INFINITY) != 0xfc00;
    nanbad += ob_f32_to_fp16(65520.0f) != 0x7c00 || ob_f32_to_fp16(65519.996f) != 0x7bff;
    nanbad += ob_f32_to_bf16(INFINITY) != 0x7f80 || ob_f32_to_bf16(3.4028235e38f) != 0x7f80;
    nanbad += ob_f32_to_fp16(0x1p-25f) != 0 || ob_f32_to_fp16(0x1.000002p-25f) != 1;
    /* a signalling fp16 NaN keeps its pattern through f32 and back */
    nanbad += ob_f32_to_fp16(ob_fp16_to_f32(0x7c01)) != 0x7c01;
    ok(!nanbad, "NaN stays NaN (bf16: quiet), Inf and overflow edges");
}

/* ---- packed scales ------------------------------------------------------------------------- */

static void test_scales(void)
{
    int bad = 0;
    rng_state = 7;
    for (int it = 0; it < 10000; it++) {
        uint8_t sc[8], m[8], q[12], s2, m2;
        int8_t s3[16];
        for (int j = 0; j < 8; j++) {
            sc[j] = rnd() & 63;
            m[j] = rnd() & 63;
        }
        ob_k4_pack_scales(sc, m, q);
        for (int j = 0; j < 8; j++) {
            ob_k4_scale_min(j, q, &s2, &m2);
            bad += s2 != sc[j] || m2 != m[j];
        }
        for (int k = 0; k < 16; k++)
            s3[k] = (int8_t)((int)(rnd() & 63) - 32);
        ob_q3k_pack_scales(s3, q);
        for (int k = 0; k < 16; k++)
            bad += ob_q3k_scale(k, q) != s3[k];
    }
    ok(!bad, "K-quant scale packing round-trips (6-bit Q4_K/Q5_K scales+mins, Q3_K scales)");
}

/* ---- dequantisers vs exact arithmetic ------------------------------------------------------ */

static double h16(const uint8_t *p) { return ob_fp16_to_f32((uint16_t)(p[0] | p[1] << 8)); }
static int bits(const uint8_t *p, int byte, int shift, int n) { return (p[byte] >> shift) & ((1 << n) - 1); }

/* Value f of one block, in double from the layout description: exact for finite scales. */
static double exact_value(uint32_t t, const uint8_t *b, int f)
{
    switch (t) {
    case OB_Q4_0: return h16(b) * (bits(b, 2 + f % 16, 4 * (f / 16), 4) - 8);
    case OB_Q4_1: return h16(b) * bits(b, 4 + f % 16, 4 * (f / 16), 4) + h16(b + 2);
    case OB_Q5_0: return h16(b) * ((bits(b, 6 + f % 16, 4 * (f / 16), 4) | bits(b, 2 + f / 8, f % 8, 1) << 4) - 16);
    case OB_Q5_1: return h16(b) * (bits(b, 8 + f % 16, 4 * (f / 16), 4) | bits(b, 4 + f / 8, f % 8, 1) << 4) + h16(b + 2);
    case OB_Q8_0: return h16(b) * (int8_t)b[2 + f];
    case OB_Q2_K: {
        int sc = b[f / 16], q = bits(b, 16 + (f / 128) * 32 + f % 32, 2 * ((f / 32) % 4), 2);
        return h16(b + 80) * (sc & 15) * q - h16(b + 82) * (sc >> 4);
    }
    case OB_Q3_K: {
        int k = f / 16;
        int s = bits(b, 96 + k % 8, 4 * (k / 8), 4) | bits(b, 96 + 8 + k % 4, 2 * (k / 4), 2) << 4;
        int q = bits(b, 32 + (f / 128) * 32 + f % 32, 2 * ((f / 32) % 4), 2) - (bits(b, f % 32, f / 32, 1) ? 0 : 4);
        return h16(b + 108) * (s - 32) * q;
    }
    case OB_Q4_K:
    case OB_Q5_K: {
        int j = f / 32, sc, m;
        const uint8_t *s = b + 4;
        if (j < 4) {
            sc = s[j] & 63;
            m = s[j + 4] & 63;
        } else {
            sc = (s[j + 4] & 15) | (s[j - 4] >> 6) << 4;
            m = (s[j + 4] >> 4) | (s[j] >> 6) << 4;
        }
        int qoff = t == OB_Q4_K ? 16 : 48;
        int q = bits(b, qoff + (f / 64) * 32 + f % 32, 4 * ((f / 32) % 2), 4);
        if (t == OB_Q5_K)
            q |= bits(b, 16 + f % 32, f / 32, 1) << 4;
        return h16(b) * sc * q - h16(b + 2) * m;
    }
    case OB_Q6_K: {
        int h = f / 128, r = f % 128;
        int q = bits(b, h * 64 + r % 64, 4 * (r / 64), 4) | bits(b, 128 + h * 32 + r % 32, 2 * (r / 32), 2) << 4;
        return h16(b + 208) * (int8_t)b[192 + f / 16] * (q - 32);
    }
    case OB_Q8_K: {
        float d;
        memcpy(&d, b, 4);
        return (double)d * (int8_t)b[4 + f];
    }
    }
    return NAN;
}

/*
 * The types under test come from the library (types_init), not from lists kept here: every
 * block type ob_dequant_supported accepts, every type ob_quant_supported accepts (the latter
 * ordered by bits per weight for the RMSE table).
 */
static uint32_t block_types[OB_TYPE_COUNT], quant_types[OB_TYPE_COUNT];
static size_t N_BLOCK_TYPES, N_QUANT_TYPES;

static double exact_value(uint32_t t, const uint8_t *b, int f);

static double bpw(uint32_t t)
{
    return 8.0 * ob_type_size(t) / ob_type_blck(t);
}

static void types_init(void)
{
    for (uint32_t t = 0; t < OB_TYPE_COUNT; t++) {
        if (ob_dequant_supported(t) && ob_type_blck(t) > 1)
            block_types[N_BLOCK_TYPES++] = t;
        if (ob_quant_supported(t)) {
            size_t j = N_QUANT_TYPES++;
            for (; j > 0 && bpw(quant_types[j - 1]) < bpw(t); j--)
                quant_types[j] = quant_types[j - 1];
            quant_types[j] = t;
        }
    }
}

/* every block type the library dequantises is one this test can evaluate exactly */
static void test_types(void)
{
    static const uint8_t zero[512];
    char why[200] = "";
    size_t wl = 0;
    for (size_t i = 0; i < N_BLOCK_TYPES; i++)
        if (isnan(exact_value(block_types[i], zero, 0)) && wl < sizeof why - 1)
            wl += (size_t)snprintf(why + wl, sizeof why - wl, " %s", ob_type_name(block_types[i]));
    ok(N_BLOCK_TYPES >= 11 && N_QUANT_TYPES >= 13 && !wl, "%zu block types to dequantise, %zu "
       "to quantise (from ob_dequant_supported, ob_quant_supported)%s%s", N_BLOCK_TYPES,
       N_QUANT_TYPES, wl ? "; exact_value does not know:" : "", why);
}

/* Offsets of the fp16 scale fields (finite random values are put there). */
static void scale_fields(uint32_t t, int off[2])
{
    off[0] = off[1] = -1;
    switch (t) {
    case OB_Q4_1: case OB_Q5_1: case OB_Q4_K: case OB_Q5_K: off[1] = 2; /* fall through */
    case OB_Q4_0: case OB_Q5_0: case OB_Q8_0: off[0] = 0; break;
    case OB_Q2_K: off[0] = 80; off[1] = 82; break;
    case OB_Q3_K: off[0] = 108; break;
    case OB_Q6_K: off[0] = 208; break;
    }
}

static void random_blocks(uint32_t t, uint8_t *buf, int nblk)
{
    uint32_t ts = ob_type_size(t);
    for (size_t i = 0; i < (size_t)nblk * ts; i++)
        buf[i] = (uint8_t)rnd();
    for (int i = 0; i < nblk; i++) {
        uint8_t *b = buf + (size_t)i * ts;
        if (t == OB_Q8_K) {
            /* finite float32 scales of any exponent from 2^-40 to 2^40 */
            uint32_t x = ((uint32_t)rnd() & 0x807fffff) | (uint32_t)(87 + rnd() % 81) << 23;
            memcpy(b, &x, 4);
            continue;
        }
        int off[2];
        scale_fields(t, off);
        for (int k = 0; k < 2; k++) {
            if (off[k] < 0)
                continue;
            uint16_t h;
            do
                h = (uint16_t)rnd();           /* any finite fp16: subnormal to 65504 */
            while ((h & 0x7c00) == 0x7c00);
            b[off[k]] = h & 0xff;
            b[off[k] + 1] = h >> 8;
        }
    }
}

static void test_dequant_exact(void)
{
    enum { NBLK = 2048 };
    uint8_t *buf = malloc((size_t)NBLK * 292);
    float *y = malloc((size_t)NBLK * 256 * sizeof(float));
    rng_state = 42;
    for (size_t ti = 0; ti < N_BLOCK_TYPES; ti++) {
        uint32_t t = block_types[ti], bl = ob_type_blck(t), ts = ob_type_size(t);
        random_blocks(t, buf, NBLK);
        int rc = ob_dequant_row(t, buf, y, (int64_t)NBLK * bl), bad = 0;
        for (int i = 0; i < NBLK && !rc; i++)
            for (uint32_t f = 0; f < bl; f++) {
                float want = (float)exact_value(t, buf + (size_t)i * ts, (int)f);
                float got = y[(size_t)i * bl + f];
                if (ob_f32_bits(got) != ob_f32_bits(want) && !(got == 0 && want == 0) &&
                    bad++ < 3)
                    printf("# %s block %d value %u: %a, exact value rounds to %a\n",
                           ob_type_name(t), i, f, got, want);
            }
        ok(!rc && !bad, "%s dequantised = exact value rounded once to float32", ob_type_name(t));
    }
    free(buf);
    free(y);
}

/* ---- errors ------------------------------------------------------------------------------------ */

static void test_errors(void)
{
    float x[256] = {0}, y[256];
    uint8_t q[512];
    int bad = 0;
    static const uint32_t unsupp_dq[] = {OB_Q8_1, OB_IQ2_XXS, OB_IQ4_NL, OB_TQ1_0, OB_MXFP4,
                                         OB_I8, OB_F64, 31, 1000};
    for (size_t i = 0; i < sizeof unsupp_dq / sizeof unsupp_dq[0]; i++) {
        uint32_t t = unsupp_dq[i];
        int rc = ob_dequant_row(t, q, y, 256);
        bad += rc != OB_EUNSUPP || !strstr(ob_errmsg(), ob_type_name(t)) || ob_dequant_supported(t);
        rc = ob_quant_row(t, x, q, 256);
        bad += rc != OB_EUNSUPP || !strstr(ob_errmsg(), ob_type_name(t)) || ob_quant_supported(t);
    }
    bad += ob_quant_row(OB_Q8_K, x, q, 256) != OB_EUNSUPP || !strstr(ob_errmsg(), "Q8_K");
    ok(!bad, "unsupported types give OB_EUNSUPP naming the type");

    bad = 0;
    bad += ob_dequant_row(OB_Q4_K, q, y, 255) != OB_EUSAGE;
    bad += ob_quant_row(OB_Q4_0, x, q, 33) != OB_EUSAGE;
    bad += ob_quant_row(OB_Q8_0, x, q, -32) != OB_EUSAGE;
    bad += ob_quant_row(OB_Q4_K, x, q, 0) != 0 || ob_dequant_row(OB_Q6_K, q, y, 0) != 0;
    x[100] = NAN;
    bad += ob_quant_row(OB_Q4_K, x, q, 256) != OB_ERANGE || !strstr(ob_errmsg(), "value 100");
    x[100] = INFINITY;
    bad += ob_quant_row(OB_Q8_0, x, q, 256) != OB_ERANGE;
    bad += ob_quant_row(OB_F16, x, q, 256) != 0;         /* float formats keep Inf */
    x[100] = 1e9f;                                        /* the scale overflows fp16 */
    bad += ob_quant_row(OB_Q4_0, x, q, 256) != OB_ERANGE || !strstr(ob_errmsg(), "block 3");
    bad += ob_quant_row(OB_Q6_K, x, q, 256) != OB_ERANGE;
    ok(!bad, "bad n gives OB_EUSAGE; non-finite values and fp16 scale overflow OB_ERANGE");
}

/* ---- test matrix, determinism and RMSE ------------------------------------------------------ */

enum { ROWS = 64, COLS = 4096 };

/* Gaussian-ish (sum of four uniforms), rows of eight different scales, 1/256 outliers x12. */
static float *test_matrix(uint64_t seed)
{
    float *x = malloc(sizeof(float) * ROWS * COLS);
    rng_state = seed;
    for (int r = 0; r < ROWS; r++)
        for (int c = 0; c < COLS; c++) {
            double g = (rnd_unit() + rnd_unit() + rnd_unit() + rnd_unit() - 2.0) * 1.7320508;
            g *= 0.01 * (1 + r % 8);
            if (rnd() % 256 == 0)
                g *= 12;
            x[(size_t)r * COLS + c] = (float)g;
        }
    return x;
}


static void test_determinism(void)
{
    float *x = test_matrix(1);
    size_t cap = (size_t)ROWS * COLS * 4;
    uint8_t *a = malloc(cap), *b = malloc(cap);
    for (size_t ti = 0; ti < N_QUANT_TYPES; ti++) {
        uint32_t t = quant_types[ti];
        uint64_t rb;
        ob_type_row_bytes(t, COLS, &rb);
        int rc = ob_quant_row(t, x, a, (int64_t)ROWS * COLS);
        memset(b, 0xa5, cap);
        for (int r = ROWS - 1; r >= 0 && !rc; r--)     /* row by row, backwards */
            rc = ob_quant_row(t, x + (size_t)r * COLS, b + r * rb, COLS);
        ok(!rc && !memcmp(a, b, rb * ROWS), "%s quantiser: same bytes whole or row by row",
           ob_type_name(t));
    }
    free(x);
    free(a);
    free(b);
}

static int rmse_report(void)
{
    float *x = test_matrix(2);
    size_t n = (size_t)ROWS * COLS;
    uint8_t *q = malloc(n * 4);
    float *y = malloc(n * sizeof(float));
    double rms = 0, e[OB_TYPE_COUNT];
    for (size_t i = 0; i < n; i++)
        rms += (double)x[i] * x[i];
    rms = sqrt(rms / n);
    printf("# round trip of a %d x %d gaussian-ish matrix with outliers, rms %.6g\n", ROWS,
           COLS, rms);
    printf("# %-5s %6s %12s %10s\n", "type", "bpw", "rmse", "rmse/rms");
    int bad = 0;
    for (size_t ti = 0; ti < N_QUANT_TYPES; ti++) {
        uint32_t t = quant_types[ti];
        int rc = ob_quant_row(t, x, q, (int64_t)n);
        if (!rc)
            rc = ob_dequant_row(t, q, y, (int64_t)n);
        double s = 0;
        for (size_t i = 0; i < n; i++)
            s += ((double)x[i] - y[i]) * ((double)x[i] - y[i]);
        e[ti] = rc ? NAN : sqrt(s / n);
        printf("# %-5s %6.3f %12.6g %10.6f\n", ob_type_name(t),
               8.0 * ob_type_size(t) / ob_type_blck(t), e[ti], e[ti] / rms);
        bad += !isfinite(e[ti]);
    }
    ok(!bad, "every round-trip RMSE is finite");
    /* orderings that must hold: more bits of the same family, less error */
    static const uint32_t order[][2] = {
        {OB_F32, OB_F16}, {OB_F16, OB_BF16}, {OB_BF16, OB_Q8_0}, {OB_Q8_0, OB_Q6_K},
        {OB_Q6_K, OB_Q5_K}, {OB_Q5_K, OB_Q4_K}, {OB_Q4_K, OB_Q3_K}, {OB_Q3_K, OB_Q2_K},
        {OB_Q8_0, OB_Q5_0}, {OB_Q5_0, OB_Q4_0}, {OB_Q5_1, OB_Q4_1},
    };
    for (size_t i = 0; i < sizeof order / sizeof order[0]; i++) {
        double ea = 0, eb = 0;
        for (size_t ti = 0; ti < N_QUANT_TYPES; ti++) {
            if (quant_types[ti] == order[i][0])
                ea = e[ti];
            if (quant_types[ti] == order[i][1])
                eb = e[ti];
        }
        ok(ea < eb || (ea == 0 && eb == 0), "rmse %s < %s", ob_type_name(order[i][0]),
           ob_type_name(order[i][1]));
    }
    free(x);
    free(q);
    free(y);
    return 0;
}

int main(int argc, char **argv)
{
    types_init();
    if (argc == 2 && !strcmp(argv[1], "types")) {        /* for tests/t1300-quant.sh */
        for (uint32_t t = 0; t < OB_TYPE_COUNT; t++)
            if (ob_dequant_supported(t) && t != OB_Q8_K)     /* Q8_K: gguf-py has none */
                printf("dequant %s\n", ob_type_name(t));
        for (size_t i = 0; i < N_QUANT_TYPES; i++)
            printf("quant %s\n", ob_type_name(quant_types[i]));
        return 0;
    }
    if (argc == 2 && !strcmp(argv[1], "rmse")) {
        rmse_report();
    } else if (argc == 1) {
        test_types();
        test_sizes();
        test_fp16_to_f32();
        test_f32_to_half();
        test_scales();
        test_dequant_exact();
        test_errors();
        test_determinism();
    } else {
        fprintf(stderr, "usage: quant [rmse|types]\n");
        return 2;
    }
    return tap_done();
}
