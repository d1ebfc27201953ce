#!/usr/bin/env bash
# 1b-requant: GGUF to GGUF in every type and mix, and to Q4NX packs.
#  - every type and mix (and q4nx) from an f32 model: the report and the output checked by an
#    independent oracle (tests/py/requant_check.py: gguf-py's reader, dequantisers and, where it
#    has them, quantisers; a numpy Q4NX decoder written from man/1b.7), and the output runs;
#  - round trips: T -> T copies every byte (the file is the same file), T -> f32 gives gguf-py's
#    dequantised values (error 0); shape fallbacks as llama-quantize's;
#  - the same input gives the same bytes and report whatever the thread count; an archive gives
#    what its GGUF gives; a quantised input is reported as dequantised first;
#  - the input is never touched or written over (not even through a link or with --force), an
#    existing output is kept without --force, a failure leaves no partial file or directory;
#  - bad input exits 3, bad usage 2; progress goes to stderr only when it is a terminal.
. "$(dirname "$0")/lib.sh"
TOK=$SHARED/models/qwen3-tokenizer/tokenizer.json
CHECK=$OB_TOP/tests/py/requant_check.py
SMOL=$OB_TOP/.cache/models/SmolLM2-135M-Instruct.Q4_1.gguf
TYPES="f32 f16 bf16 q8_0 q4_0 q4_1 q5_0 q5_1 q2_k q3_k q4_k q5_k q6_k q3_k_s q3_k_m q3_k_l q4_k_s q4_k_m q5_k_s q5_k_m q4nx"
plan $(( $(wc -w <<<"$TYPES") + 32 ))
cd "$T" || exit 1
echo '{"id":"a","prompt":"Once upon a time","max_tokens":6}' > p.jsonl

1b-synth --preset qwen3-small --vocab 4000 --type f32 --tokenizer "$TOK" -o f.gguf
sum0=$(sha256sum f.gguf)
stat -c %Y f.gguf > mtime0

# 1. every type and mix
for t in $TYPES; do
    out=o-$t; [ "$t" = q4nx ] || out=o-$t.gguf
    route=cpu; [ "$t" = q4nx ] && route=npu-sim
    1b-requant --type "$t" -o "$out" f.gguf > "r-$t.jsonl" 2> err.txt; rc=$?
    chk=$("$PY" "$CHECK" f.gguf "$out" "r-$t.jsonl" 2>&1)
    [ $rc -eq 0 ] && [ "$chk" = "ok 24 tensors" ] &&
        1b-gen -m "$out" -d "$route" < p.jsonl | jq -e '.tokens | length == 6' > /dev/null
    ok $? "$t: report and output checked against gguf-py, the output runs on $route ($(head -c 200 err.txt)${chk:0:300})"
done
# the report's errors grow as the bits shrink
jq -s -r 'map(select(.summary)) | .[0].rel_rmse' r-q8_0.jsonl r-q6_k.jsonl r-q5_k.jsonl r-q4_k.jsonl \
    r-q3_k.jsonl r-q2_k.jsonl > rel.txt
sort -g -c rel.txt && [ "$(head -1 rel.txt)" != 0 ]
ok $? "relative rms error: q8_0 < q6_k < q5_k < q4_k < q3_k < q2_k ($(tr '\n' ' ' < rel.txt))"

# 2. round trips, every type and mix: T -> T is the same file; T -> f32 has error 0 (our
#    dequantiser is gguf-py's). (q4nx: a pack is not an input; its tiles come back bit for bit
#    through the quantiser in tests/unit/q4nx.c.)
GGUF_TYPES=${TYPES% q4nx}
same=""
for t in $GGUF_TYPES; do
    1b-requant --type "$t" -o "rt-$t.gguf" "o-$t.gguf" > rt.jsonl && cmp -s "rt-$t.gguf" "o-$t.gguf" &&
        jq -e 'select(.summary) | .copied == .tensors and .rmse == 0' rt.jsonl > /dev/null || same+="$t "
done
[ -z "$same" ]; ok $? "T -> T copies every tensor: the same file, byte for byte${same:+ (not: $same)}"
bad=""
for t in ${GGUF_TYPES#f32 }; do
    q=true; case $t in f16|bf16) q=false ;; esac
    1b-requant --type f32 -o "back-$t.gguf" "o-$t.gguf" > back.jsonl &&
        [ "$("$PY" "$CHECK" "o-$t.gguf" "back-$t.gguf" back.jsonl)" = "ok 24 tensors" ] &&
        jq -e --argjson q $q 'select(.summary) | .rmse == 0 and .input_quantised == $q' back.jsonl > /dev/null || bad+="$t "
