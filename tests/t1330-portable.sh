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
        s=${l#*: }
        [ -n "${where[$s]+x}" ] && continue
        where[$s]="${l%%: *}${comp:+ [${comp//|/ }]}"
        sets+=("$s")
    done <<<"$lines"
done
plan $(( 5 + ${#sets[@]} + 2 ))

build_run() {   # label compiler args...
    local label=$1; shift
    if "$@" -o "$T/$label" 2>"$T/$label.err" && "$T/$label" > "$T/$label.out"; then
        cat "$T/$label.out"
    else
        echo "build-failed"; sed 's/^/# /' "$T/$label.err" | head -5 >&2
    fi
}
ref=$(build_run gcc-O2 gcc -O2 "${CF[@]}" "$P/check.c" -lm)
[ "$ref" != build-failed ]; ok $? "gcc -O2 builds and runs (hash $ref)"
for spec in "gcc-O0:gcc -O0" "gcc-avx2:gcc -O3 -mavx2 -mfma" "clang-O2:clang -O2" "clang-avx2:clang -O3 -mavx2 -mfma"; do
    label=${spec%%:*}; cc=${spec#*:}
    # shellcheck disable=SC2086
    h=$(build_run "$label" $cc "${CF[@]}" "$P/check.c" -lm)
    [ "$h" = "$ref" ]; ok $? "$label computes the same bits ($h)"
done

# two builds at a time (each set is compiled and run once; the results are read in order)
i=0
for s in "${sets[@]}"; do
    i=$((i + 1))
    [ -n "${where[$s]+x}" ] || continue
    [ "$(jobs -rp | wc -l)" -lt 2 ] || wait -n
    read -ra cmd <<<"$s"
    build_run "set$i" "${cmd[@]}" -I"$OB_TOP/lib" "$P/check.c" -lm > "$T/set$i.hash" 2> "$T/set$i.diag" &
done
wait
i=0
for s in "${sets[@]}"; do
    i=$((i + 1))
    if [ -z "${where[$s]+x}" ]; then ok 1 "$s"; continue; fi
    h=$(cat "$T/set$i.hash")
    [ "$h" = "$ref" ]; ok $? "Makefile flags of ${where[$s]} compute the same bits ($h)" ||
        { echo "# flags: $s"; cat "$T/set$i.diag"; }
done

if command -v nvcc >/dev/null; then
    h=$(build_run nvcc nvcc -O2 -I"$OB_TOP/lib" --fmad=false --ftz=false --prec-div=true \
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
    h=$(build_run hipcc hipcc -O2 -I"$OB_TOP/lib" -I"$P" -ffp-contract=off \
        --offload-arch=gfx90a --offload-arch=gfx1030 "$T/check.hip")
    [ "$h" = "$ref" ]; ok $? "hipcc: device code compiles (gfx90a, gfx1030), host side computes the same bits ($h)"
else
    skip "hipcc build" "optional toolchain: no hipcc"
fi
