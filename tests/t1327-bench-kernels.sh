#!/usr/bin/env bash
# bench/kernels runs (not a timing: the smallest case once): the layouts side by side at every
# level this CPU runs, a level's panels named "/p8" and reported as such in the JSON, a shape
# panels cannot hold skipped for them; a bad --layout is a usage error (exit 2).
. "$(dirname "$0")/lib.sh"
cd "$T" || exit 1
K=$BIN/bench/kernels
plan 4
isas=$("$UNIT/kernels" --best-isa)
case $isas in avx512) isas=scalar,avx2,avx512 ;; avx2) isas=scalar,avx2 ;; *) isas=scalar ;; esac
# shellcheck disable=SC2054  # the commas separate the values within one option
args=(--types q4_k,q5_0 --shapes 256x16,256x12 --threads 1 --widths 1,4 --reps 1 --time 0
      --max-time 0 --rotate 1 --stream-mb 1 --isa "$isas")
"$K" "${args[@]}" --layout rows,panels --json > out.jsonl 2> err.txt; rc=$?
n=$("$PY" -c '
import json, sys
recs = [json.loads(l) for l in open("out.jsonl")]
cases = [r for r in recs if r.get("bench") == "kernels"]
pan = {(r["type"], r["isa"], r["k"], r["n"], r["width"]) for r in cases if r["layout"] == "panels"}
rows = {(r["type"], r["isa"], r["k"], r["n"], r["width"]) for r in cases if r["layout"] == "rows"}
isas = sys.argv[1].split(",")
want_rows = {(t, i, 256, n, w) for t in ("Q4_K", "Q5_0") for i in isas for n in (16, 12) for w in (1, 4)}
want_pan = {(t, i, 256, 16, w) for t in ("Q4_K", "Q5_0") for i in isas for w in (1, 4)}
ok = rows == want_rows and pan == want_pan and all(r["id"].split("/")[3] == "p8" for r in cases if r["layout"] == "panels")
print(len(cases) if ok else -1)' "$isas")
[ $rc -eq 0 ] && [ "$n" -gt 0 ]; ok $? "kernels --layout rows,panels at $isas: $n cases, panels at N = 16 only"
grep -q "256x12 skipped for .*/p8: not a matrix panels hold" err.txt; ok $? "a shape panels cannot hold is skipped for them"
"$K" "${args[@]}" > table.txt 2> err.txt; rc=$?
[ $rc -eq 0 ] && grep -qE '^Q4_K +(scalar|avx2|avx512)(/p8)? +1 +256 +16 +1 ' table.txt; ok $? "the default layout (the route's): a table"
"$K" --layout bogus > out.txt 2> err.txt; rc=$?
[ $rc -eq 2 ] && [ ! -s out.txt ] && grep -q "layout: 'bogus': expected route, rows or panels" err.txt
ok $? "--layout bogus: exit 2 ($(head -1 err.txt))"
