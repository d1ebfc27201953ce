#!/usr/bin/env bash
# The measuring tools against a real llama.cpp llama-server (optional: OB_LLAMA_SERVER names a
# llama-server binary built by hand; none is ever part of 1b). 1b-gen --url must read its
# replies whole (token ids, float32 logprobs that round-trip, usage counts), agree with 1b's own
# templating and tokenizer on the prompt, and hand tokens to 1b-logprobs and 1b-agree so that
# every position can be compared; 1b-batchrep --url must measure it. The distances to the
# float64 ref route of llama-server and of 1b's cpu route, on the same tokens, are printed.
. "$(dirname "$0")/lib.sh"
. "$OB_TOP/tests/py/fixture_env.sh"
LS=${OB_LLAMA_SERVER:-}
M=$OB_TOP/.cache/models/SmolLM2-135M-Instruct.Q4_1.gguf
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
plan 8
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
jq -e -s 'all(.[]; .nonf32_values == 0)' ls.jsonl > /dev/null
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
grep -q "HTTP\|listening\|server is listening" ls.log; ok $? "llama-server ran on 127.0.0.1 (its log is kept in the test's scratch)"
