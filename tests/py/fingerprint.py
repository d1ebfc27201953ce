#!/usr/bin/env python3
"""Fingerprints of result records, and the first difference between two runs.

    fingerprint.py FILE            one line per record: id, repeat, then every token as
                                   id:bits and its top alternatives as id:bits
    fingerprint.py --diff A B      exit 0 if every record of A has an identical fingerprint in
                                   B (records paired by id and repeat), else print the first
                                   differing record, token position and values, exit 1

Only the values the contract covers enter a fingerprint: token ids and the float32 bits of
every log-probability. Timings, cache counters and the like do not.
"""
import json
import sys


def load(path):
    recs = {}
    with open(path) as f:
        for line in f:
            if not line.strip():
                continue
            d = json.loads(line)
            key = (str(d["id"]), d.get("repeat", 0))
            toks = [(t["id"], t.get("bits"), tuple((x["id"], x["bits"]) for x in t.get("top", [])))
                    for t in d["tokens"]]
            recs[key] = (toks, d.get("finish_reason"))
    return recs


def line(key, val):
    toks, fin = val
    parts = ["%d:%s%s" % (i, b, "".join("|%d:%s" % x for x in top)) for i, b, top in toks]
    return "%s#%s %s %s" % (key[0], key[1], fin, " ".join(parts))


def main():
    if len(sys.argv) == 2:
        for k, v in sorted(load(sys.argv[1]).items()):
            print(line(k, v))
        return 0
    if len(sys.argv) != 4 or sys.argv[1] != "--diff":
        sys.exit(__doc__)
    a, b = load(sys.argv[2]), load(sys.argv[3])
    if set(a) != set(b):
        print("records differ: only in A %s, only in B %s"
              % (sorted(set(a) - set(b))[:5], sorted(set(b) - set(a))[:5]))
        return 1
    for k in sorted(a):
        ta, tb = a[k][0], b[k][0]
        for pos in range(max(len(ta), len(tb))):
            x = ta[pos] if pos < len(ta) else None
            y = tb[pos] if pos < len(tb) else None
            if x != y:
                print("record %s repeat %s: first difference at token %d: %s vs %s"
                      % (k[0], k[1], pos, x, y))
                return 1
        if a[k][1] != b[k][1]:
            print("record %s: finish %s vs %s" % (k[0], a[k][1], b[k][1]))
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
