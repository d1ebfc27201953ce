#!/usr/bin/env bash
# The cpu route on the CPUs this machine is not, asked through their own CPUID: qemu-x86_64
# (qemu-user, TCG) runs the built commands as a Haswell (AVX2, FMA, F16C, BMI2 and no AVX-512,
# which TCG does not have: the AVX2-only EPYCs' level) and as a Westmere (SSE4.2, no AVX: the
# scalar level). OB_CPU_LACKS (t1328) takes levels away inside lib/host/simd.c; here nothing is
# overridden, so code that runs an instruction its CPU lacks dies as it would there. (A Westmere
# did: the kernel tables' AVX2 filler, compiled with -mavx2, stored its pointers with AVX moves.)
# On each: 1b-load -d cpu names the level, bin/unit/cpu-has agrees, OB_SIMD above it is refused
# (exit 4), and 1b-gen's result records on synthetic models of the kernels' families (fewer on
# the Westmere, and no F16: TCG runs float code slowly) are byte for byte those of this
# machine's own level, all but the timing. OPENBLAS_CORETYPE is set for the emulated commands:
# without it they re-execute themselves to set it (lib/ref/backend-ref.c ob_blas_env), and
# qemu-user runs an exec'd x86-64 program natively, off the emulated CPU. Then t1330 on the
# SIMD kernels' flag sets under OB_CPU_EMU, CPUID asked and the builds run on the emulated CPU:
# the AVX2 set runs and gives the reference's bits, the AVX-512 set is compiled and its run
# skipped, "cpu lacks avx512" (#27's failure, on a real answer); on the Westmere both runs are
# skipped.
. "$(dirname "$0")/lib.sh"
plan 8
# LEVEL|OPENBLAS_CORETYPE|CPU: the CPU models less what TCG cannot emulate (qemu warns of each
# on every start)
cpus=("avx2|Haswell|Haswell-v4,-pcid,-x2apic,-tsc-deadline,-invpcid,-spec-ctrl"
      "scalar|Nehalem|Westmere-v2,-spec-ctrl")
if [ "$(uname -m)" != x86_64 ] || ! command -v qemu-x86_64 > /dev/null; then
    why="qemu-x86_64 not installed (scripts/setup installs qemu-user)"
    [ "$(uname -m)" = x86_64 ] || why="not an x86-64 machine"
    for i in $(seq 8); do skip "check $i of the emulated CPUs" "$why"; done
    exit 0
fi
cd "$T" || exit 1
# stderr less qemu's warnings
quiet() { grep -v '^qemu-x86_64: warning:' "$1"; }

TOK=$SHARED/models/qwen3-tokenizer/tokenizer.json
models=()
for ty in q8_0 q4_0 q5_1 q2_k q3_k q5_k; do
    1b-synth --preset qwen3-small --vocab 8000 --type $ty --tokenizer "$TOK" -o "q-$ty.gguf" && models+=("q-$ty")
done
1b-synth --preset llama-tiny -o llama.gguf && models+=(llama)
1b-synth --preset gemma3-tiny --type q4_k_m -o gemma3.gguf && models+=(gemma3)
# the Westmere's: one of each kernel family (32-value blocks, k-quants, F32) and Gemma
scalar_models=(q-q4_0 llama gemma3)
head -4 "$OB_TOP/tests/data/contract-requests.jsonl" > req.jsonl
# gen MODEL OUT [PREFIX...]: result records without the timing, 4 at a time (the GEMMs at
# prefill, the few-row kernels at decode), 2 threads
gen() {
    local m=$1 o=$2; shift 2
    "$@" "$BIN/1b-gen" -m "$m.gguf" --parallel 4 -t 2 --max-tokens 6 < req.jsonl > "$o.raw" 2> "$o.err" &&
        jq -c 'del(.timing)' "$o.raw" > "$o"
}
native=$(1b-load -d cpu | jq -r .device)
for m in "${models[@]}"; do gen "$m" "$m.native" || echo "# native $m: $(tail -1 "$m.native.err")"; done

