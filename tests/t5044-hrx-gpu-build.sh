#!/usr/bin/env bash
# The GPU builds of the hrx route: make CUDA=1 (nvcc; sm_90 here) and make HIP=1 (hipcc, gfx90a
# and gfx1030; CUDA_ARCH and HIP_ARCH name others), both at once where both toolchains are
# installed, under a user's fast-math flags (NVCCFLAGS=--use_fast_math, HIPCCFLAGS=-ffast-math),
# compile the kernel sources and link (in a copy of the tree that keeps this build's C objects,
# so that only the GPU objects are compiled). The binaries carry each runtime; on a machine
# without a GPU, -d hrx exits 4 with one line naming what each runtime said (with one: it must
# equal cpu); hrx-sim and the kernel tests still pass in them; and those flags cannot change the
# arithmetic: the device code of the kernels has no approximate or flush-to-zero instruction
# (the build's own PTX) and no fast-math flag (LLVM IR). What hrx-sim cannot see, read in the
# PTX and the IR: each launch whose last block reads the others' results fences before and
# after its arrival, and no kernel reads through CUDA's non-coherent read-only path.
# A toolchain that is not installed skips its checks ("optional toolchain").
# tests/run: long (minutes: started first)
. "$(dirname "$0")/lib.sh"
S=$SHARED/models/stories260K.gguf
mk() { env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make "$@"; }   # a make of its own
knobs=() names=()
command -v nvcc > /dev/null && knobs+=(CUDA=1) && names+=(cuda)
command -v hipcc > /dev/null && knobs+=(HIP=1) && names+=(hip)
plan 9

# the architectures are the user's to name (CUDA_ARCH, HIP_ARCH): device code for those only;
# the defaults are sm_80 + sm_90 and gfx90a + gfx1030 (no toolchain needed: the command lines)
arch=$(mk -s -C "$OB_TOP" print-cflags CUDA=1 HIP=1 | grep -E '^lib/hrx/(cuda|hip)-mm.o: ' |
       grep -oE 'code=sm_[0-9a-z]+|offload-arch=gfx[0-9a-z]+' | tr '\n' ' ')
one=$(mk -s -C "$OB_TOP" print-cflags CUDA=1 HIP=1 CUDA_ARCH=90 HIP_ARCH=gfx1151 |
      grep -E '^lib/hrx/(cuda|hip)-mm.o: ' | grep -oE 'code=sm_[0-9a-z]+|offload-arch=gfx[0-9a-z]+' |
      tr '\n' ' ')
[ "$arch" = "code=sm_80 code=sm_90 offload-arch=gfx90a offload-arch=gfx1030 " ] &&
    [ "$one" = "code=sm_90 offload-arch=gfx1151 " ]
ok $? "CUDA_ARCH / HIP_ARCH: defaults ($arch), CUDA_ARCH=90 HIP_ARCH=gfx1151 ($one)"

