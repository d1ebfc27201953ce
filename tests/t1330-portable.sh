#!/usr/bin/env bash
# The headers of lib/arith/ compile unchanged as C (gcc, clang, at several optimisation levels
# and ISAs) and as CUDA C++ (nvcc for sm_80 and sm_90, host side and a device kernel that calls
# every function, warnings as errors), and every build computes the same bits:
# tests/portable/check.inc hashes every OB_INLINE function of the folder (t1335 checks that it
# names them all) over fixed pseudo-random inputs: exp, log, silu, gelu, the reductions, rmsnorm whole
# and in pieces, the elementwise add, log-sum-exp, RoPE, the fp16/bf16 conversions, the scale
# helpers, every per-block dequantiser, both activation quantisers, every block dot and the
# attention head. hipcc is checked the same way where installed.
#
# Besides a few hand-picked builds, the check is compiled with every distinct set of flags the
# Makefile compiles an object with (make print-cflags: library, SIMD kernel, sanitizer and fuzz
# objects), for the default CFLAGS and for a user's CFLAGS='-O2 -march=native' under $(CC) and
# clang: a compiler that miscompiles the reference under any of them (GCC 12 under VNNI, without
# the Makefile's guard) fails here, on the machine that has it.
#
# A build this CPU cannot execute (the AVX-512 kernels' flags on a CPU without AVX-512, or any
# with OB_CPU_LACKS=avx512) is still compiled, and that compile is a check of its own; its run
# is a skip, "cpu lacks LEVEL". Which builds those are is asked of the CPU (isa_lacks in lib.sh:
# the extensions the flags enable, against CPUID), never read from an exit status: a build that
# fails, and a run that dies on a CPU that has the ISA, are failures.
#
# OB_PORTABLE_ONLY=ERE checks only the Makefile's sets whose "OBJECT [composition]" matches, and
# none of the hand-picked or GPU builds (t1328 runs the SIMD kernels' sets so under OB_CPU_LACKS,
# t1329 under OB_CPU_EMU: the builds run, and CPUID is asked, on an emulated CPU).
# tests/run: long (minutes: started first)
. "$(dirname "$0")/lib.sh"
P=$OB_TOP/tests/portable
CF=(-std=gnu11 -ffp-contract=off -I"$OB_TOP/lib")

