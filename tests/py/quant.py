#!/usr/bin/env python3
"""quant.py — the gguf-py side of tests/t1300-quant.sh (an independent oracle for lib/quant.c).

Files are raw little-endian bytes: blocks of a ggml type (*.blk) or float32 values (*.f32).

  quant.py blocks SEED DIR TYPE...        random blocks -> DIR/TYPE.blk
  quant.py floats SEED ROWS COLS OUT      seeded test matrix (gaussian-ish, outliers, edge rows)
  quant.py bits SEED N OUT                float32 bit patterns for the F16/BF16 converters
  quant.py dequant TYPE:IN:OUT...         gguf.quants.dequantize
  quant.py quant TYPE:IN:OUT...           gguf.quants.quantize
  quant.py extract MODEL DIR PREFIX       sample blocks of every tensor type with the gguf
                                          reader -> DIR/PREFIX-TYPE.blk; prints "TYPE N" lines
  quant.py compare TYPE:A:B...            float32 files equal bit for bit? Writes B.cmp: empty
                                          when equal, else the first differing element and block
  quant.py cmpbytes TYPE:A:B...           block files equal? B.cmp as above, naming the block
"""
import os
import sys

import numpy as np
from gguf import GGUFReader
from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType as QT
from gguf.quants import dequantize, quantize


def qtype(name):
    return QT[name]


def sizes(name):
    return GGML_QUANT_SIZES[qtype(name)]


# Byte offsets of the fp16 scale fields in each block (ggml layouts).
FP16_FIELDS = {
    "Q4_0": [0], "Q4_1": [0, 2], "Q5_0": [0], "Q5_1": [0, 2], "Q8_0": [0],
    "Q2_K": [80, 82], "Q3_K": [108], "Q4_K": [0, 2], "Q5_K": [0, 2], "Q6_K": [208],
}


def random_fp16(rng, n):
    """Finite fp16 scales: mostly ordinary magnitudes, with subnormals, large values and zeros."""
    kind = rng.integers(0, 100, n)
    sign = rng.integers(0, 2, n).astype(np.uint16) << 15
    man = rng.integers(0, 1024, n).astype(np.uint16)
    exp = rng.integers(1, 16, n).astype(np.uint16)           # 2^-14 .. 2^0: ordinary scales
    exp = np.where(kind >= 70, 0, exp)                        # subnormal (or zero when man == 0)
    exp = np.where(kind >= 80, rng.integers(25, 31, n), exp)  # 1024 .. 65504
    exp = np.where(kind >= 90, rng.integers(0, 31, n), exp)   # anything finite
    man = np.where(kind >= 97, 0, man)                        # exact powers of two, or zero
    exp = np.where(kind >= 99, 0, exp)
    return (sign | (exp.astype(np.uint16) << 10) | man).astype(np.uint16)


def cmd_blocks(seed, outdir, *types):
    rng = np.random.default_rng(int(seed))
    os.makedirs(outdir, exist_ok=True)
    for t in types:
        if t == "F32":
            # finite values of every exponent, and Inf/NaN patterns: the copy must keep bits
            raw = rng.integers(0, 2**32, 65536, dtype=np.uint64).astype(np.uint32)
        elif t in ("F16", "BF16"):
            # every 16-bit pattern (NaNs and Infs included), then a shuffled copy
            allp = np.arange(65536, dtype=np.uint32).astype(np.uint16)
            raw = np.concatenate([allp, rng.permutation(allp)])
        else:
            bs, ts = sizes(t)
            nblk = 4096 if bs == 32 else 1024
            raw = rng.integers(0, 256, (nblk, ts), dtype=np.uint8)
            for off in FP16_FIELDS[t]:
                raw[:, off:off + 2] = random_fp16(rng, nblk).view(np.uint8).reshape(nblk, 2)
        raw.tofile(os.path.join(outdir, t + ".blk"))


def test_matrix(seed, rows, cols):
    """Gaussian-ish rows of different scales with a few outliers, plus edge-case rows."""
    rng = np.random.default_rng(int(seed))
    x = rng.standard_normal((rows, cols)).astype(np.float32)
    x *= (0.01 * (1 + np.arange(rows) % 8)).astype(np.float32).reshape(rows, 1)
    out = rng.random((rows, cols)) < 1 / 256
    x[out] *= np.float32(12)
    if rows >= 8:
        x[0] = 0                                     # all zero
        x[1] = np.float32(0.125)                     # constant positive
        x[2] = np.float32(-3.5)                      # constant negative
        x[3] = np.abs(x[3])                          # all positive
        x[4] = -np.abs(x[4])                         # all negative
        x[5] *= np.float32(1e-6)                     # tiny: scales become fp16 subnormals
        x[6] *= np.float32(100)                      # large
        x[7, ::2] = 0                                # sparse
    return x


def cmd_floats(seed, rows, cols, out):
    test_matrix(seed, int(rows), int(cols)).tofile(out)


