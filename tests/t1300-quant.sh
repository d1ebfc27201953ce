#!/usr/bin/env bash
# t1300-quant.sh — the weight formats of lib/quant.c against the gguf Python package:
#  - C self-tests (bin/unit/quant): block sizes, fp16/bf16, exact dequantisation, errors,
#    determinism; and the round-trip RMSE table (printed as comments); the type lists below
#    are the library's (bin/unit/quant types)
#  - dequantisation bit for bit equal to gguf-py's, on random blocks (with subnormal and large
#    fp16 scales) and on blocks sampled from every tensor of the two real models
#  - every quantiser makes blocks that gguf-py decodes exactly as we do; where gguf-py has a
#    quantiser (F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1) we write the same bytes
. "$(dirname "$0")/lib.sh"

QPY=$OB_TOP/tests/py/quant.py
RAW=$UNIT/quant-raw
MODELS=$OB_TOP/.cache/models
DQ_TYPES="F32 F16 BF16 Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 Q2_K Q3_K Q4_K Q5_K Q6_K"
Q_TYPES="F32 F16 BF16 Q8_0 Q4_0 Q4_1 Q5_0 Q5_1 Q2_K Q3_K Q4_K Q5_K Q6_K"
PYQ_TYPES="Q8_0 Q4_0 Q4_1 Q5_0 Q5_1"
# model name (for scripts/models), file, tensor types it holds
REAL="smollm2:SmolLM2-135M-Instruct.Q4_1.gguf:F32,Q4_1,Q8_0
gemma3:gemma-3-270m-q4_k_m.gguf:F32,Q8_0,Q5_0,Q4_K,Q6_K"

n_real=$(printf '%s\n' "$REAL" | cut -d: -f3 | tr ',' '\n' | wc -l)
n_dq=$(wc -w <<<"$DQ_TYPES")
n_q=$(wc -w <<<"$Q_TYPES")
n_pyq=$(wc -w <<<"$PYQ_TYPES")
plan $((3 + n_dq + n_real + n_q + n_pyq + 2))

# A C program printing TAP: one check; its comments are passed on, its failures shown.
tap_prog() {
    local d=$1; shift
    local out rc
    out=$("$@" 2>&1)
    rc=$?
    printf '%s\n' "$out" | grep '^#'
    printf '%s\n' "$out" | grep -q '^not ok' && rc=1
    ok $rc "$d" || printf '%s\n' "$out" | grep -v '^#' | grep -v '^ok' | head -20 | sed 's/^/# /'
}

# The verdict of a batched `quant.py compare|cmpbytes` for file B: B.cmp is empty when equal and
# otherwise names the first differing element and its block. LOG holds the C side's errors.
verdict() {
    local d=$1 b=$2 log=${3:-}
    [ -f "$b.cmp" ] && [ ! -s "$b.cmp" ]
    ok $? "$d" || {
        if [ -f "$b.cmp" ]; then sed 's/^/# /' "$b.cmp"; else echo "# no comparison for $b"; fi
        [ -n "$log" ] && [ -s "$log" ] && sed 's/^/# /' "$log" | head -5
    }
}

# Run a C step; its stderr goes to the log that a failed comparison shows.
c_step() {
    local log=$1; shift
    "$@" 2>>"$log" || echo "$*: exit $?" >>"$log"
}

tap_prog "C self-tests: sizes, fp16/bf16, exact dequantisation, errors, determinism" "$UNIT/quant"
tap_prog "round-trip RMSE finite and ordered by bits per weight" "$UNIT/quant" rmse

# the lists above are every type the library dequantises (but Q8_K, which gguf-py lacks) and
# quantises: a type added to lib/quant.c fails here until it is compared with gguf-py too
lib_dq=$("$UNIT/quant" types | awk '$1 == "dequant" {print $2}' | sort | tr '\n' ' ')
lib_q=$("$UNIT/quant" types | awk '$1 == "quant" {print $2}' | sort | tr '\n' ' ')
our_dq=$(tr ' ' '\n' <<<"$DQ_TYPES" | sort | tr '\n' ' ')
our_q=$(tr ' ' '\n' <<<"$Q_TYPES" | sort | tr '\n' ' ')
[ -n "$lib_dq" ] && [ "$lib_dq" = "$our_dq" ] && [ "$lib_q" = "$our_q" ]
ok $? "DQ_TYPES and Q_TYPES are the library's types (dequant: $lib_dq; quant: $lib_q)"

if ! need_python numpy gguf; then
    for _ in $(seq $((n_dq + n_real + n_q + n_pyq + 2))); do
        skip "comparison with gguf-py" "python with numpy and gguf not found ($PY)"
    done
    exit 0
fi