if [ ${#knobs[@]} -eq 0 ]; then
    for i in $(seq 8); do skip "GPU build check $i" "optional toolchain: neither nvcc nor hipcc"; done
    exit 0
fi
cd "$T" || exit 1

# the tree with this build's objects, their times kept (make compiles only what is new)
mkdir src
# (not a GPU object of an earlier build: the PTX checked below must come from this one)
tar -C "$OB_TOP" --exclude='cuda-*.o' --exclude='hip-*.o' -cf - Makefile lib cmd tests/unit \
    tests/data bench | tar -C src -xf -
# (CUDA for sm_90 alone, the device tool's GPU; the PTX nvcc makes of each kernel file is kept
# for the check below)
mkdir keep
nvf="-O2 --use_fast_math --keep --keep-dir $PWD/keep" hipf='-O2 -ffast-math -ffp-contract=fast'
mk -s -C src -j2 "${knobs[@]}" CUDA_ARCH=90 NVCCFLAGS="$nvf" HIPCCFLAGS="$hipf" \
    bin/1b-gen bin/1b-load bin/unit/hrx > build.log 2>&1; built=$?
ok $built "make ${knobs[*]} (fast-math flags): the kernels compile for ${names[*]} (sm_90) and the programs link" ||
    tail -15 build.log | sed 's/^/# /'
have=""
for n in "${names[@]}"; do
    nm src/bin/1b-gen 2>/dev/null | grep -q " [DR] ob_hrx_${n}_rt$" && have+="$n "
done
[ "$have" = "${names[*]} " ]; ok $? "1b-gen carries the runtimes: ${have:-none}"

echo '{"id":"a","prompt":"Once upon a time","max_tokens":8,"top_logprobs":2}' > one.jsonl
src/bin/1b-gen -m "$S" -d hrx < one.jsonl > gpu.jsonl 2> err.txt; rc=$?
1b-gen -m "$S" < one.jsonl > cpu.jsonl
if [ $rc -eq 4 ]; then
    bad=""
    for n in "${names[@]}"; do grep -q "$n: " err.txt || bad+="$n "; done
    [ "$(wc -l < err.txt)" -eq 1 ] && grep -q '^1b-gen: hrx: no GPU 0 (' err.txt && [ -z "$bad" ]
    ok $? "no GPU here: -d hrx exits 4 with one line ($(cat err.txt))"
else
    [ $rc -eq 0 ] && 1b-agree -q cpu.jsonl gpu.jsonl > /dev/null 2>&1
    ok $? "a GPU is here: -d hrx exits $rc and equals the cpu route ($(head -c 200 err.txt))"
fi
src/bin/1b-gen -m "$S" -d hrx-sim < one.jsonl > sim.jsonl 2> err.txt &&
    1b-agree -q cpu.jsonl sim.jsonl > /dev/null 2>&1
ok $? "the GPU build's hrx-sim = cpu ($(head -c 200 err.txt))"
out=$(src/bin/unit/hrx --quick 2>&1); rc=$?
[ $rc -eq 0 ] && ! grep -q '^not ok' <<<"$out"
ok $? "the GPU build's kernel tests: $(grep -c '^ok' <<<"$out") ok ($(grep -o '# SKIP.*' <<<"$out" | sed 's/# SKIP/skipped:/' | head -2 | tr '\n' ' '))" ||
    grep '^not ok' <<<"$out" | head -5 | sed 's/^/# /'

# the device code under the user's fast-math flags: the build's own PTX (sm_90: the tensor
# cores' path too), and hipcc's LLVM IR from the Makefile's command line with those flags
read -ra cj <<<"$(pkg-config --cflags libcjson)"
if command -v nvcc > /dev/null; then
    line=$(mk -s -C src print-cflags CUDA=1 CUDA_ARCH=90 NVCCFLAGS="$nvf" | sed -n 's|^lib/hrx/cuda-mm.o: ||p')
    np=$(compgen -G 'keep/*.ptx' | wc -l)
    hit=$(grep -l -E '\.approx|\.ftz' keep/*.ptx 2>/dev/null | head -3 | xargs -r -n1 basename)
    [ $built -eq 0 ] && [[ "$line" == *--use_fast_math* ]] && [ -s keep/mm.ptx ] &&
        [ -s keep/norm.ptx ] && [ -s keep/attn.ptx ] && [ -z "$hit" ]
    ok $? "NVCCFLAGS=--use_fast_math: the kernels' PTX ($np files, sm_90) has no .approx and no .ftz${hit:+ (in: $hit)}"
else
    skip "NVCCFLAGS=--use_fast_math: exact PTX" "optional toolchain: no nvcc"
fi

if command -v hipcc > /dev/null; then
    cmd=$(mk -s -C src print-cflags HIP=1 HIPCCFLAGS="$hipf" |
          sed -n 's|^lib/hrx/hip-mm.o: ||p' | sed 's/--offload-arch=gfx1030//')
    read -ra c <<<"$cmd"
    bad=""
    for f in mm norm attn; do
        "${c[@]}" -Isrc/lib "${cj[@]}" --cuda-device-only -S -emit-llvm \
            "src/lib/hrx/$f.hip" -o - > "$f.ll" 2> ll.err || bad+="$f: $(head -c 200 ll.err) "
        grep -qE '(fadd|fsub|fmul|fdiv|call) (fast|reassoc|nnan|ninf|nsz|arcp|contract|afn)|denormal-fp-math-f32"="preserve-sign' "$f.ll" &&
            bad+="$f: $(grep -m1 -oE '(fadd|fsub|fmul|fdiv|call) (fast|reassoc|nnan|ninf|nsz|arcp|contract|afn)|denormal[^ ]*' "$f.ll") "
        [ "$(grep -c 'fadd' "$f.ll")" -gt 0 ] || bad+="$f: no device code "
    done
    [ -n "$cmd" ] && [ -z "$bad" ]
    ok $? "HIPCCFLAGS=-ffast-math: the kernels' device IR has no fast-math flag or flushed denormals${bad:+ ($bad)}"
else
    skip "HIPCCFLAGS=-ffast-math: exact device IR" "optional toolchain: no hipcc"
fi

# what hrx-sim cannot see (on x86 every load is coherent, and a store is seen in order): a
# launch whose last block reads the others' results (shim.h's ob_last_block, its arrival an
# atomic add) must fence at the device's scope before the add and after it, in nvcc's PTX and
# in hipcc's IR; and no kernel reads memory through CUDA's read-only path (ld.global.nc, what
# nvcc makes of __ldg or a const __restrict__ pointer), which other blocks' stores in the same
# launch do not reach
# (each function, kernel or not, that arrives: a fence before its arrival and one after it)
fenced() {
    awk 'function end() { if (name != "" && atom && !(pre && post)) print name }
         /^(\.visible |\.weak )?\.(entry|func) |^define / {
             end(); atom = pre = post = 0
             name = match($0, /[A-Za-z_$][A-Za-z0-9_$]*\(/) ? substr($0, RSTART, RLENGTH - 1) : $0 }
         /membar\.gl|fence\.(sc|acq_rel)\.gpu|fence (syncscope\("agent"\) )?(seq_cst|acq_rel)/ {
             if (atom) post = 1; else pre = 1 }
         /atom(\.global)?\.add|atomicrmw add/ { atom = 1; post = 0 }
         END { end() }' "$@" 2>/dev/null | head -3 | tr '\n' ' '
}
arrivals() { cat "$@" 2>/dev/null | grep -cE 'atom(\.global)?\.add|atomicrmw add'; }
if [ ${#knobs[@]} -gt 0 ]; then
    ptx=(keep/*.ptx) ll=(mm.ll norm.ll attn.ll) bad="" seen=""
    if command -v nvcc > /dev/null; then
        n=$(arrivals "${ptx[@]}") f=$(fenced "${ptx[@]}")
        nc=$(grep -l 'ld\.global\.nc' "${ptx[@]}" 2>/dev/null | xargs -r -n1 basename | tr '\n' ' ')
        seen+="PTX $n "
        [ "$n" -ge 3 ] || bad+="PTX: $n arrivals; "
        [ -z "$f" ] || bad+="PTX, not fenced: $f; "
        [ -z "$nc" ] || bad+="ld.global.nc in: $nc; "
    fi
    if command -v hipcc > /dev/null; then
        n=$(arrivals "${ll[@]}") f=$(fenced "${ll[@]}")
        seen+="IR $n "
        [ "$n" -ge 3 ] || bad+="IR: $n arrivals; "
        [ -z "$f" ] || bad+="IR, not fenced: $f; "
    fi
    [ $built -eq 0 ] && [ -z "$bad" ]
    ok $? "last-block launches fence before and after arriving (${seen% }), no ld.global.nc${bad:+ ($bad)}"
fi
