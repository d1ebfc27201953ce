#!/usr/bin/env bash
# The canonical arithmetic, lib/arith/, is one self-contained folder that every compiler of the
# project builds (lib/README):
#  - its headers include nothing but C standard headers usable in GPU device code and each other
#    (a grep over every #include line against that list);
#  - each header compiles on its own, with no include path, as strict C11 (gcc, clang, -Werror)
#    and as CUDA C++ for sm_80 and sm_90 (nvcc, --Werror all-warnings: nvcc only warns when a
#    __host__ __device__ function calls a host-only function);
#  - tests/portable/check.inc names every OB_INLINE function of the folder (so the hash that
#    tests/t1330-portable.sh compares across gcc, clang, nvcc and hipcc covers it) and includes
#    every header, and check.cu's device kernel calls every function (so nvcc generates device
#    code for it: an unused inline function is never checked for device use);
#  - compiled, the arithmetic calls nothing from libm but fmaf and sqrtf (correctly rounded, so
#    the same everywhere) at -O0 and -O2.
. "$(dirname "$0")/lib.sh"
A=$OB_TOP/lib/arith
P=$OB_TOP/tests/portable
plan 8

# the C standard headers the folder may use: those nvcc and hipcc accept in device code
allowed='<stddef.h> <stdint.h> <stdbool.h> <string.h> <math.h> <float.h> <limits.h>'
headers=("$A"/*.h)

bad=""
for h in "${headers[@]}"; do
    while IFS= read -r l; do
        inc=$(sed -nE 's/^[0-9]+:[[:space:]]*#[[:space:]]*include[[:space:]]*([<"][^>"]*[>"]).*/\1/p' <<<"$l")
        case $inc in
        \<*\>) [[ " $allowed " == *" $inc "* ]] && continue ;;
        \"*\")
            f=${inc#\"}; f=${f%\"}
            [[ $f != */* && $f != "$(basename "$h")" && -f $A/$f ]] && continue ;;
        esac
        bad+="${h#"$OB_TOP"/}:$l; "
    done < <(grep -nE '^[[:space:]]*(#|%:)[[:space:]]*include' "$h")
done
[ -z "$bad" ]
ok $? "lib/arith/ (${#headers[@]} headers) includes only $allowed and its own files${bad:+: $bad}"

# each header alone, no include path: a sibling resolves next to the header, nothing else does
cd "$T" || exit 1
n=0
for h in "${headers[@]}"; do
    n=$((n + 1))
    # twice: the include guard; a declaration: ISO C wants a non-empty translation unit
    printf '#include "%s"\n#include "%s"\ntypedef int tu_not_empty;\n' "$h" "$h" > "h$n.c"
    cp "h$n.c" "h$n.cu"
done
for cc in gcc clang; do
    if ! command -v $cc >/dev/null; then
        skip "$cc: every header alone" "optional toolchain: no $cc"
        continue
    fi
    err=""
    for i in $(seq $n); do
        $cc -std=c11 -pedantic -Wall -Wextra -Werror -fsyntax-only "h$i.c" 2> "h$i.$cc.err" ||
            err+="$(basename "${headers[$((i - 1))]}") "
    done
    [ -z "$err" ]
    ok $? "$cc -std=c11 -pedantic -Werror: every header compiles alone${err:+ (fails: $err)}" ||
        for i in $(seq $n); do head -3 "h$i.$cc.err"; done | sed 's/^/# /'
done
if command -v nvcc >/dev/null; then
    nvcc -c --Werror all-warnings -gencode arch=compute_80,code=sm_80 \
        -gencode arch=compute_90,code=sm_90 h*.cu > nvcc.err 2>&1
    ok $? "nvcc (sm_80, sm_90, warnings as errors): every header compiles alone as CUDA C++" ||
        head -10 nvcc.err | sed 's/^/# /'
else
    skip "nvcc: every header alone" "optional toolchain: no nvcc"
fi

# every OB_INLINE function (macro-generated ones included: read from the preprocessed headers)
for h in "${headers[@]}"; do printf '#include "%s"\n' "$h"; done > all.c
fns=$(cc -std=c11 -E all.c | sed -nE 's/.*static inline [^(]*[^a-z0-9_](ob_[a-z0-9_]+) *\(.*/\1/p' | sort -u)
nf=$(wc -w <<<"$fns")
awk '/^__global__ void device_check/,/^}/' "$P/check.cu" > kernel.cu
miss_h="" miss_d="" miss_inc=""
for f in $fns; do
    grep -qE "(^|[^a-z0-9_])$f *\(" "$P/check.inc" || miss_h+="$f "
    grep -qE "(^|[^a-z0-9_])$f *\(" kernel.cu || miss_d+="$f "
done
for h in "${headers[@]}"; do
    grep -q "^#include \"arith/$(basename "$h")\"" "$P/check.inc" || miss_inc+="$(basename "$h") "
done
[ "$nf" -gt 50 ] && [ -z "$miss_h$miss_inc" ]
ok $? "check.inc includes every header and calls all $nf OB_INLINE functions${miss_inc:+ \
(headers missing: $miss_inc)}${miss_h:+ (functions missing: $miss_h)}"
[ "$nf" -gt 50 ] && [ -z "$miss_d" ]
ok $? "check.cu's device kernel calls all $nf functions${miss_d:+ (missing: $miss_d)}"

# the compiled arithmetic needs nothing from libm but fmaf and sqrtf
libc='fmaf sqrtf memcpy memmove memset printf puts putchar __stack_chk_fail'
for o in O0 O2; do
    gcc -$o -std=gnu11 -ffp-contract=off -fno-math-errno -I"$OB_TOP/lib" -c "$P/check.c" -o "check-$o.o"
    extra=$(nm -u "check-$o.o" | awk '{print $2}' | while read -r s; do
        [[ " $libc " == *" $s "* ]] || printf '%s ' "$s"; done)
    [ -z "$extra" ]
    ok $? "gcc -$o: the arithmetic calls only $libc${extra:+ (also: $extra)}"
done
