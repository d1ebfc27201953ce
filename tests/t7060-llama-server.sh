#!/usr/bin/env bash
# The measuring tools against a real llama.cpp llama-server (optional: OB_LLAMA_SERVER names a
# llama-server binary built by hand; none is ever part of 1b). 1b-gen --url must read its
# replies whole (token ids, float32 logprobs that round-trip, usage counts), agree with 1b's own
# templating and tokenizer on the prompt, and hand tokens to 1b-logprobs and 1b-agree so that
# every position can be compared; 1b-batchrep --url must measure it. The distances to the
# float64 ref route of llama-server and of 1b's cpu route, on the same tokens, are printed.
# SmolLM2-135M first; then Gemma 3 270M (given 1b's built-in Gemma 3 turn format as its
# --chat-template-file, since the file has no template: 8 chat prompts x 64 tokens), where 1b's
# cpu route must be no further from float64 than llama-server is, in mean |dlogp| over the
# same 512 positions. llama-server runs Gemma with one slot, one request at a time: its
# answers then do not depend on what else it was batching, so the tokens and both distances
# are the same from run to run (with 4 slots they move: llama-server's mean |dlogp| from ref
# was 0.024 in one run and 0.027 in another, 1b cpu's on those tokens 0.026 and 0.025).
. "$(dirname "$0")/lib.sh"
. "$OB_TOP/tests/py/fixture_env.sh"
LS=${OB_LLAMA_SERVER:-}
M=$OB_TOP/.cache/models/SmolLM2-135M-Instruct.Q4_1.gguf
GM=$OB_TOP/.cache/models/gemma-3-270m-q4_k_m.gguf
if [ -z "$LS" ] || [ ! -x "$LS" ]; then
    plan 1
    skip "llama-server interoperability" "optional toolchain: set OB_LLAMA_SERVER to a llama-server binary"
    exit 0
fi
if [ ! -f "$M" ]; then
    plan 1
    skip "llama-server interoperability" "no SmolLM2 model: run scripts/models smollm2"
    exit 0
fi
plan 12
cd "$T" || exit 1
port=$(free_port)
"$LS" -m "$M" --host 127.0.0.1 --port "$port" -t 2 -c 4096 -np 4 > ls.log 2>&1 &
_fx_pids+=("$!")
URL=http://127.0.0.1:$port

cat > p.jsonl <<'JSON'
{"id":"q0","messages":[{"role":"user","content":"Explain why the sky is blue."}],"max_tokens":32,"top_logprobs":3}
{"id":"q1","messages":[{"role":"user","content":"Give three tips for learning to cook."}],"max_tokens":32,"top_logprobs":3}
{"id":"q2","messages":[{"role":"user","content":"What is a prime number?"}],"max_tokens":32,"top_logprobs":3}
{"id":"q3","prompt":"The quick brown fox","max_tokens":32,"top_logprobs":3}
JSON
1b-gen --url "$URL" -m smollm2 --wait 120 --parallel 4 < p.jsonl > ls.jsonl 2> gen.err; rc=$?
n=$(jq -s 'length' ls.jsonl 2>/dev/null)
[ $rc -eq 0 ] && [ "$n" = 4 ]; ok $? "1b-gen --url against llama-server: 4 result records (exit $rc)" || sed 's/^/# /' gen.err | head -5
jq -e -s 'all(.[]; (.tokens | length) == 32 and all(.tokens[]; (.id | type) == "number"
          and (.bits | test("^[0-9a-f]{8}$")) and (.top | length) == 3))' ls.jsonl > /dev/null
ok $? "every token has its id, float32 bits and 3 alternatives"
jq -e -s 'all(.[]; has("nonf32_values") | not)' ls.jsonl > /dev/null
ok $? "every logprob llama-server printed reads back as a float32 exactly"

1b-gen -d cpu -m "$M" < p.jsonl > cpu.jsonl
diff <(jq -c '[.id, .prompt_tokens]' ls.jsonl) <(jq -c '[.id, .prompt_tokens]' cpu.jsonl) > d.txt
ok $? "llama-server's prompt token counts equal 1b's templating and tokenizer" || sed 's/^/# /' d.txt

# llama-server's own tokens scored on 1b's routes: every position compared
1b-logprobs -d cpu -m "$M" < ls.jsonl > ls-cpu.jsonl && 1b-logprobs -d ref -m "$M" < ls.jsonl > ls-ref.jsonl
1b-agree --json a1.json ls.jsonl ls-cpu.jsonl > a1.txt; rc1=$?
1b-agree --json a2.json ls.jsonl ls-ref.jsonl > /dev/null; rc2=$?
1b-agree --json a3.json ls-cpu.jsonl ls-ref.jsonl > /dev/null; rc3=$?
jq -e '.pairs[0] | .aligned == 128 and .common == 128' a1.json > /dev/null && [ $rc1 -le 1 ] && [ $rc2 -le 1 ] && [ $rc3 -le 1 ]
ok $? "1b-logprobs scores llama-server's tokens; 1b-agree compares all 128 positions (exits $rc1 $rc2 $rc3)" || sed 's/^/# /' a1.txt
for f in a2 a3; do
    jq -r --arg f "$f" '.pairs[0] | "#   \(if $f == "a2" then "llama-server" else "1b cpu     " end) vs ref, same tokens: max |dlogp| \(.max_abs_dlogp) mean \(.mean_abs_dlogp) exact-bit \(.exact_bit_rate)"' "$f.json"
