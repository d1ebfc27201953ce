#!/usr/bin/env python3
"""An independent oracle for the RoPE tables of lib/rope.c, in exact decimal arithmetic.

    rope_oracle.py < SAMPLES      lines "base n_rot i p theta cs sn" from `bin/unit/rope sample`
                                  (base, theta: hex doubles; cs, sn: float bits in hex)

For each line it computes, with Python's decimal module at 80 digits (no libm, no double-double,
a different algorithm from lib/rope.c's):
    e     = -2.0 * i / n_rot                    (a double, as in C)
    theta = the double nearest to base^e        (exp(e ln base), rounded once)
    a     = p * theta                           (a double product, as in C)
    cs    = the float nearest to cos(a), sn = the float nearest to sin(a)
and prints every line where the table differs. Exit status 0 when none does, 1 otherwise.
"""
import struct
import sys
from decimal import Decimal, getcontext

getcontext().prec = 80


def machin_pi():
    def arctan_inv(x):
        x = Decimal(x)
        s, t, n, x2, sign = Decimal(0), 1 / x, 1, x * x, 1
        eps = Decimal(10) ** -90
        while t > eps:
            s += sign * t / n
            t /= x2
            n += 2
            sign = -sign
        return s
    getcontext().prec = 100
    pi = 4 * (4 * arctan_inv(5) - arctan_inv(239))
    getcontext().prec = 80
    return +pi


PI = machin_pi()
HALF_PI = PI / 2


def sin_cos(a):
    """sin and cos of the double a >= 0, from an exact reduction modulo pi/2 and Taylor series"""
    x = Decimal(a)                                  # exact
    n = int((x / HALF_PI).to_integral_value())
    r = x - n * HALF_PI
    r2 = r * r
    s, c = Decimal(0), Decimal(0)
    ts, tc, k = r, Decimal(1), 0
    eps = Decimal(10) ** -85
    while abs(ts) > eps or abs(tc) > eps:
        s += ts
        c += tc
        ts = -ts * r2 / ((2 * k + 2) * (2 * k + 3))
        tc = -tc * r2 / ((2 * k + 1) * (2 * k + 2))
        k += 1
    return [(s, c), (c, -s), (-s, -c), (-c, s)][n % 4]


def f32_bits(v):
    return struct.unpack('<I', struct.pack('<f', v))[0]


def f32_value(bits):
    return struct.unpack('<f', struct.pack('<I', bits))[0]


def nearest_f32(d):
    """bits of the float nearest to the decimal d (ties to even); |d| in the normal range or 0"""
    if d == 0:
        return 0
    b = f32_bits(float(d))                          # within one float of the answer
    best = None
    for cand in (b - 1, b, b + 1):
        dist = abs(Decimal(f32_value(cand)) - d)
        if best is None or dist < best[0] or (dist == best[0] and cand % 2 == 0):
            best = (dist, cand)
    return best[1]


def main():
    n = bad = 0
    for line in sys.stdin:
        f = line.split()
        if len(f) != 7:
            continue
        base, n_rot, i, p = float.fromhex(f[0]), int(f[1]), int(f[2]), int(f[3])
        theta_t, cs_t, sn_t = float.fromhex(f[4]), int(f[5], 16), int(f[6], 16)
        e = -2.0 * i / n_rot
        theta = 1.0 if i == 0 else float((Decimal(e) * Decimal(base).ln()).exp())
        a = p * theta
        s, c = sin_cos(a)
        want = (theta, nearest_f32(c), nearest_f32(s))
        n += 1
        if want != (theta_t, cs_t, sn_t):
            bad += 1
            print(f"base {base} n_rot {n_rot} i {i} p {p}: theta {theta.hex()} cos {want[1]:08x} "
                  f"sin {want[2]:08x}, the table: theta {theta_t.hex()} cos {cs_t:08x} "
                  f"sin {sn_t:08x} (a = {a.hex()}, cos {c:.30e}, sin {s:.30e})")
    print(f"# {n} entries checked, {bad} differ")
    sys.exit(1 if bad or not n else 0)


if __name__ == "__main__":
    main()
