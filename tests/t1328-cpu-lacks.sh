#!/usr/bin/env bash
# The skips of a SIMD level this CPU lacks, proven on any CPU: OB_CPU_LACKS=avx512 (or avx2)
# makes lib/host/simd.c, and through bin/unit/cpu-has tests/lib.sh's isa_lacks, answer as a CPU
# without that level would, so a machine with AVX-512 also takes the AVX2-only path.
# bin/unit/cpu-has agrees with the kernel's reading of CPUID (/proc/cpuinfo); under the override
# the cpu route runs the best level left, OB_SIMD above it is refused (exit 4), and an override
# that names no level is a usage error (exit 2); isa_lacks names, for every flag set the
# Makefile compiles with, the lowest level the flags need and the CPU (as overridden) lacks.
# Then the suite's ISA checks under OB_CPU_LACKS=avx512 and OB_REQUIRE_ALL=1: the kernels unit,
# t1325, t1345, t1327 and t1330 on the SIMD kernels' flag sets (compiled, their runs skipped)
# report "cpu lacks avx512" skips and no failure; under OB_CPU_LACKS=avx2 the policy fails the
# avx2 skip (t1345).
. "$(dirname "$0")/lib.sh"
unset OB_CPU_LACKS OB_SIMD          # this test sets them itself
plan 11
levels=(scalar avx2 avx512)
idx() { local i; for i in "${!levels[@]}"; do [ "${levels[$i]}" = "$1" ] && echo "$i" && return; done; echo 9; }
best=$("$UNIT/kernels" --best-isa 2>&1) || best="kernels --best-isa failed: $best"
b=$(idx "$best")
# the best level left under OB_CPU_LACKS=LEVEL
cap() { local l; l=$(idx "$1"); l=$((l - 1)); [ "$b" -lt "$l" ] && l=$b; echo "${levels[$l]}"; }

# bin/unit/cpu-has against /proc/cpuinfo, for each extension of lib/host/simd.c's table
# (cpu-has name:cpuinfo flag)
exts=(avx:avx fma:fma f16c:f16c avx2:avx2 bmi:bmi1 bmi2:bmi2 avx512f:avx512f avx512dq:avx512dq
      avx512bw:avx512bw avx512vl:avx512vl avx512vnni:avx512_vnni)
if flags=" $(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null | cut -d: -f2) " && [ "$flags" != "  " ]; then
    bad="" have=""
    for e in "${exts[@]}"; do
        "$UNIT/cpu-has" "${e%%:*}" > /dev/null 2>&1; rc=$?
        [[ $flags == *" ${e#*:} "* ]]; want=$?
        [ $rc -eq $want ] || bad="$bad ${e%%:*} (cpu-has exit $rc)"
        [ $rc -eq 0 ] && have="$have ${e%%:*}"
    done
    [ -z "$bad" ]; ok $? "cpu-has agrees with /proc/cpuinfo on ${#exts[@]} extensions (here:${have:- none})${bad:+; differ:$bad}"
else
    skip "cpu-has agrees with /proc/cpuinfo" "no /proc/cpuinfo flags"
fi

# the cpu route under the override (1b-load -d cpu names the level it runs)
got=""
for o in avx512 avx2; do
    got="$got $(OB_CPU_LACKS=$o 1b-load -d cpu 2>&1 | jq -r .device 2>&1)"
done
[ "$got" = " $(cap avx512) $(cap avx2)" ]
ok $? "OB_CPU_LACKS=avx512, avx2: the cpu route runs$got (best here: $best)"
out=$(echo '{"id":"a","prompt":"Once","max_tokens":2}' |
      OB_CPU_LACKS=avx512 OB_SIMD=avx512 1b-gen -m "$SHARED/models/stories260K.gguf" 2>&1); rc=$?
[ $rc -eq 4 ] && [ "$out" = "1b-gen: OB_SIMD=avx512, but this CPU supports only $(cap avx512) (OB_CPU_LACKS=avx512)" ]
ok $? "OB_CPU_LACKS=avx512 OB_SIMD=avx512: refused as on a CPU without it (exit $rc: $out)"
out=$(echo '{"id":"a","prompt":"Once","max_tokens":2}' |
      OB_CPU_LACKS=scalar 1b-gen -m "$SHARED/models/stories260K.gguf" 2>&1); rc=$?
[ $rc -eq 2 ] && [ "$out" = "1b-gen: OB_CPU_LACKS=scalar: expected avx2 or avx512" ]
ok $? "OB_CPU_LACKS=scalar: a usage error (exit $rc: $out)"