done
[ -z "$bad" ]; ok $? "T -> f32: gguf-py's dequantised values, error 0, input reported quantised (not f16, bf16)${bad:+ (not: $bad)}"
jq -e -s 'map(select(.tensor)) | all(.[]; .dequantised == (.from != "F32"))' back.jsonl > /dev/null &&
    jq -e 'select(.summary) | .note | test("dequantised first")' back.jsonl > /dev/null
ok $? "a quantised input: each record and the summary say it was dequantised first"

# shape fallbacks (rows of 64): llama-quantize's choices
1b-synth --preset llama-tiny -o l.gguf
1b-requant --type q4_k_m -o l4.gguf l.gguf > l4.jsonl
jq -r 'select(.tensor) | "\(.tensor) \(.to)"' l4.jsonl | grep -E '^(token_embd|output|blk.0.attn_q|blk.[01].ffn_down|blk.0.attn_norm)\.' > got.txt
printf '%s\n' "token_embd.weight Q5_0" "blk.0.attn_norm.weight F32" "blk.0.attn_q.weight Q5_0" \
    "blk.0.ffn_down.weight Q5_0" "blk.1.ffn_down.weight Q8_0" "output.weight Q8_0" > want.txt
check_same "rows of 64, 2 layers: Q4_K falls back to Q5_0, Q6_K (output, layer 1's ffn_down) to Q8_0, vectors stay F32" want.txt got.txt

# one table for 1b-synth and 1b-requant: the same choices (an untied model's token embedding
# keeps the mix's base type, as llama-quantize's; 1b-synth once gave it Q6_K)
1b-synth --preset llama-tiny --embd 256 --ff 512 --layers 8 --type q4_k_m -o sq.gguf
1b-synth --preset llama-tiny --embd 256 --ff 512 --layers 8 --type f32 -o sf.gguf
1b-requant --type q4_k_m -o rq.gguf sf.gguf > rq.jsonl
diff <(1b-load --tensors sq.gguf | jq -r 'select(.tensor) | "\(.tensor) \(.type)"') \
    <(jq -r 'select(.tensor) | "\(.tensor) \(.to)"' rq.jsonl) > d.txt &&
    grep -q '^token_embd.weight Q4_K$' <(jq -r 'select(.tensor) | "\(.tensor) \(.to)"' rq.jsonl)
ok $? "1b-synth --type q4_k_m and 1b-requant --type q4_k_m choose the same types (untied token_embd Q4_K)" ||
    sed 's/^/# /' d.txt | head -5