# Real models: the gguf reader is slow on a large vocabulary (~25 s for gemma3), so sampling
# runs in the background while the random-block checks go on.
mkdir -p "$T/real"
while IFS=: read -r name file types; do
    (
        f=$MODELS/$file
        [ -f "$f" ] || "$OB_TOP/scripts/models" "$name" >/dev/null 2>"$T/real/$name.err"
        if [ -f "$f" ]; then
            "$PY" "$QPY" extract "$f" "$T/real" "$name" >"$T/real/$name.list" 2>>"$T/real/$name.err"
        else
            echo "$f missing and scripts/models $name failed" >>"$T/real/$name.err"
        fi
    ) &
done <<<"$REAL"

# ---- random blocks ------------------------------------------------------------------------------
# shellcheck disable=SC2086  # the types, a word each
"$PY" "$QPY" blocks 1300 "$T/rand" $DQ_TYPES
args=()
for t in $DQ_TYPES; do
    c_step "$T/rand/$t.log" "$RAW" dequant "$t" "$T/rand/$t.blk" "$T/rand/$t.ours"
    args+=("$t:$T/rand/$t.blk:$T/rand/$t.gguf")
done
"$PY" "$QPY" dequant "${args[@]}"
args=()
for t in $DQ_TYPES; do args+=("$t:$T/rand/$t.ours:$T/rand/$t.gguf"); done
"$PY" "$QPY" compare "${args[@]}"
for t in $DQ_TYPES; do
    verdict "$t: random blocks dequantise bit for bit as gguf-py" "$T/rand/$t.gguf" "$T/rand/$t.log"
done

# ---- our quantisers ---------------------------------------------------------------------------
"$PY" "$QPY" floats 1300 64 4096 "$T/x.f32"
"$PY" "$QPY" bits 1300 100000 "$T/bits.f32"
args=()
for t in $Q_TYPES; do
    c_step "$T/q-$t.log" "$RAW" quant "$t" "$T/x.f32" "$T/q-$t.blk"
    c_step "$T/q-$t.log" "$RAW" dequant "$t" "$T/q-$t.blk" "$T/q-$t.ours"
    args+=("$t:$T/q-$t.blk:$T/q-$t.gguf")
done
"$PY" "$QPY" dequant "${args[@]}"
cargs=()
for t in $Q_TYPES; do cargs+=("$t:$T/q-$t.ours:$T/q-$t.gguf"); done
"$PY" "$QPY" compare "${cargs[@]}"

args=()
for t in $PYQ_TYPES; do args+=("$t:$T/x.f32:$T/pyq-$t.blk"); done
for t in F16 BF16; do
    c_step "$T/bits-$t.log" "$RAW" quant "$t" "$T/bits.f32" "$T/bits-$t.blk"
    args+=("$t:$T/bits.f32:$T/bits-$t.gguf")
done
"$PY" "$QPY" quant "${args[@]}"
cargs=()
for t in $PYQ_TYPES; do cargs+=("$t:$T/q-$t.blk:$T/pyq-$t.blk"); done
for t in F16 BF16; do cargs+=("$t:$T/bits-$t.blk:$T/bits-$t.gguf"); done
"$PY" "$QPY" cmpbytes "${cargs[@]}"

for t in $Q_TYPES; do
    verdict "$t: our quantiser's blocks decode the same in gguf-py and in C" "$T/q-$t.gguf" \
        "$T/q-$t.log"
done
for t in $PYQ_TYPES; do
    verdict "$t: our quantiser writes gguf-py's bytes" "$T/pyq-$t.blk" "$T/q-$t.log"
done
for t in F16 BF16; do
    verdict "$t: float32 bit patterns (edges, NaN, Inf) convert as gguf-py/numpy" \
        "$T/bits-$t.gguf" "$T/bits-$t.log"
done

# ---- real blocks ----------------------------------------------------------------------------------
wait
while IFS=: read -r name file types; do
    args=()
    for t in ${types//,/ }; do
        b=$T/real/$name-$t.blk
        [ -f "$b" ] || continue
        c_step "$T/real/$name-$t.log" "$RAW" dequant "$t" "$b" "$T/real/$name-$t.ours"
        args+=("$t:$b:$T/real/$name-$t.gguf")
    done
    if [ ${#args[@]} -gt 0 ]; then
        "$PY" "$QPY" dequant "${args[@]}"
        "$PY" "$QPY" compare "${args[@]//.blk:/.ours:}"
    fi
    for t in ${types//,/ }; do
        nb=$(awk -v t="$t" '$1 == t { print $2 }' "$T/real/$name.list" 2>/dev/null)
        if [ -f "$T/real/$name-$t.blk" ]; then
            verdict "$t: $nb blocks sampled from every $t tensor of $file dequantise as gguf-py" \
                "$T/real/$name-$t.gguf" "$T/real/$name-$t.log"
        else
            ok 1 "$t: blocks of $file"
            sed 's/^/# /' "$T/real/$name.err" 2>/dev/null | tail -5
        fi
    done
done <<<"$REAL"
