#!/usr/bin/env bash
# lib/arith.h and lib/kernels/dot.h compile unchanged as C (gcc, clang, at several optimisation
# levels and ISAs) and as CUDA C++ (nvcc, host side and a device kernel), and every build
# computes the same bits: tests/portable/check.inc hashes exp, log, silu, the reductions,
# rmsnorm, log-sum-exp, RoPE, both activation quantisers, every block dot and the attention
# head over fixed pseudo-random inputs. hipcc is checked the same way where installed.
. "$(dirname "$0")/lib.sh"
P=$OB_TOP/tests/portable
CF=(-std=gnu11 -ffp-contract=off -I"$OB_TOP/lib")
plan 7
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
if command -v nvcc >/dev/null; then
    h=$(build_run nvcc nvcc -O2 -I"$OB_TOP/lib" --fmad=false --ftz=false --prec-div=true \
        --prec-sqrt=true -Xcompiler -ffp-contract=off --gpu-architecture=sm_80 "$P/check.cu")
    [ "$h" = "$ref" ]; ok $? "nvcc: device code compiles, host side computes the same bits ($h)"
else
    skip "nvcc build" "optional toolchain: no nvcc"
fi
if command -v hipcc >/dev/null; then
    cp "$P/check.cu" "$T/check.hip"
    h=$(build_run hipcc hipcc -O2 -I"$OB_TOP/lib" -I"$P" -ffp-contract=off --offload-arch=gfx1100 "$T/check.hip")
    [ "$h" = "$ref" ]; ok $? "hipcc: compiles, host side computes the same bits ($h)"
else
    skip "hipcc build" "optional toolchain: no hipcc"
fi