# the completions offer exactly the types 1b-requant takes (they ask 1b-requant --list-types)
c=$(bash -c 'source "$1/completions/1b.bash"; COMP_WORDS=(1b-requant --type ""); COMP_CWORD=2
    _1b_complete; printf "%s\n" "${COMPREPLY[@]}"' _ "$OB_TOP" | tr '\n' ' ')
[ "$c" = "q4nx ${TYPES% q4nx} " ]; ok $? "bash completion's types are the ones tested here ($c)"

# 3. the same bytes and report for any thread count; from an archive
1b-requant -t 1 --type q4_k_m -o t1.gguf f.gguf > t1.jsonl && 1b-requant -t 3 --type q4_k_m -o t3.gguf f.gguf > t3.jsonl
cmp -s t1.gguf t3.gguf && cmp -s t1.jsonl <(sed 's/t3.gguf/t1.gguf/' t3.jsonl)
ok $? "q4_k_m with 1 and 3 threads: the same file and the same report"
1b-requant -t 1 --type q4nx -o p1 f.gguf > /dev/null && 1b-requant -t 3 --type q4nx -o p3 f.gguf > /dev/null
diff -r p1 p3 > /dev/null
ok $? "q4nx with 1 and 3 threads: the same pack, file for file"
tar cf f.tar f.gguf
1b-requant --type q4_k_m -o ar.gguf f.tar > ar.jsonl
cmp -s ar.gguf t1.gguf && jq -e --arg s "${sum0%% *}" 'select(.summary) | .source_sha256 == $s' ar.jsonl > /dev/null
ok $? "an archive holding the GGUF gives the same output, the GGUF's sha256 as source"

# 4. the input is never touched or written over
[ "$(sha256sum f.gguf)" = "$sum0" ] && [ "$(stat -c %Y f.gguf)" = "$(cat mtime0)" ]
ok $? "the input is unchanged after every run above (sha256 and mtime)"
check_exit 2 "-o the input itself, even with --force" 1b-requant --force --type q8_0 -o f.gguf f.gguf
ln -s f.gguf sym.gguf; ln f.gguf hard.gguf
check_exit 2 "-o a symlink to the input, with --force" 1b-requant --force --type q8_0 -o sym.gguf f.gguf
check_exit 2 "-o a hard link to the input, with --force" 1b-requant --force --type q8_0 -o hard.gguf f.gguf
check_exit 2 "-o the archive the input comes from, with --force" 1b-requant --force --type q8_0 -o f.tar f.tar
mkdir holder && cp f.gguf holder/m.gguf && cp -r p1/manifest.json holder/
check_exit 2 "-o a directory holding the input (a pack's look-alike), with --force" \
    1b-requant --force --type q4nx -o holder holder/m.gguf
[ "$(sha256sum f.gguf | cut -d' ' -f1)" = "${sum0%% *}" ] && [ -f holder/m.gguf ]
ok $? "  and the input survived every refusal"
out=$(1b-requant --type q8_0 -o o-q8_0.gguf f.gguf 2>&1); rc=$?
[ $rc -eq 2 ] && grep -q "exists (--force replaces it)" <<<"$out" && cmp -s o-q8_0.gguf rt-q8_0.gguf
ok $? "an existing output without --force: exit 2, kept ($out)"
1b-requant --force --type q4_0 -o o-q8_0.gguf f.gguf > /dev/null && cmp -s o-q8_0.gguf o-q4_0.gguf
ok $? "--force replaces it"
mkdir userdir && touch userdir/keep
check_exit 2 "--force does not replace a directory that is not a pack" 1b-requant --force --type q4nx -o userdir f.gguf
1b-requant --force --type q4nx -o p1 f.gguf > /dev/null && diff -r p1 p3 > /dev/null && [ -f userdir/keep ]
ok $? "--force replaces a pack with a pack"

# 5. failures leave nothing behind
hostile_models
check_exit 3 "a value beyond fp16's range in a matrix (q8_0 scale overflow): exit 3" \
    1b-requant --type q8_0 -o big-q8.gguf big.gguf
cp f.gguf nanm.gguf && poke nanm.gguf blk.1.ffn_up.weight '\x00\x00\xc0\x7f'
out=$(1b-requant --type q4nx -o nan-pack nanm.gguf 2>&1 >/dev/null); rc=$?
[ $rc -eq 3 ] && grep -q "blk.1.ffn_up.weight': row 0: quantise Q4NX: value 0 is nan" <<<"$out"
ok $? "a NaN in a matrix, to q4nx: exit 3 naming the tensor and row ($out)"
[ -z "$(ls -d big-q8* nan-pack* 2>/dev/null)" ]
ok $? "  neither leaves a file, a directory or a temporary behind ($(ls -d big-q8* nan-pack* 2>/dev/null))"
check_exit 3 "stories260K to q4nx (rows of 172: no tiles of 32)" \
    1b-requant --type q4nx -o s-pack "$SHARED/models/stories260K.gguf"
head -c 100000 f.gguf > cut.gguf
check_exit 3 "a truncated GGUF: exit 3" 1b-requant --type q8_0 -o c.gguf cut.gguf
check_exit 3 "a pack as input: exit 3" 1b-requant --type q8_0 -o c.gguf p1
check_exit 2 "an unknown type: exit 2" 1b-requant --type q7_k -o c.gguf f.gguf
[ -z "$(ls -d c.gguf* s-pack* 2>/dev/null)" ]
ok $? "  and nothing written"

# 6. progress on a terminal only
script -qec "1b-requant --type q8_0 -o tty.gguf f.gguf > tty.jsonl" /dev/null > tty.txt 2>&1
grep -q '1b-requant: 24/24 output_norm.weight F32 -> F32' tty.txt && [ "$(wc -l < tty.jsonl)" = 25 ]
ok $? "stderr a terminal: progress lines there, the records on stdout"
1b-requant --force --type q8_0 -o tty.gguf f.gguf > /dev/null 2> err.txt
[ ! -s err.txt ]; ok $? "stderr not a terminal: nothing on it"

# 7. a real model: SmolLM2 (Q4_1, Q8_0 and F32 tensors) to a pack
if [ -f "$SMOL" ]; then
    1b-requant --type q4nx -o smol "$SMOL" > smol.jsonl &&
        [ "$("$PY" "$CHECK" "$SMOL" smol smol.jsonl)" = "ok 272 tensors" ] &&
        1b-gen -m smol -d npu-sim < p.jsonl | jq -e '.tokens | length == 6' > /dev/null
    ok $? "SmolLM2-135M Q4_1 to a pack: checked by the oracle, runs on npu-sim"
else
    skip "SmolLM2 to a pack" "model missing (scripts/models smollm2)"
fi