# "COMPILER FLAGS" -> "OBJECT [composition]" for each distinct set, in first-seen order
declare -A where=()
sets=()
for comp in "" "CFLAGS=-O2 -march=native" "CC=clang|CFLAGS=-O2 -march=native"; do
    IFS='|' read -ra vars <<<"$comp"
    # a make of its own (not a sub-make of make check's jobserver)
    lines=$(env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -s -C "$OB_TOP" print-cflags "${vars[@]}" 2>"$T/make.err") ||
        { sets+=("make print-cflags $comp failed: $(head -c 300 "$T/make.err")"); continue; }
    while IFS= read -r l; do
        s=${l#*: } w="${l%%: *}${comp:+ [${comp//|/ }]}"
        [ -n "${where[$s]+x}" ] && continue
        [ -z "${OB_PORTABLE_ONLY:-}" ] || [[ $w =~ $OB_PORTABLE_ONLY ]] || continue
        where[$s]=$w
        sets+=("$s")
    done <<<"$lines"
done

# the hand-picked builds: "LABEL:COMPILER FLAGS" (and CF)
picked=("gcc-O0:gcc -O0" "gcc-avx2:gcc -O3 -mavx2 -mfma" "clang-O2:clang -O2" "clang-avx2:clang -O3 -mavx2 -mfma")
gpu=2   # the nvcc and hipcc lines
[ -z "${OB_PORTABLE_ONLY:-}" ] || { picked=(); gpu=0; }
# what this CPU lacks to run each build (isa_lacks): "" when it runs it, "LEVEL (extension)",
# or "?" when that cannot be told (then why, in why_unknown)
declare -A lacks=() why_unknown=()
lacks_of() {    # KEY COMPILER FLAGS...
    local k=$1; shift
    lacks[$k]=$(isa_lacks "$@" 2>"$T/isa.err") || { lacks[$k]="?"; why_unknown[$k]=$(head -3 "$T/isa.err"); }
}
for spec in "${picked[@]}"; do
    read -ra cmd <<<"${spec#*:}"
    lacks_of "${spec%%:*}" "${cmd[@]}" "${CF[@]}"
done
for s in "${sets[@]}"; do
    [ -n "${where[$s]+x}" ] || continue
    read -ra cmd <<<"$s"
    lacks_of "$s" "${cmd[@]}" -I"$OB_TOP/lib"
done
# a build this CPU cannot run has two lines: its compile and its skipped run
nlack=0
for k in "${!lacks[@]}"; do [ -n "${lacks[$k]}" ] && [ "${lacks[$k]}" != "?" ] && nlack=$((nlack + 1)); done
plan $(( 1 + ${#picked[@]} + ${#sets[@]} + nlack + gpu ))

# build_run LABEL KEY COMPILER ARGS...: compile the check (ARGS hold its source and -lm), and run
# it unless lacks[KEY] says this CPU cannot; prints the hash, "built" (not run), "build-failed"
# or "run-failed (exit N)", with diagnostics on stderr
build_run() {
    local label=$1 key=$2 rc; shift 2
    if ! "$@" -o "$T/$label" 2>"$T/$label.err"; then
        echo "build-failed"; sed 's/^/# /' "$T/$label.err" | head -5 >&2; return
    fi
    if [ -n "${lacks[$key]:-}" ]; then echo "built"; return; fi
    # shellcheck disable=SC2086  # OB_CPU_EMU (lib.sh): a command and its arguments
    ${OB_CPU_EMU:-} "$T/$label" > "$T/$label.out" 2>"$T/$label.err"; rc=$?
    if [ $rc -eq 0 ]; then cat "$T/$label.out"; else
        echo "run-failed (exit $rc)"; sed 's/^/# /' "$T/$label.err" | head -5 >&2
    fi
}
# report WHAT KEY RESULT: one build's lines: the reference's hash, or, where this CPU lacks what
# the flags need, the compile and a skip of the run; the flags when a line fails
report() {
    local what=$1 k=$2 h=$3 l=${lacks[$2]}
    if [ "$l" = "?" ]; then
        ok 1 "$what: cannot tell whether this CPU runs these flags"; printf '# %s\n' "${why_unknown[$k]}"; false
    elif [ -n "$l" ]; then
        [ "$h" = built ]; ok $? "$what: compiles (not run here)"; local rc=$?
        skip "$what: the same bits as gcc -O2" "cpu lacks $l"
        [ $rc -eq 0 ]
    else
        [ "$h" = "$ref" ]; ok $? "$what: the same bits as gcc -O2 ($h)"
    fi || { [ -n "${where[$k]+x}" ] && echo "# flags: $k"; return 1; }
}

ref=$(build_run gcc-O2 - gcc -O2 "${CF[@]}" "$P/check.c" -lm)
[[ $ref =~ ^[0-9a-f]{16}$ ]]; ok $? "gcc -O2 builds and runs (hash $ref)"
for spec in "${picked[@]}"; do
    label=${spec%%:*}; cc=${spec#*:}
    # shellcheck disable=SC2086  # cc is a compiler and its flags, a word each
    h=$(build_run "$label" "$label" $cc "${CF[@]}" "$P/check.c" -lm)
    report "$label" "$label" "$h"
done

# two builds at a time (each set is compiled, and run where it can, once; the results are read
# in order)
i=0
for s in "${sets[@]}"; do
    i=$((i + 1))
    [ -n "${where[$s]+x}" ] || continue
    [ "$(jobs -rp | wc -l)" -lt 2 ] || wait -n
    read -ra cmd <<<"$s"
    build_run "set$i" "$s" "${cmd[@]}" -I"$OB_TOP/lib" "$P/check.c" -lm > "$T/set$i.hash" 2> "$T/set$i.diag" &
done
wait
i=0
for s in "${sets[@]}"; do
    i=$((i + 1))
    if [ -z "${where[$s]+x}" ]; then ok 1 "$s"; continue; fi
    report "Makefile flags of ${where[$s]}" "$s" "$(cat "$T/set$i.hash")"
    cat "$T/set$i.diag"
done

[ "$gpu" -gt 0 ] || exit 0
if command -v nvcc >/dev/null; then
    h=$(build_run nvcc - nvcc -O2 -I"$OB_TOP/lib" --fmad=false --ftz=false --prec-div=true \
        --prec-sqrt=true -Xcompiler -ffp-contract=off --Werror all-warnings \
        -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90 "$P/check.cu")
    [ "$h" = "$ref" ]; ok $? "nvcc: device code compiles (sm_80, sm_90), host side computes the same bits ($h)"
else
    skip "nvcc build" "optional toolchain: no nvcc"
fi
# Debian 12's hipcc (ROCm 5.2) ships device libraries for gfx803..gfx940, gfx90a and
# gfx1010..gfx1036 (not gfx1100): one CDNA and one RDNA target, the device code compiled for both
if command -v hipcc >/dev/null; then
    cp "$P/check.cu" "$T/check.hip"
    h=$(build_run hipcc - hipcc -O2 -I"$OB_TOP/lib" -I"$P" -ffp-contract=off \
        --offload-arch=gfx90a --offload-arch=gfx1030 "$T/check.hip")
    [ "$h" = "$ref" ]; ok $? "hipcc: device code compiles (gfx90a, gfx1030), host side computes the same bits ($h)"
else
    skip "hipcc build" "optional toolchain: no hipcc"
fi
