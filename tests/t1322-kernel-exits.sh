#!/usr/bin/env bash
# Every function a SIMD level puts in its tables (lib/cpu/kernels/*-avx2.o, *-avx512.o and
# lib/host/*-avx2.o, *-avx512.o: the addresses ob_kernels_LEVEL*, ob_ops_LEVEL and
# ob_softmax_LEVEL take) leaves the vector upper state clean: on
# each return path the last instruction that touches a ymm/zmm register (or xmm16..31) is
# vzeroupper. The callers (the driver, the forward pass) are SSE code, which runs several times
# slower after an AVX-512 function that returns with dirty upper state, and GCC emits no
# vzeroupper by itself in a function that uses zmm16..31 (a bug found in issue 14: a matmul 4x
# slower). The bits do not change either way: this and the prefetch check below are the
# structural guards of that speed.
# Decode streams every weight once, and the few-row paths prefetch it ahead: the dot driver
# (mm_task) and every GEMV run keep their L2 prefetch instructions (a loop bounded by a pointer
# past the range's end was compiled away whole by GCC 12, and decode lost 14 %).
. "$(dirname "$0")/lib.sh"
objs=()
for o in "$OB_TOP"/lib/cpu/kernels/*-avx2.o "$OB_TOP"/lib/cpu/kernels/*-avx512.o \
         "$OB_TOP"/lib/host/*-avx2.o "$OB_TOP"/lib/host/*-avx512.o; do
    [ -f "$o" ] && objs+=("$o")
done
command -v objdump >/dev/null || { plan 1; skip "kernel exits" "no objdump"; exit 0; }
plan $(( ${#objs[@]} + 2 ))
total=0
for o in "${objs[@]}"; do
    out=$(objdump -dr --no-show-raw-insn "$o" | "$PY" -c '
import re, sys
funcs, order, cur = {}, [], None
for line in sys.stdin:
    m = re.match(r"^([0-9a-f]+) <([^>]+)>:", line)
    if m:
        cur = m.group(2); funcs[cur] = (int(m.group(1), 16), []); order.append(cur); continue
    if cur and line.strip():
        funcs[cur][1].append(line.rstrip("\n"))
start = {funcs[f][0]: f for f in funcs}
entries = set()
for f in funcs:
    if not f.startswith(("ob_kernels_", "ob_ops_", "ob_softmax_")):
        continue
    lines = funcs[f][1]
    for i, l in enumerate(lines):
        m = re.search(r"\blea\s.*\(%rip\).*#\s*[0-9a-f]+ <([^>+]+)>", l)
        if m and m.group(1) in funcs:
            entries.add(m.group(1))
            continue
        r = re.search(r"R_X86_64_(?:PC32|32S?)\s+(\S+)", l)
        if not r or "PLT" in l:
            continue
        if i and re.search(r"\bcall\b", lines[i - 1]):
            continue
        t = r.group(1)
        s = re.match(r"\.text(?:\+0x([0-9a-f]+))?(?:-0x([0-9a-f]+))?$", t)
        if s:
            off = int(s.group(1) or "0", 16) - int(s.group(2) or "0", 16)
            for a in (off, off + 4):
                if a in start:
                    entries.add(start[a])
        else:
            t = re.sub(r"-0x[0-9a-f]+$", "", t)
            if t in funcs:
                entries.add(t)
vec = re.compile(r"%(?:[yz]mm\d+|xmm(?:1[6-9]|2\d|3[01]))\b")
bad = []
for f in sorted(entries):
    lines = [l for l in funcs[f][1] if re.match(r"\s+[0-9a-f]+:", l)]
    for i, l in enumerate(lines):
        if not re.search(r"\bret\b", l):
            continue
        j = i - 1
        while j >= 0 and "vzeroupper" not in lines[j] and not vec.search(lines[j]):
            j -= 1
        touched = any(vec.search(x) for x in lines)
        if touched and (j < 0 or "vzeroupper" not in lines[j]):
            bad.append("%s (%s)" % (f, lines[j].split(":", 1)[1].strip() if j >= 0 else "?"))
            break
print(len(entries), " ".join(bad))
')
    n=${out%% *}; bad=${out#* }; [ "$bad" = "$out" ] && bad=
    total=$((total + n))
    [ -z "$bad" ]; ok $? "$(basename "$o"): $n table entries return with clean upper state${bad:+; dirty: $bad}"
done
# not vacuous: the entries were found (13 types x dot and GEMM, quantisers, ops, at two levels)
[ "$total" -ge 60 ]; ok $? "table entries found in the kernel objects: $total"
# the prefetches, into the L2 (prefetcht2, kernels.h): mm_task holds two (a task's first bytes,
# each row's), every run_v_* GEMV too, and the AVX2 panel entries' runs (run_p_*: a task's first
# bytes, the blocks ahead; AVX-512's run_p_* are GEMMs)
pf=$(for o in "$OB_TOP"/lib/cpu/kernels/matmul.o "$OB_TOP"/lib/cpu/kernels/a8-avx2.o \
              "$OB_TOP"/lib/cpu/kernels/a8-avx512.o "$OB_TOP"/lib/cpu/kernels/kq-avx2.o \
              "$OB_TOP"/lib/cpu/kernels/kq-avx512.o; do
         [ -f "$o" ] && objdump -d --no-show-raw-insn "$o" |
             awk -v o="$(basename "$o")" '/^[0-9a-f]+ <.*>:/ { f = $2 }
                 /prefetcht2/ { c[f]++ }
                 f ~ /^<(mm_task|run_v_[a-z0-9_]+)>:$/ || (o !~ /avx512/ && f ~ /^<run_p_[a-z0-9_]+>:$/) { seen[f] = 1 }
                 END { for (k in seen) printf "%s%s=%d ", o, k, c[k] }'
     done)
n=$(grep -o '=[0-9]*' <<<"$pf" | wc -l); short=$(grep -oE '[^ ]*=[01]( |$)' <<<"$pf" | tr -d '\n')
# (the dot driver, 4 nibble-format GEMVs and 5 K-quant GEMVs at each of the two levels, the
# five AVX2 panel runs)
[ "$n" -ge 24 ] && [ -z "$short" ]; ok $? "weight prefetch (L2) compiled into the dot driver and $((n - 1)) GEMV and panel runs${short:+; without: $short}"