# isa_lacks on the Makefile's own flag sets (make print-cflags), without and with the override:
# the level of the object (NAME-LEVEL.o) when the CPU as overridden lacks it, else nothing
declare -A seen=()
bad="" n=0
lines=$(env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -s -C "$OB_TOP" print-cflags 2>&1) || bad=" make print-cflags: $lines"
while IFS= read -r l; do
    s=${l#*: }
    { [ -z "$s" ] || [ -n "${seen[$s]+x}" ]; } && continue
    seen[$s]=1
    case ${l%%: *} in *-avx512.o) need=2 ;; *-avx2.o) need=1 ;; *) need=0 ;; esac
    read -ra cmd <<<"$s"
    for o in "" avx512 avx2; do
        c=$b; [ -n "$o" ] && c=$(idx "$(cap "$o")")
        want=""; [ "$need" -gt "$c" ] && want=${levels[$((c + 1))]}
        got=$(OB_CPU_LACKS=$o isa_lacks "${cmd[@]}" 2>&1) || got="? $got"
        n=$((n + 1))
        [ "${got%% *}" = "$want" ] || bad="$bad [${l%%: *} OB_CPU_LACKS=$o: '$got', want '$want']"
    done
done <<<"$lines"
[ -z "$bad" ] && [ "$n" -ge 18 ]; ok $? "isa_lacks on the Makefile's flag sets: $n answers as wanted${bad:+;$bad}"

# the suite's ISA checks under the override
k=$(OB_CPU_LACKS=avx512 "$UNIT/kernels" 2>&1); rc=$?
sk=$(grep -E '^ok [0-9]+ - .*# SKIP' <<<"$k")
# the avx512 table's own kernels (its entries are set only where the CPU runs it), then a line
# for each level left out
want=" cpu lacks avx512"; for ((l = $(idx "$(cap avx512)") + 1; l < 3; l++)); do want="$want cpu lacks ${levels[$l]}"; done
got=$(sed 's/.*# SKIP / /' <<<"$sk" | tr -d '\n')
[ $rc -eq 0 ] && ! grep -q '^not ok' <<<"$k" && [ "$got" = "$want" ]
ok $? "OB_CPU_LACKS=avx512 bin/unit/kernels: exit $rc, every check passed but the skips:$got (want:$want)" ||
    grep '^not ok' <<<"$k" | head -5 | sed 's/^/# /'
# tests/run ENV... -- TEST: its summary line, and the skips' reasons (one per line) in $T/skips;
# under the default policy (avx512 optional), as on the CPU the override stands for
run_test() {
    local envs=() out
    while [ "$1" != -- ]; do envs+=("$1"); shift; done
    out=$(env OB_ISA_OPTIONAL=avx512 "${envs[@]}" OB_VERBOSE=1 "$OB_TOP/tests/run" "$OB_TOP/tests/$2" 2>&1)
    grep -oE '# SKIP .*' <<<"$out" | sed 's/^# SKIP //' > "$T/skips"
    tail -1 <<<"$out"
}
# TEST:N, N the skips it must report: the units' avx512 rows (bench/kernels runs the levels left)
for t in t1325-ops.sh:1 t1345-q4nx.sh:1 t1327-bench-kernels.sh:0; do
    s=$(run_test OB_CPU_LACKS=avx512 OB_REQUIRE_ALL=1 -- "${t%:*}")
    others=$(grep -v '^cpu lacks avx512' "$T/skips")
    [[ $s == *" passed, 0 failed, ${t#*:} skipped" ]] && [ -z "$others" ]
    ok $? "OB_CPU_LACKS=avx512 OB_REQUIRE_ALL=1 ${t%:*}: $s, $(grep -c . "$T/skips") cpu lacks avx512 (want ${t#*:})${others:+; other skips: $others}"
done
s=$(run_test OB_CPU_LACKS=avx512 OB_REQUIRE_ALL=1 OB_PORTABLE_ONLY='^lib/cpu/kernels/a8-avx(2|512)\.o$' -- t1330-portable.sh)
others=$(grep -v '^cpu lacks avx512' "$T/skips")
[[ $s == *" passed, 0 failed, "* ]] && [ -z "$others" ] && [ "$(grep -c . "$T/skips")" -eq 1 ]
ok $? "OB_CPU_LACKS=avx512 OB_REQUIRE_ALL=1 t1330 on the SIMD kernels' flags: $s (the avx512 set compiled, its run skipped)${others:+; other skips: $others}"
# the policy on the same skips: a missing avx2 fails under OB_REQUIRE_ALL=1, a missing avx512 not
s=$(run_test OB_CPU_LACKS=avx2 OB_REQUIRE_ALL=1 -- t1345-q4nx.sh)
[[ $s == *" passed, 1 failed, 1 skipped" ]] && [ "$(tr '\n' ' ' < "$T/skips")" = "cpu lacks avx2 cpu lacks avx512 " ]
ok $? "OB_CPU_LACKS=avx2 OB_REQUIRE_ALL=1 t1345: its avx2 skip fails, its avx512 skip stays one ($s)"
