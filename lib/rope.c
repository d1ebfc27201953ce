/*
 * rope.c — the RoPE tables (rope.h) without libm: the one numeric input of the forward pass
 * that is not computed by lib/arith/, computed here so that it is the same on every machine.
 *
 * The values are those of the float64 recipe the tables always had,
 *     theta_i = pow(base, -2.0 * i / n_rot),  a = (double)p * theta_i,  cs = (float)cos(a),
 * with every transcendental step evaluated exactly enough to round correctly once:
 *  - theta_i is the double nearest to base^e (e = -2.0 * i / n_rot, the double), from
 *    exp(e * log(base)) in double-double arithmetic (about 100 good bits);
 *  - a is the double product, as before; cos(a) and sin(a) are evaluated in double-double and
 *    rounded once to the nearest float (not via a double: no double rounding).
 * Double-double arithmetic uses only + - * / on doubles (Knuth's two-sum, Dekker's split
 * product: no fma, no libm), whose IEEE 754 results are the same on every machine under the
 * build's flags (-ffp-contract=off, no fast-math), so the tables are a pure function of
 * (base, n_rot, n_ctx). A result could round differently from the exact value only if the
 * exact value lay within about 2^-90 of a rounding boundary; tests/unit/rope.c checks the
 * tables against glibc's and against an independent arbitrary-precision oracle.
 *
 * How the angles are evaluated. Per pair i and positions p = 64 q + j, the exact angle
 * X = p * theta (a real number, not a double) is the sum of 64 q theta and j theta, each exact
 * as a double-double (a product of a double and an integer below 2^24). Their cosines and
 * sines come from one reduction modulo pi/2 (pi/2 in four doubles) and Taylor series each,
 * 64 + n_ctx / 64 evaluations per pair; cos X and sin X follow by the angle-addition formula.
 * The table's angle a = fl(p theta) differs from X by e = X - a, which the exact product
 * gives; cos a = cos X cos e + sin X sin e (|e| <= ulp(a) / 2 <= 2^-22 for a < 2^31, so cos e
 * and sin e are short series). Every value is thus computed independently (no error accumulates
 * along p), with an absolute error below 2^-95.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "rope.h"

/* ---- double-double arithmetic: a value hi + lo with |lo| <= ulp(hi) / 2 -------------------- */

typedef struct {
    double hi, lo;
} dd;

/* a + b = s + e exactly (Knuth) */
static inline dd two_sum(double a, double b)
{
    double s = a + b, bb = s - a;
    return (dd){s, (a - (s - bb)) + (b - bb)};
}

/* a + b = s + e exactly, given |a| >= |b| or a == 0 (Dekker) */
static inline dd fast_two_sum(double a, double b)
{
    double s = a + b;
    return (dd){s, b - (s - a)};
}

/* a = h + l exactly, each half of 26 bits (Veltkamp's split; |a| < 2^995) */
static inline void split(double a, double *h, double *l)
{
    double t = 134217729.0 * a;                       /* 2^27 + 1 */
    *h = t - (t - a);
    *l = a - *h;
}

/* a * b = p + e exactly (Dekker), barring overflow and underflow */
static inline dd two_prod(double a, double b)
{
    double p = a * b, ah, al, bh, bl;
    split(a, &ah, &al);
    split(b, &bh, &bl);
    return (dd){p, ((ah * bh - p) + ah * bl + al * bh) + al * bl};
}

static inline dd dd_neg(dd a)
{
    return (dd){-a.hi, -a.lo};
}

static inline dd dd_add(dd a, dd b)
{
    dd s = two_sum(a.hi, b.hi), t = two_sum(a.lo, b.lo);
    s = fast_two_sum(s.hi, s.lo + t.hi);
    return fast_two_sum(s.hi, s.lo + t.lo);
}

static inline dd dd_mul(dd a, dd b)
{
    dd p = two_prod(a.hi, b.hi);
    return fast_two_sum(p.hi, p.lo + (a.hi * b.lo + a.lo * b.hi));
}

static inline dd dd_mul_d(dd a, double b)
{
    dd p = two_prod(a.hi, b);
    return fast_two_sum(p.hi, p.lo + a.lo * b);
}

/* a * 2^k, k small: exact */
static inline dd dd_scale(dd a, double pow2)
{
    return (dd){a.hi * pow2, a.lo * pow2};
}

static dd dd_div(dd a, dd b)
{
    double q1 = a.hi / b.hi;
    dd r = dd_add(a, dd_neg(dd_mul_d(b, q1)));
    double q2 = r.hi / b.hi;
    r = dd_add(r, dd_neg(dd_mul_d(b, q2)));
    double q3 = r.hi / b.hi;
    return dd_add(fast_two_sum(q1, q2), (dd){q3, 0.0});
}

/* 2^k as a double, -1022 <= k <= 1023 */
static double pow2i(int k)
{
    uint64_t u = (uint64_t)(k + 1023) << 52;
    double d;
    memcpy(&d, &u, sizeof d);
    return d;
}

/* the integer nearest to x (halves away from zero), |x| < 2^62 */
static double nearest(double x)
{
    return (double)(int64_t)(x < 0 ? x - 0.5 : x + 0.5);
}

