#!/usr/bin/env bash
# Every weight type the cpu route runs goes through hrx-sim to the cpu route's bits: a
# synthetic llama model per type (F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K,
# Q4_K, Q5_K, Q6_K; 256 wide so that the K-quants fit), three requests decoded two at a time
# with 5-token prefill chunks, 1b-agree cpu hrx-sim exits 0, with hrx-sim's large tiles and
# with the GPU's launch geometry (OB_HRX_SIM_TILES=gpu), and once more three at a time in
# 16-token chunks with the GPU's tiled product at every width (OB_HRX_GEMM=1: k_gm_q). The list is checked against the cpu
# route's own (tests/unit/hrx.c checks that hrx has kernels for exactly those types). And the
# launches OB_HRX_FUSE=3 saves, counted.
# tests/run: long (minutes: started first)
. "$(dirname "$0")/lib.sh"
types=(f32 f16 bf16 q4_0 q4_1 q5_0 q5_1 q8_0 q2_k q3_k q4_k q5_k q6_k)
plan $(( ${#types[@]} + 2 ))
cd "$T" || exit 1
cat > req.jsonl <<'EOT'
{"id":"a","prompt":"Once upon a time","max_tokens":12,"top_logprobs":3}
{"id":"b","prompt":"The little dog ran to the park and","max_tokens":9,"top_logprobs":1}
{"id":"c","prompt":"Lily had a red ball.","max_tokens":10,"temperature":0.8,"seed":5,"top_logprobs":2}
EOT
seen=()
for t in "${types[@]}"; do
    1b-synth --preset llama-tiny --embd 256 --ff 256 --head-dim 64 --type "$t" -o "$t.gguf" 2> err.txt
    got=$(1b-load "$t.gguf" | jq -r '.types | keys | map(select(. != "F32")) | join(",")')
    [ "$t" = f32 ] && got=F32
    seen+=("$got")
    1b-gen -m "$t.gguf" -t 2 --parallel 2 --chunk 5 < req.jsonl > cpu.jsonl 2> err.txt &&
        1b-gen -m "$t.gguf" -t 2 --parallel 2 --chunk 5 -d hrx-sim < req.jsonl > sim.jsonl 2>> err.txt &&
        OB_HRX_SIM_TILES=gpu 1b-gen -m "$t.gguf" -t 2 --parallel 2 --chunk 5 -d hrx-sim \
            < req.jsonl > simg.jsonl 2>> err.txt &&
        OB_HRX_SIM_TILES=gpu OB_HRX_GEMM=1 1b-gen -m "$t.gguf" -t 2 --parallel 3 --chunk 16 \
            -d hrx-sim < req.jsonl > simt.jsonl 2>> err.txt
    out=$(1b-agree cpu.jsonl sim.jsonl simg.jsonl simt.jsonl 2>&1); rc=$?
    [ "$got" = "${t^^}" ] && [ $rc -eq 0 ]
    ok $? "$t weights ($got): hrx-sim = cpu (its tiles, the GPU's shapes, the GPU's tiled product), 1b-agree exit $rc: $(grep -m1 'A-B' <<<"$out" | tr -s ' ')" ||
        { sed 's/^/# /' <<<"$out" | head -8; head -3 err.txt | sed 's/^/# /'; }
done
# OB_HRX_FUSE=3 (the default) makes 5 launches a layer fewer than level 2 in every step of up
# to 15 rows (the layer-0 attention norm stays: 5 L - 1 a step), with the same records: the
# norms, GATE's quantisation, rope_kv and attention's combine really done by last blocks
# (counted by OB_HRX_SIM_TRACE), on a K-quant (Q8_K activations) and a 32-value type (A8)
fused="" launches=()
for t in q4_k q8_0; do
    for f in 2 3; do
        OB_HRX_SIM_TRACE=1 OB_HRX_SIM_TILES=gpu OB_HRX_FUSE=$f 1b-gen -m "$t.gguf" -t 2 \
            --parallel 2 --chunk 5 -d hrx-sim < req.jsonl 2> "trace$f.txt" |
            jq -c 'del(.timing)' > "fuse$f.jsonl"
        launches[f]=$(grep -c '^hrx-sim: launch' "trace$f.txt")
    done
    n2=${launches[2]} n3=${launches[3]}
    steps=$(grep -c '^hrx-sim: launch k_embed' trace3.txt)
    L=$(1b-load "$t.gguf" | jq .hparams.n_layer)
    want=$(( steps * (5 * L - 1) ))
    cmp -s fuse2.jsonl fuse3.jsonl && [ -s fuse3.jsonl ] && [ "$steps" -gt 5 ] &&
        [ $(( n2 - n3 )) -eq "$want" ] || fused+=" $t: $n2 -> $n3 launches in $steps steps of $L layers (want $want fewer)"
done
[ -z "$fused" ]
ok $? "OB_HRX_FUSE=3: 5 L - 1 launches a step fewer than level 2 (q4_k, q8_0), the same records${fused:+:$fused}"
# the types above are every type the cpu route has a dot product for
want=$("$UNIT/hrx" --types | tr ' ' '\n' | grep . | sort | tr '\n' ' ')
have=$(printf '%s\n' "${seen[@]}" | sort | tr '\n' ' ')
[ -n "$want" ] && [ "$want" = "$have" ]
ok $? "the types run are the cpu route's: $have (cpu: $want)"
