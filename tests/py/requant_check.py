#!/usr/bin/env python3
"""requant_check.py — an independent check of 1b-requant's output and report (tests/t1060).

  requant_check.py IN OUT REPORT.jsonl

IN is the input GGUF, OUT the output GGUF or Q4NX pack directory, REPORT 1b-requant's stdout.
With the gguf package's reader and dequantisers (and a numpy decoder of the Q4NX tile written
from man/1b.7, for packs) it checks, tensor by tensor:
  - the output holds the tensor with the type the report names, its shape, and (pack) inside
    the file at the offset the manifest gives;
  - rmse, max_abs and rms recomputed in float64 from the two files' values equal the report's;
  - a tensor reported as copied has the input's bytes; where gguf-py has a quantiser (F16,
    BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1) the output's bytes are gguf-py's quantisation of the
    input's values;
  - the summary record counts the tensors and parameters.
Prints one line per problem and exits 1 if there is any; prints "ok N tensors" otherwise.
"""
import json
import os
import sys

import numpy as np
from gguf import GGUFReader
from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType as QT
from gguf.quants import dequantize, quantize

PYQ = {"F16", "BF16", "Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1"}


def values(t):
    """a tensor's values as float32, rows of ne[0]"""
    raw = np.asarray(t.data)
    if t.tensor_type == QT.F32:
        return raw.astype(np.float32).reshape(-1)
    return dequantize(raw.view(np.uint8).reshape(-1), t.tensor_type).reshape(-1).astype(np.float32)


def raw_bytes(t):
    return np.asarray(t.data).view(np.uint8).reshape(-1)


def bf16(u16):
    return (u16.astype(np.uint32) << 16).view(np.float32)


def q4nx_values(buf, k, n):
    """man/1b.7: tiles of 20 bytes, bf16 step s, bf16 zero z, 16 bytes of nibbles; value j < 16
    the low nibble of byte j, j >= 16 the high nibble of byte j - 16; x = s * q + z, the product
    exact and the sum rounded once in float32."""
    t = np.frombuffer(buf, dtype=np.uint8).reshape(-1, 20)
    s = bf16(t[:, 0:2].copy().view(np.uint16).reshape(-1))
    z = bf16(t[:, 2:4].copy().view(np.uint16).reshape(-1))
    qs = t[:, 4:20]
    q = np.concatenate([qs & 15, qs >> 4], axis=1).astype(np.float32)
    x = (s[:, None] * q).astype(np.float32) + z[:, None]
    return x.astype(np.float32).reshape(-1)


def main(inp, out, report):
    recs = [json.loads(l) for l in open(report) if l.strip()]
    summ = [r for r in recs if r.get("summary")]
    recs = [r for r in recs if not r.get("summary")]
    bad = []
    rin = GGUFReader(inp)
    tin = {t.name: t for t in rin.tensors}
    pack = os.path.isdir(out)
    if pack:
        man = json.load(open(os.path.join(out, "manifest.json")))
        tiles = {t["name"]: t for t in man["tensors"]}
        rout = GGUFReader(os.path.join(out, man["meta"]))
        files = {f: np.fromfile(os.path.join(out, f), dtype=np.uint8) for f in man["files"]}
    else:
        rout = GGUFReader(out)
    tout = {t.name: t for t in rout.tensors}
    if [r["tensor"] for r in recs] != [t.name for t in rin.tensors]:
        bad.append("the report does not list the input's tensors in order")
    n_par = 0
    for r in recs:
        name, a = r["tensor"], tin.get(r["tensor"])
        if a is None:
            bad.append(f"{name}: not in the input")
            continue
        if r["from"] != a.tensor_type.name:
            bad.append(f"{name}: report says from {r['from']}, input has {a.tensor_type.name}")
        x = values(a).astype(np.float64)
        n_par += x.size
        k = int(a.shape[0])
        if r["to"] == "Q4NX":
            t = tiles.get(name)
            if t is None:
                bad.append(f"{name}: not among the pack's tiles")
                continue
            if t["shape"] != [k, x.size // k]:
                bad.append(f"{name}: shape {t['shape']} in the manifest")
            buf = files[t["file"]][t["offset"]:t["offset"] + t["bytes"]]
            if t["offset"] % 4096 or buf.size != x.size // 32 * 20:
                bad.append(f"{name}: offset {t['offset']} / {buf.size} bytes")
                continue
            y = q4nx_values(buf.tobytes(), k, x.size // k).astype(np.float64)
        else:
            b = tout.get(name)
            if b is None:
                bad.append(f"{name}: not in the output")
                continue
            if b.tensor_type.name != r["to"]:
                bad.append(f"{name}: report says to {r['to']}, output has {b.tensor_type.name}")
            y = values(b).astype(np.float64)
            if r["copied"] and not np.array_equal(raw_bytes(a), raw_bytes(b)):
                bad.append(f"{name}: reported copied, bytes differ")
            if not r["copied"] and r["to"] in PYQ:
                bs, ts = GGML_QUANT_SIZES[QT[r["to"]]]
                with np.errstate(all="ignore"):
                    want = np.asarray(quantize(values(a).reshape(-1, k), QT[r["to"]]))
                if not np.array_equal(want.view(np.uint8).reshape(-1), raw_bytes(b)):
                    bad.append(f"{name}: {r['to']} bytes differ from gguf-py's quantiser")
        d = y - x
        rmse, rms, mx = (float(np.sqrt(np.mean(d * d))), float(np.sqrt(np.mean(x * x))),
                         float(np.max(np.abs(d))))
        for key, want in (("rmse", rmse), ("rms", rms), ("max_abs", mx)):
            got = float(r[key])
            if abs(got - want) > 1e-9 * max(abs(want), 1e-30):
                bad.append(f"{name}: {key} {got!r} reported, {want!r} recomputed")
    if len(summ) != 1 or summ[0]["tensors"] != len(recs) or summ[0]["params"] != n_par:
        bad.append(f"summary record: {summ}")
    for b in bad[:20]:
        print(b)
    if not bad:
        print(f"ok {len(recs)} tensors")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