for c in "${cpus[@]}"; do
    IFS='|' read -r level core cpu <<<"$c"
    name=${cpu%%,*}
    emu=(env OPENBLAS_CORETYPE="$core" qemu-x86_64 -cpu "$cpu")
    got=$("${emu[@]}" "$BIN/1b-load" -d cpu 2> load.err | jq -r .device 2>&1)
    "${emu[@]}" "$UNIT/cpu-has" avx512f > /dev/null 2>&1; r512=$?
    "${emu[@]}" "$UNIT/cpu-has" avx avx2 fma f16c bmi2 > /dev/null 2>&1; r2=$?
    want2=0; [ "$level" = scalar ] && want2=1
    [ "$got" = "$level" ] && [ $r512 -eq 1 ] && [ $r2 -eq $want2 ]
    ok $? "$name: the cpu route runs $level ($got); cpu-has: avx512f exit $r512 (want 1), the AVX2 level's extensions exit $r2 (want $want2)" ||
        quiet load.err | head -3 | sed 's/^/# /'

    above=avx512; [ "$level" = scalar ] && above=avx2
    echo '{"id":"a","prompt":"Once","max_tokens":2}' > one.jsonl
    OB_SIMD=$above "${emu[@]}" "$BIN/1b-gen" -m q-q4_0.gguf < one.jsonl > /dev/null 2> simd.err; rc=$?
    msg=$(quiet simd.err)
    [ $rc -eq 4 ] && [ "$msg" = "1b-gen: OB_SIMD=$above, but this CPU supports only $level" ]
    ok $? "$name: OB_SIMD=$above refused (exit $rc: $msg)"

    list=("${models[@]}"); [ "$level" = scalar ] && list=("${scalar_models[@]}")
    bad=""
    for m in "${list[@]}"; do
        if ! gen "$m" "$m.$level" "${emu[@]}"; then
            bad="$bad $m (exit: $(quiet "$m.$level.err" | tail -1))"
        elif [ ! -s "$m.native" ] || ! cmp -s "$m.native" "$m.$level"; then
            bad="$bad $m (differs)"
        fi
    done
    [ -z "$bad" ]
    ok $? "$name: 1b-gen's records on ${#list[@]} models = this machine's at $native:${bad:- all equal}"
done

# t1330 on the SIMD kernels' flag sets with OB_CPU_EMU: its summary line and skips
portable() {    # CPU-MODEL [ENV...]
    local cpu=$1 out; shift
    out=$(env "$@" OB_CPU_EMU="qemu-x86_64 -cpu $cpu" OB_VERBOSE=1 \
          OB_PORTABLE_ONLY='^lib/cpu/kernels/a8-avx(2|512)\.o$' "$OB_TOP/tests/run" \
          "$OB_TOP/tests/t1330-portable.sh" 2>&1)
    printf '%s\n' "$out" > portable.log
    grep -oE '# SKIP .*' <<<"$out" | sed 's/^# SKIP //' | tr '\n' ';' > skips
    tail -1 <<<"$out"
}
s=$(portable "${cpus[0]##*|}" OB_REQUIRE_ALL=1 OB_ISA_OPTIONAL=avx512)
ran=$(grep -cE '^ +ok [0-9]+ - Makefile flags of lib/cpu/kernels/a8-avx2\.o: the same bits as gcc -O2 \(' portable.log)
[[ $s == *" passed, 0 failed, 1 skipped" ]] && [ "$(cat skips)" = "cpu lacks avx512 (avx512f);" ] && [ "$ran" = 1 ]
ok $? "Haswell: t1330 on the SIMD kernels' flags: $s; the avx2 set ran ($ran), skipped: $(cat skips)" ||
    grep -E '^ +not ok|stderr' portable.log | head -5 | sed 's/^/# /'
# (the policy would fail a missing avx2, which a Westmere lacks by design: off for this run)
s=$(portable "${cpus[1]##*|}" OB_REQUIRE_ALL=0)
[[ $s == *" passed, 0 failed, 2 skipped" ]] &&
    [ "$(cat skips)" = "cpu lacks avx2 (avx);cpu lacks avx2 (avx);" ]
ok $? "Westmere: t1330 on the SIMD kernels' flags: $s; skipped: $(cat skips)" ||
    grep -E '^ +not ok|stderr' portable.log | head -5 | sed 's/^/# /'