def cmd_bits(seed, n, out):
    """float32 patterns: random bits (every exponent), fp16 rounding edges, quiet NaNs."""
    rng = np.random.default_rng(int(seed))
    n = int(n)
    r = rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)
    # concentrate on the fp16 range: exponents 2^-26 .. 2^16
    e = rng.integers(127 - 26, 127 + 17, n).astype(np.uint32)
    near = (r & 0x807fffff) | (e << 23)
    # halfway points and their neighbours for fp16 (13 dropped bits) and bf16 (16 dropped bits)
    h16 = (near & ~np.uint32(0x1fff)) | 0x1000
    hb = (r & ~np.uint32(0xffff)) | 0x8000
    edges = np.concatenate([h16, h16 - 1, h16 + 1, hb, hb - 1, hb + 1])
    x = np.concatenate([r, near, edges])
    # Signalling NaNs are left out: numpy builds that convert with F16C would quieten them.
    # (lib/arith/blocks.h keeps their payload, as numpy's portable code does; the C self-test checks.)
    nan = (x & 0x7f800000) == 0x7f800000
    x = np.where(nan & ((x & 0x7fffff) != 0), x | 0x400000, x)
    fixed = np.array([0, 0x80000000, 0x7f800000, 0xff800000, 0x7fc00000, 0xffc00001,
                      0x477fe000, 0x477fefff, 0x477ff000, 0x477ff001, 0x7f7fffff, 0x33000000,
                      0x33000001, 0x387fe000, 0x387ff000, 0x38800000, 0x1, 0x807fffff],
                     dtype=np.uint32)
    np.concatenate([fixed, x]).astype(np.uint32).tofile(out)


def triples(args):
    for a in args:
        t, src, dst = a.split(":")
        yield t, src, dst


def cmd_dequant(*args):
    for t, src, dst in triples(args):
        raw = np.fromfile(src, dtype=np.uint8)
        bs, ts = sizes(t)
        y = dequantize(raw.reshape(-1, ts), qtype(t))
        np.ascontiguousarray(y, dtype=np.float32).tofile(dst)


def cmd_quant(*args):
    for t, src, dst in triples(args):
        x = np.fromfile(src, dtype=np.float32)
        bs, ts = sizes(t)
        with np.errstate(all="ignore"):        # F16 overflow to Inf is intended
            q = quantize(x.reshape(-1, bs), qtype(t))
        np.ascontiguousarray(q).view(np.uint8).tofile(dst)


def open_reader(path):
    """GGUFReader over the file read into a plain array instead of an np.memmap. The parsing is
    gguf-py's own; only the buffer differs. Slicing a memmap is slow enough that a 262144-token
    vocabulary (gemma3) takes ~24 s to parse instead of ~8 s."""
    class Plain:
        def __new__(cls, p, mode="r"):
            return np.fromfile(p, dtype=np.uint8)
    memmap = np.memmap
    np.memmap = Plain
    try:
        return GGUFReader(path)
    finally:
        np.memmap = memmap


def cmd_extract(model, outdir, prefix):
    """Sample every tensor evenly: at most 64K values per tensor, whole blocks, in file order."""
    r = open_reader(model)
    parts = {}
    for t in r.tensors:
        name = t.tensor_type.name
        bs, ts = GGML_QUANT_SIZES[t.tensor_type]
        raw = np.asarray(t.data).view(np.uint8).reshape(-1)
        blocks = raw.reshape(-1, ts)
        keep = max(1, 65536 // bs)
        if blocks.shape[0] > keep:
            idx = np.linspace(0, blocks.shape[0] - 1, keep).round().astype(np.int64)
            blocks = blocks[idx]
        parts.setdefault(name, []).append(np.ascontiguousarray(blocks))
    os.makedirs(outdir, exist_ok=True)
    for name, bl in sorted(parts.items()):
        data = np.concatenate([b.reshape(-1) for b in bl])
        data.tofile(os.path.join(outdir, f"{prefix}-{name}.blk"))
        print(name, data.size // GGML_QUANT_SIZES[qtype(name)][1])


def diff_f32(t, a, b):
    x = np.fromfile(a, dtype=np.uint32)
    y = np.fromfile(b, dtype=np.uint32)
    if x.size != y.size:
        return f"{t}: {a} has {x.size} values, {b} has {y.size}"
    bad = np.nonzero(x != y)[0]
    if bad.size == 0:
        return ""
    bs = sizes(t)[0]
    i = int(bad[0])
    xf, yf = x.view(np.float32), y.view(np.float32)
    return (f"{t}: {bad.size} of {x.size} values differ; first at element {i} "
            f"(block {i // bs}, index {i % bs}): {xf[i]!r} ({x[i]:08x}) vs {yf[i]!r} ({y[i]:08x})")


def diff_bytes(t, a, b):
    x = np.fromfile(a, dtype=np.uint8)
    y = np.fromfile(b, dtype=np.uint8)
    if x.size != y.size:
        return f"{t}: {a} has {x.size} bytes, {b} has {y.size}"
    bad = np.nonzero(x != y)[0]
    if bad.size == 0:
        return ""
    ts = sizes(t)[1]
    i = int(bad[0])
    blk = i // ts
    return (f"{t}: {bad.size} bytes differ; first at byte {i} (block {blk}, offset {i % ts})\n"
            f"  ours:   {x[blk * ts:(blk + 1) * ts].tobytes().hex()}\n"
            f"  theirs: {y[blk * ts:(blk + 1) * ts].tobytes().hex()}")


def compare_all(diff, args):
    for t, a, b in triples(args):
        try:
            msg = diff(t, a, b)
        except OSError as e:
            msg = str(e)
        with open(b + ".cmp", "w") as f:
            f.write(msg + "\n" if msg else "")


def cmd_compare(*args):
    compare_all(diff_f32, args)


def cmd_cmpbytes(*args):
    compare_all(diff_bytes, args)


def main(argv):
    cmds = {"blocks": cmd_blocks, "floats": cmd_floats, "bits": cmd_bits,
            "dequant": cmd_dequant, "quant": cmd_quant, "extract": cmd_extract,
            "compare": cmd_compare, "cmpbytes": cmd_cmpbytes}
    if len(argv) < 2 or argv[1] not in cmds:
        print(__doc__, file=sys.stderr)
        return 2
    return cmds[argv[1]](*argv[2:]) or 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