/* ---- constants (digits from a 120-digit evaluation; each part the double nearest to what the
 * parts before it leave) ------------------------------------------------------------------- */

static const double LN2[3] = {0x1.62e42fefa39efp-1, 0x1.abc9e3b39803fp-56, 0x1.7b57a079a1934p-111};
static const double INV_LN2 = 0x1.71547652b82fep+0;
static const double PIO2[4] = {0x1.921fb54442d18p+0, 0x1.1a62633145c07p-54,
                               -0x1.f1976b7ed8fbcp-110, 0x1.4cf98e804177dp-164};
static const double TWO_OVER_PI = 0x1.45f306dc9c883p-1;

#define N_ATANH 24                       /* log: atanh series, s^2 <= 0.0295: 2^-120 */
#define N_EXPM1 10                       /* exp: Taylor on |r| <= 2^-11: 2^-140 */
#define N_SINCOS 15                      /* sin, cos: Taylor on |r| <= 0.79: 2^-115 */

struct coefs {
    dd atanh[N_ATANH];                   /* 1 / (2j + 1) */
    dd fact[N_EXPM1 + 1];                /* 1 / k! */
    dd sin[N_SINCOS], cos[N_SINCOS];     /* (-1)^j / (2j + 1)!, (-1)^j / (2j)! */
};

static void coefs_init(struct coefs *c)
{
    dd one = {1.0, 0.0}, f = one;
    for (int j = 0; j < N_ATANH; j++)
        c->atanh[j] = dd_div(one, (dd){2.0 * j + 1.0, 0.0});
    for (int k = 0; k <= N_EXPM1; k++) {
        if (k)
            f = dd_div(f, (dd){(double)k, 0.0});
        c->fact[k] = f;
    }
    f = one;                             /* 1 / k! for k up to 2 N_SINCOS - 1 */
    for (int k = 0; k < 2 * N_SINCOS; k++) {
        if (k)
            f = dd_div(f, (dd){(double)k, 0.0});
        dd v = (k / 2) % 2 ? dd_neg(f) : f;
        if (k % 2)
            c->sin[k / 2] = v;
        else
            c->cos[k / 2] = v;
    }
}

/* ---- log, exp, sin and cos in double-double ---------------------------------------------- */

/* log(x), x a positive normal double: x = 2^k m, m in [sqrt(1/2), sqrt(2)), log m = 2 atanh(s)
 * with s = (m - 1) / (m + 1) */
static dd dd_log(const struct coefs *c, double x)
{
    uint64_t u;
    memcpy(&u, &x, sizeof u);
    int k = (int)((u >> 52) & 0x7ff) - 1023;
    u = (u & 0x000fffffffffffffull) | 0x3ff0000000000000ull;
    double m;
    memcpy(&m, &u, sizeof m);
    if (m > 0x1.6a09e667f3bcdp+0) {      /* sqrt(2) */
        m *= 0.5;
        k++;
    }
    dd s = dd_div((dd){m - 1.0, 0.0}, two_sum(m, 1.0));   /* m - 1 exact: m in [0.7, 1.5) */
    dd z = dd_mul(s, s), p = c->atanh[N_ATANH - 1];
    for (int j = N_ATANH - 2; j >= 0; j--)
        p = dd_add(dd_mul(p, z), c->atanh[j]);
    dd klog2 = dd_add(dd_add(two_prod(k, LN2[0]), two_prod(k, LN2[1])), (dd){k * LN2[2], 0.0});
    return dd_add(klog2, dd_scale(dd_mul(s, p), 2.0));
}

/* e^x, |x| < 700: x = k ln2 + r, e^r = (e^(r / 1024))^1024 through expm1 and 10 squarings */
static dd dd_exp(const struct coefs *c, dd x)
{
    double k = nearest(x.hi * INV_LN2);
    dd r = dd_add(x, dd_neg(dd_add(dd_add(two_prod(k, LN2[0]), two_prod(k, LN2[1])),
                                   (dd){k * LN2[2], 0.0})));
    r = dd_scale(r, 1.0 / 1024.0);
    dd q = c->fact[N_EXPM1];
    for (int j = N_EXPM1 - 1; j >= 1; j--)
        q = dd_add(dd_mul(q, r), c->fact[j]);
    dd em1 = dd_mul(q, r);                               /* e^r - 1 */
    for (int j = 0; j < 10; j++)                         /* e^2r - 1 = (e^r - 1)(e^r + 1) */
        em1 = dd_add(dd_scale(em1, 2.0), dd_mul(em1, em1));
    return dd_scale(dd_add((dd){1.0, 0.0}, em1), pow2i((int)k));
}

