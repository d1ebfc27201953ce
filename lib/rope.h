/*
 * rope.h — the RoPE tables every route rotates with (ob_rope in lib/arith/arith.h), computed
 * on the host without libm (lib/rope.c): the same floats on every machine and C library.
 */
#ifndef OB_ROPE_H
#define OB_ROPE_H

#include "1b.h"

/*
 * cs, sn [n_ctx][n_rot / 2]: for position p and pair i,
 *     theta_i = base^e_i,  e_i = -2i / n_rot,   a = p * theta_i,
 *     cs = cos(a), sn = sin(a),
 * where e_i, theta_i and a are the doubles that float64 arithmetic with a correctly rounded
 * pow gives (e_i and a rounded once, theta_i the double nearest to base^e_i), and cs, sn are the
 * floats nearest to the exact cosine and sine of that double a. Computed with + - * / on
 * doubles only (double-double arithmetic), so the bits do not depend on the host's libm; they
 * equal the old float(cos(a)) of glibc wherever that was correctly rounded (tests/unit/rope.c).
 * base > 1 and finite, n_rot even and >= 2, n_ctx >= 0.
 */
void ob_rope_fill(double base, int n_rot, int n_ctx, float *cs, float *sn);

/* theta_i of the tables: the double nearest to base^(-2.0 * i / n_rot), 0 <= i < n_rot / 2 */
double ob_rope_theta(double base, int i, int n_rot);

/* The tables of a model (hp->rope_base, hp->n_rot), allocated (free() them); OB_ENOMEM. */
int ob_rope_tables(const struct ob_hparams *hp, int n_ctx, float **cs, float **sn);

#endif
