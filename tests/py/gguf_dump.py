#!/usr/bin/env python3
"""Canonical exact dump of a GGUF file made with the independent `gguf` package.

Same format as tests/unit/gguf-dump.c, so that the two dumps of one file must be equal byte for
byte. Also writes a file exercising every metadata type with gguf's own writer:

    gguf_dump.py FILE            print the dump
    gguf_dump.py --write-all F   write F with gguf.GGUFWriter
"""
import hashlib
import json
import struct
import sys

import numpy as np
import gguf
from gguf import GGUFValueType as VT

NAMES = {VT.UINT8: "u8", VT.INT8: "i8", VT.UINT16: "u16", VT.INT16: "i16", VT.UINT32: "u32",
         VT.INT32: "i32", VT.FLOAT32: "f32", VT.BOOL: "bool", VT.STRING: "string",
         VT.ARRAY: "array", VT.UINT64: "u64", VT.INT64: "i64", VT.FLOAT64: "f64"}


def scalar(t, raw):
    """raw: a numpy scalar array slice of the right dtype"""
    if t == VT.FLOAT32:
        return struct.pack("<f", float(raw[0])).hex()
    if t == VT.FLOAT64:
        return struct.pack("<d", float(raw[0])).hex()
    if t == VT.BOOL:
        return bool(raw[0])
    return int(raw[0])


def decode(parts, i, t):
    """Decode one value of type t from a ReaderField's parts starting at index i, the way the
    file stores it (the reader's own .data flattens nested arrays). Returns (value, next i)."""
    if t == VT.STRING:
        return bytes(parts[i + 1]).hex(), i + 2          # length, bytes
    if t != VT.ARRAY:
        return scalar(t, parts[i]), i + 1
    et, n = VT(int(parts[i][0])), int(parts[i + 1][0])
    i += 2
    vals = []
    for _ in range(n):
        v, i = decode(parts, i, et)
        vals.append(v)
    return [NAMES[et], vals], i


def dump(path):
    r = gguf.GGUFReader(path)
    kv = []
    for name, f in r.fields.items():
        if name.startswith("GGUF."):
            continue
        # parts: key length, key bytes, value type, then the value's own parts
        v, _ = decode(f.parts, 3, f.types[0])
        kv.append([name, NAMES[f.types[0]], v])
    tensors = []
    for t in r.tensors:
        data = np.ascontiguousarray(t.data).tobytes()
        ne = [int(x) for x in t.field.parts[3]]
        tensors.append([t.name, t.tensor_type.name, ne, int(t.data_offset - r.data_offset),
                        hashlib.sha256(data).hexdigest()])
    version = int(r.fields["GGUF.version"].parts[-1][0])
    align = r.alignment
    out = {"version": version, "alignment": int(align), "kv": kv, "tensors": tensors}
    print(json.dumps(out, separators=(",", ":"), ensure_ascii=False))


def write_all(path):
    w = gguf.GGUFWriter(path, "qwen3")
    w.add_custom_alignment(64)
    w.add_uint8("t.u8", 200)
    w.add_int8("t.i8", -100)
    w.add_uint16("t.u16", 60000)
    w.add_int16("t.i16", -30000)
    w.add_uint32("t.u32", 4000000000)
    w.add_int32("t.i32", -2000000000)
    w.add_float32("t.f32", 0.1)
    w.add_bool("t.bool", True)
    w.add_string("t.str", "h\u00e9llo \u2581 \U0001F600")
    w.add_string("t.empty", "")
    w.add_uint64("t.u64", 18000000000000000000)
    w.add_int64("t.i64", -9000000000000000000)
    w.add_float64("t.f64", -1e-300)
    w.add_array("t.arr_i32", [-1, 0, 1, 2147483647, -2147483648])
    w.add_array("t.arr_f32", [1.5, -0.0, 3.0e38])
    w.add_array("t.arr_str", ["a", "", "\u4e2d\u6587"])
    w.add_tensor("a.f32", np.arange(15, dtype=np.float32).reshape(3, 5) - 7.25)
    w.add_tensor("b.f16", (np.arange(64, dtype=np.float16) / 8).reshape(4, 4, 4))
    q8 = np.frombuffer(bytes((i * 7) & 255 for i in range(68)), dtype=np.uint8)
    w.add_tensor("c.q8_0", q8, raw_dtype=gguf.GGMLQuantizationType.Q8_0)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--write-all":
        write_all(sys.argv[2])
    elif len(sys.argv) == 2:
        dump(sys.argv[1])
    else:
        sys.exit("usage: gguf_dump.py FILE | --write-all FILE")