/* sin and cos of x >= 0 (x < 2^40): x = n pi/2 + r, |r| <= pi/4, Taylor series in r */
static void dd_sincos(const struct coefs *c, dd x, dd *sn, dd *cs)
{
    double n = nearest(x.hi * TWO_OVER_PI);
    dd r = dd_add(x, dd_neg(two_prod(n, PIO2[0])));
    r = dd_add(r, dd_neg(two_prod(n, PIO2[1])));
    r = dd_add(r, dd_neg(two_prod(n, PIO2[2])));
    r = dd_add(r, (dd){-n * PIO2[3], 0.0});
    dd z = dd_mul(r, r), ps = c->sin[N_SINCOS - 1], pc = c->cos[N_SINCOS - 1];
    for (int j = N_SINCOS - 2; j >= 0; j--) {
        ps = dd_add(dd_mul(ps, z), c->sin[j]);
        pc = dd_add(dd_mul(pc, z), c->cos[j]);
    }
    dd s = dd_mul(ps, r);
    switch ((int64_t)n & 3) {
    case 0: *sn = s; *cs = pc; break;
    case 1: *sn = pc; *cs = dd_neg(s); break;
    case 2: *sn = dd_neg(s); *cs = dd_neg(pc); break;
    default: *sn = dd_neg(pc); *cs = s; break;
    }
}

/* the double nearest to base^(-2i/n_rot), the exponent rounded to a double first */
static double rope_theta(const struct coefs *c, dd log_base, int i, int n_rot)
{
    if (i == 0)
        return 1.0;
    double e = -2.0 * i / (double)n_rot;
    dd t = dd_exp(c, dd_mul_d(log_base, e));
    return t.hi + t.lo;                                  /* t.hi: t is normalised */
}

/*
 * The float nearest to hi + lo (|v| >= 2^-126 or 0). (float)hi alone rounds twice when hi is
 * exactly halfway between two floats and lo is not 0: then lo says on which side v lies.
 */
static float dd_to_float(dd v)
{
    float f = (float)v.hi;
    double d = v.hi - (double)f;                         /* exact */
    if (d != 0.0 && v.lo != 0.0 && (d > 0.0) == (v.lo > 0.0)) {
        double g = (double)f + 2.0 * d;                  /* the other neighbour, if a midpoint */
        if ((double)(float)g == g)
            f = (float)g;
    }
    return f;
}

/* ---- the tables ------------------------------------------------------------------------------ */

#define BLK 64                                           /* positions per angle-addition block */

void ob_rope_fill(double base, int n_rot, int n_ctx, float *cs, float *sn)
{
    struct coefs c;
    coefs_init(&c);
    int half = n_rot / 2;
    dd log_base = dd_log(&c, base);
    for (int i = 0; i < half; i++) {
        double th = rope_theta(&c, log_base, i, n_rot);
        dd ac[BLK], as[BLK];                             /* cos and sin of j theta, j < BLK */
        for (int j = 0; j < BLK; j++)
            dd_sincos(&c, two_prod((double)j, th), &as[j], &ac[j]);
        for (int p0 = 0; p0 < n_ctx; p0 += BLK) {
            dd bc, bs;                                   /* cos and sin of p0 theta */
            dd_sincos(&c, two_prod((double)p0, th), &bs, &bc);
            for (int j = 0; j < BLK && p0 + j < n_ctx; j++) {
                int p = p0 + j;
                /* X = p theta exactly; the table's angle is a = fl(p theta) = X - e */
                dd cx = dd_add(dd_mul(bc, ac[j]), dd_neg(dd_mul(bs, as[j])));
                dd sx = dd_add(dd_mul(bs, ac[j]), dd_mul(bc, as[j]));
                double e = two_prod((double)p, th).lo;
                /* cos e = 1 + t, sin e = e - e3 (|e| <= 2^-22: the next terms are below 2^-117) */
                double e2 = e * e, t = e2 * (e2 / 24.0) - 0.5 * e2, e3 = e2 * e / 6.0;
                dd kc = two_prod(sx.hi, e), ks = two_prod(cx.hi, e);
                kc = two_sum(kc.hi, kc.lo + ((sx.lo * e - sx.hi * e3) + cx.hi * t));
                ks = two_sum(ks.hi, ks.lo + ((cx.lo * e - cx.hi * e3) - sx.hi * t));
                /* cos a = cos X cos e + sin X sin e;  sin a = sin X cos e - cos X sin e */
                cs[(size_t)p * half + i] = dd_to_float(dd_add(cx, kc));
                sn[(size_t)p * half + i] = dd_to_float(dd_add(sx, dd_neg(ks)));
            }
        }
    }
}

double ob_rope_theta(double base, int i, int n_rot)
{
    struct coefs c;
    coefs_init(&c);
    return rope_theta(&c, dd_log(&c, base), i, n_rot);
}

int ob_rope_tables(const struct ob_hparams *hp, int n_ctx, float **cs, float **sn)
{
    int half = (int)hp->n_rot / 2;
    float *c = malloc((size_t)n_ctx * (size_t)half * sizeof *c);
    float *s = malloc((size_t)n_ctx * (size_t)half * sizeof *s);
    if (!c || !s) {
        free(c);
        free(s);
        return ob_seterr(OB_ENOMEM, "out of memory for rope tables");
    }
    ob_rope_fill((double)hp->rope_base, (int)hp->n_rot, n_ctx, c, s);
    *cs = c;
    *sn = s;
    return 0;
}