done

1b-agree cpu.jsonl ls.jsonl > cross.txt; rc=$?
[ $rc -le 1 ]; ok $? "1b cpu vs llama-server greedy runs compared (exit $rc)"
sed -n '/^pairs/,$p' cross.txt | sed 's/^/#   /'

1b-batchrep --url "$URL" -m smollm2 --width 4 --rounds 2 --max-tokens 24 --vs-solo --json br.json > br.txt; rc=$?
jq -e '.states >= 1 and .copies == 8' br.json > /dev/null && [ $rc -le 1 ]
ok $? "1b-batchrep --url measures llama-server at width 4 (exit $rc)" || sed 's/^/# /' br.txt | head -5
grep -E '^(states|verdict)' br.txt | sed 's/^/#   /'
kill "${_fx_pids[@]}" 2>/dev/null
wait 2>/dev/null
_fx_pids=()
grep -q "HTTP\|listening\|server is listening" ls.log; ok $? "llama-server ran on 127.0.0.1 (its log is kept in the test's scratch)"

# ---- Gemma 3 270M ----
if [ ! -f "$GM" ]; then
    for d in "Gemma 3: 1b-gen --url reads 8 records" "Gemma 3: prompt token counts" \
             "Gemma 3: every position scored" "Gemma 3: 1b cpu no further from ref than llama-server"; do
        skip "$d" "no Gemma 3 model: run scripts/models gemma3"
    done
    exit 0
fi
"$UNIT/chat" builtin gemma3 > gemma.jinja
port=$(free_port)
"$LS" -m "$GM" --host 127.0.0.1 --port "$port" -t 2 -c 4096 -np 1 --jinja \
    --chat-template-file gemma.jinja > gls.log 2>&1 &
_fx_pids+=("$!")
URL=http://127.0.0.1:$port
jq -c '.top_logprobs = 5' "$OB_TOP/contrib/prompts.jsonl" > g.jsonl
1b-gen --url "$URL" -m gemma3 --wait 120 --parallel 1 < g.jsonl > gls.jsonl 2> ggen.err; rc=$?
kill "${_fx_pids[@]}" 2>/dev/null
wait 2>/dev/null
jq -e -s 'length == 8 and all(.[]; (.tokens | length) == 64 and (has("nonf32_values") | not))' gls.jsonl > /dev/null &&
    [ $rc -eq 0 ]
ok $? "Gemma 3: 1b-gen --url reads 8 records of 64 tokens, every logprob a float32 (exit $rc)" ||
    sed 's/^/# /' ggen.err | head -5
jq -c '.max_tokens = 1' g.jsonl | 1b-gen -d cpu -m "$GM" > gcpu.jsonl
diff <(jq -c '[.id, .prompt_tokens]' gls.jsonl) <(jq -c '[.id, .prompt_tokens]' gcpu.jsonl) > gd.txt
ok $? "Gemma 3: llama-server's prompt token counts equal 1b's turn format and tokenizer" || sed 's/^/# /' gd.txt
1b-logprobs -d cpu -m "$GM" < gls.jsonl > gls-cpu.jsonl && 1b-logprobs -d ref -m "$GM" < gls.jsonl > gls-ref.jsonl
1b-agree --json g1.json gls.jsonl gls-ref.jsonl > /dev/null; rc1=$?
1b-agree --json g2.json gls-cpu.jsonl gls-ref.jsonl > /dev/null; rc2=$?
1b-agree --json g3.json gls-cpu.jsonl gls.jsonl > /dev/null; rc3=$?
jq -e '.pairs[0] | .aligned == 512 and .common == 512' g1.json g2.json > /dev/null &&
    [ $rc1 -le 1 ] && [ $rc2 -le 1 ] && [ $rc3 -le 1 ]
ok $? "Gemma 3: llama-server's 512 tokens scored on cpu and ref, every position compared"
for f in g1 g2 g3; do
    case $f in g1) w="llama-server vs ref" ;; g2) w="1b cpu vs ref      " ;; g3) w="1b cpu vs llama-srv" ;; esac
    jq -r --arg w "$w" '.pairs[0] | "#   \($w), same tokens: max |dlogp| \(.max_abs_dlogp) mean \(.mean_abs_dlogp)"' "$f.json"
done
jq -e -s '.[0].pairs[0].mean_abs_dlogp >= .[1].pairs[0].mean_abs_dlogp' g1.json g2.json > /dev/null
ok $? "Gemma 3: 1b cpu is no further from float64 than llama-server (mean |dlogp|, same tokens)"
