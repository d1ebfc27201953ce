#!/usr/bin/env bash
# 1b-logprobs: teacher forcing reproduces 1b-gen's log-probabilities bit for bit on the route
# that generated them; on -d ref it reports the distance at every position (and the cpu vs ref
# numbers are printed); records from a route without ids are scored by the ids their text has;
# plain text gets per-token log-probabilities, their sum and the perplexity; the client side of
# scoring through a server (forced_tokens, or an echoed prompt) against canned replies; bad
# records and exit statuses.
. "$(dirname "$0")/lib.sh"
. "$OB_TOP/tests/py/fixture_env.sh"
declare URL_score  # set by name (printf -v), which shellcheck cannot see
plan 32
cd "$T" || exit 1
S=$SHARED/models/stories260K.gguf
FX=$OB_TOP/tests/fixtures/url
cat > reqs.jsonl <<'EOF'
{"id":"r1","prompt":"Once upon a time","max_tokens":48,"top_logprobs":3}
{"id":"r2","prompt":"The little dog","max_tokens":32,"top_logprobs":5}
{"id":"r3","prompt":"Tim and Sue went to the park.","max_tokens":40,"top_logprobs":2}
{"id":"r4","prompt":"Lily had a red ball. She","max_tokens":24,"temperature":0.8,"seed":7,"top_logprobs":1}
{"id":"r5","prompt":"One day, a big bear","max_tokens":64,"top_logprobs":0}
EOF
1b-gen -m "$S" --parallel 2 < reqs.jsonl > gen.jsonl || exit 1

# the route that generated them: the same bits at every position, top lists included
1b-logprobs -m "$S" < gen.jsonl > cpu.jsonl; rc=$?
[ $rc -eq 0 ] && cmp -s <(jq -c .tokens gen.jsonl) <(jq -c .tokens cpu.jsonl)
ok $? "-d cpu on 1b-gen -d cpu records: every token, logprob bit and top list reproduced"
"$PY" "$OB_TOP/tests/py/fingerprint.py" --diff gen.jsonl cpu.jsonl; ok $? "fingerprints identical"
check_exit 0 "1b-agree: exact" 1b-agree gen.jsonl cpu.jsonl
1b-logprobs -m "$S" --parallel 1 -t 1 < gen.jsonl > cpu1.jsonl
check_same "--parallel 1 -t 1 writes the same records" cpu.jsonl cpu1.jsonl
jq -e -s 'all(.route == "cpu" and .scored_from.route == "cpu" and (.model.sha256 | length) == 64
           and .text != null and (.prompt_ids | length) > 0)' cpu.jsonl > /dev/null
ok $? "records keep their fields; route, model and scored_from say who scored what"

# the float64 oracle: the distance at every position
1b-logprobs -m "$S" -d ref < gen.jsonl > ref.jsonl; rc=$?
1b-agree --json fr.json gen.jsonl ref.jsonl > fr.txt; rc2=$?
n=$(jq -s '[.[].tokens | length] | add' gen.jsonl)
[ $rc -eq 0 ] && [ $rc2 -eq 1 ] && jq -e --argjson n "$n" '.pairs[0] | .aligned == .common and .aligned == $n
    and .max_abs_dlogp > 0 and .max_abs_dlogp < 0.05 and .exact_bit_rate < 1' fr.json > /dev/null
ok $? "-d ref: all $n positions compared (teacher-forced), differences small and not zero"
jq -r '.pairs[0] | "# cpu vs ref, teacher-forced: \(.aligned) positions, exact-bit \(.exact_bit_rate), max |dlogp| \(.max_abs_dlogp), mean \(.mean_abs_dlogp)"' fr.json
sed -n '/^pairs/,$p' fr.txt | sed 's/^/#   /'
1b-gen -m "$S" -d ref < reqs.jsonl > genref.jsonl
1b-agree --json gr.json gen.jsonl genref.jsonl > gr.txt; rc=$?
[ $rc -le 1 ] && jq -e '.pairs[0].records == 5 and .pairs[0].aligned > 0' gr.json > /dev/null
ok $? "cpu vs ref generations: 1b-agree runs and reports (exit $rc)"
jq -r '.pairs[0] | "# cpu vs ref, generated: \(.aligned) aligned, \(.common) common, match \(.token_match), exact-bit \(.exact_bit_rate), max |dlogp| \(.max_abs_dlogp), mean \(.mean_abs_dlogp), diverged records \(.diverged_records)"' gr.json
sed -n '/^pairs/,$p' gr.txt | sed 's/^/#   /'

# records from a route that reports no ids (and no prompt_ids): ids from the text
jq -c 'del(.prompt_ids) | .tokens |= map(del(.id) | .top |= map(del(.id)))' gen.jsonl > noid.jsonl
1b-logprobs -m "$S" < noid.jsonl > noid-scored.jsonl 2> err.txt; rc=$?
[ $rc -eq 0 ] && cmp -s <(jq -c .tokens gen.jsonl) <(jq -c .tokens noid-scored.jsonl)
ok $? "without ids or prompt_ids: re-tokenized prompt, ids found from the token bytes, same bits"
jq -e -s 'all(.ids_from_text == true)' noid-scored.jsonl > /dev/null && [ "$(grep -c "the tokens carry no ids" err.txt)" -eq 5 ]
ok $? "and each record says so (ids_from_text, and on standard error)"

# a record generated without log-probabilities gets them
echo '{"id":"n","prompt":"Once upon a time","max_tokens":8,"logprobs":false}' | 1b-gen -m "$S" > nolp.jsonl
1b-logprobs -m "$S" --top-logprobs 2 < nolp.jsonl > nolp-scored.jsonl
jq -e '(.tokens | length) == 8 and all(.tokens[]; has("logprob") and has("bits") and (.top | length) == 2)' nolp-scored.jsonl > /dev/null
ok $? "tokens without logprobs are scored (--top-logprobs 2)"

# plain text: raw lines and {"id","text"} records
printf '%s\n' 'Once upon a time, there was a little girl named Lily.' '{"id":"t2","text":"The cat sat on the mat."}' > text.txt
1b-logprobs -m "$S" --text < text.txt > text.jsonl; rc=$?
[ $rc -eq 0 ] && [ "$(jq -r .id text.jsonl | tr '\n' ' ')" = "1 t2 " ] &&
    jq -e 'all(.tokens[]; has("logprob")) and .n_tokens == (.tokens | length) and .n_tokens > 5
           and .prompt_ids == [1]
           and ((.logprob_sum - ([.tokens[].logprob] | add)) | fabs) < 1e-5
           and ((.perplexity - ((-.logprob_sum / .n_tokens) | exp)) | fabs) < 1e-9 * .perplexity' text.jsonl > /dev/null
ok $? "--text: every token after BOS scored; sum, mean and perplexity consistent"
jq -r '"# --text \(.id): \(.n_tokens) tokens, perplexity \(.perplexity)"' text.jsonl
1b-logprobs -m "$S" -d ref --text < text.txt > text-ref.jsonl
paste <(jq .perplexity text.jsonl) <(jq .perplexity text-ref.jsonl) | awk '{ d = ($1 - $2) / $2; if (d < 0) d = -d; if (d > 0.01) bad = 1 } END { exit bad }'
ok $? "--text on ref: perplexities within 1% of cpu's"
check_exit 0 "--text records compare with 1b-agree (cpu vs cpu)" 1b-agree text.jsonl text.jsonl

# records that cannot be scored
head -2 gen.jsonl > some.jsonl
echo '{"id":"e","tokens":[],"error":"HTTP 500: slot crashed"}' >> some.jsonl
tail -1 gen.jsonl >> some.jsonl
1b-logprobs -m "$S" < some.jsonl > out.jsonl 2> err.txt; rc=$?
[ $rc -eq 3 ] && [ "$(jq -r .id out.jsonl | tr '\n' ' ')" = "r1 r2 " ] && grep -q -- "-:3: id e: the record is a failed request" err.txt
ok $? "a failed request's record: exit 3 after the records before it ($(head -1 err.txt))"
1b-logprobs -m "$S" --keep-going < some.jsonl > out.jsonl 2> /dev/null; rc=$?
[ $rc -eq 3 ] && [ "$(jq -r .id out.jsonl | tr '\n' ' ')" = "r1 r2 r5 " ]; ok $? "--keep-going scores the rest, exit 3"
echo '{"id":"v","prompt":"Hi","tokens":[{"text":"\u00e9\u00e9\u00e9zz"}]}' > notok.jsonl
out=$(1b-logprobs -m "$S" notok.jsonl 2>&1); rc=$?
[ $rc -eq 3 ] && grep -q "is not one token of this vocabulary" <<<"$out"; ok $? "a token text that is no token: exit 3 ($out)"
check_exit 3 "a record with neither prompt_ids nor a prompt" sh -c "echo '{\"id\":\"w\",\"tokens\":[{\"id\":5}]}' | 1b-logprobs -m '$S'"
check_exit 2 "no model and no --url" 1b-logprobs < gen.jsonl

# scoring through a server, against a canned reply that scores ids 11 1052 572
jq '{health: [{"status": 200, "body": {"status": "ok"}}], models: .models,
     completions: [.completions[1] | .match = ""]}' "$FX/llama.json" > score.json
fixture_start score score.json
echo '{"id":"s","prompt_ids":[1,2,3],"tokens":[{"id":11},{"id":1052},{"id":572}],"top_logprobs":2}' > s.jsonl
1b-logprobs --url "$URL_score" < s.jsonl > s-out.jsonl; rc=$?
[ $rc -eq 0 ] && jq -e '.route | startswith("http://127.0.0.1:")' s-out.jsonl > /dev/null &&
    [ "$(jq -c '[.tokens[] | [.id, .bits, (.top | length)]]' s-out.jsonl)" = '[[11,"bd020d3b",2],[1052,"be000000",2],[572,"bb800000",2]]' ] &&
    jq -e 'select(.method == "POST") | .path == "/v1/completions" and .body.prompt == [1,2,3]
           and .body.forced_tokens == [11,1052,572] and .body.max_tokens == 0 and .body.echo == false
           and .body.logprobs == 2' "$T/score.log" > /dev/null
ok $? "--url: prompt ids and forced_tokens sent; the reply's float32 bits become the tokens"
1b-logprobs --url "$URL_score" --wire echo < s.jsonl > s-echo.jsonl; rc=$?
[ $rc -eq 0 ] && cmp -s <(jq -c .tokens s-out.jsonl) <(jq -c .tokens s-echo.jsonl) &&
    jq -s -e '[.[] | select(.method == "POST")] | .[-1].body | .prompt == [1,2,3,11,1052,572] and .echo == true
              and (has("forced_tokens") | not)' "$T/score.log" > /dev/null
ok $? "--wire echo: the tokens appended to an echoed prompt, the last ones taken"
echo '{"id":"m","prompt_ids":[1,2,3],"tokens":[{"id":11},{"id":1052},{"id":999}]}' > m.jsonl
out=$(1b-logprobs --url "$URL_score" < m.jsonl 2>&1); rc=$?
[ $rc -eq 3 ] && grep -q "is id 572, not the forced 999" <<<"$out"; ok $? "a reply that scored other tokens: exit 3 ($out)"

# every failure: one line naming the input and the problem, and the documented status
one_line() { [ "$(wc -l < "$1")" -eq 1 ] && [ "$(cat "$1")" = "$2" ] || { sed 's/^/# got: /' "$1"; false; }; }
head -1 gen.jsonl > one.jsonl
bad=0
while IFS='|' read -r what filter want; do
    jq -c "$filter" one.jsonl > bad.jsonl
    1b-logprobs -m "$S" bad.jsonl > out.jsonl 2> err.txt; rc=$?
    { [ $rc -eq 3 ] && [ ! -s out.jsonl ] && one_line err.txt "1b-logprobs: bad.jsonl:1: id r1: $want"; } || { echo "# $what: exit $rc"; bad=1; }
done <<'EOF'
prompt_ids a string|.prompt_ids = "1 2 3"|prompt_ids is not a non-empty array of token ids
prompt_ids empty|.prompt_ids = []|prompt_ids is not a non-empty array of token ids
prompt_ids with a token out of the vocabulary|.prompt_ids = [1, 99999]|prompt_ids[1] is not a token id of this model
top_logprobs 50|.top_logprobs = 50|top_logprobs is not an integer in [0, 20]
top_logprobs -1|.top_logprobs = -1|top_logprobs is not an integer in [0, 20]
top_logprobs 2.5|.top_logprobs = 2.5|top_logprobs is not an integer in [0, 20]
top_logprobs a string|.top_logprobs = "3"|top_logprobs is not an integer in [0, 20]
EOF
ok $bad "a malformed prompt_ids or top_logprobs is refused with one line, exit 3 (never ignored)"
# a record with chat messages and no prompt_ids, for a model without a chat template: refused
# (its messages are not joined as plain text), the records before it written
{ sed -n 1p gen.jsonl; sed -n 3p gen.jsonl | jq -c 'del(.prompt_ids, .prompt) |
    .messages = [{"role":"user","content":"Tim and Sue went to the park."}]'; sed -n 2p gen.jsonl; } > chat.jsonl
1b-logprobs -m "$S" chat.jsonl > out.jsonl 2> err.txt; rc=$?
[ $rc -eq 3 ] && [ "$(jq -r .id out.jsonl | tr '\n' ' ')" = "r1 " ] &&
    one_line err.txt "1b-logprobs: chat.jsonl:2: id r3: the model has no chat template; send a plain prompt instead"
ok $? "messages without prompt_ids on a model without a chat template: exit 3, one line, r1 written"
1b-logprobs -m "$S" --keep-going chat.jsonl > out.jsonl 2> /dev/null; rc=$?
[ $rc -eq 3 ] && [ "$(jq -r .id out.jsonl | tr '\n' ' ')" = "r1 r2 " ]
ok $? "--keep-going scores the records after it, exit 3"
jq -c '.top_logprobs = 50' one.jsonl | 1b-logprobs -m "$S" --top-logprobs 2 > out.jsonl; rc=$?
[ $rc -eq 0 ] && jq -e 'all(.tokens[]; (.top | length) == 2)' out.jsonl > /dev/null
ok $? "--top-logprobs overrides the record's top_logprobs"
printf 'Once upon a time\0 there was\n' > nul.txt
1b-logprobs -m "$S" --text nul.txt > out.jsonl 2> err.txt; rc=$?
[ $rc -eq 3 ] && [ ! -s out.jsonl ] && one_line err.txt "1b-logprobs: nul.txt:1: a NUL byte at byte 17 of the line"
ok $? "--text: a line with a NUL byte is refused, not cut at it"
mkdir dir
1b-logprobs -m "$S" dir > out.jsonl 2> err.txt; rc=$?
[ $rc -eq 3 ] && one_line err.txt "1b-logprobs: dir: is a directory"
ok $? "a directory operand: exit 3, one line"
1b-logprobs -m "$S" --keep-going dir one.jsonl > out.jsonl 2> err.txt; rc=$?
[ $rc -eq 3 ] && [ "$(jq -r .id out.jsonl)" = r1 ]
ok $? "--keep-going goes past it to the next operand, exit 3"
1b-logprobs -m "$S" one.jsonl > /dev/full 2> err.txt; rc=$?
[ $rc -eq 5 ] && one_line err.txt "1b-logprobs: stdout: write: No space left on device"
ok $? "a write error on stdout: exit 5, one line"

# a model with one non-finite weight (both accepted by 1b-load): scoring fails with the
# reason, once per record, exit 5 (it used to free the job twice and abort)
hostile_models
for m in nan big; do
    1b-logprobs -m $m.gguf --text text.txt > out.jsonl 2> err.txt; rc=$?
    [ $rc -eq 5 ] && [ ! -s out.jsonl ] && [ "$(wc -l < err.txt)" -eq 1 ] && grep -q "^1b-logprobs: text.txt:1: id 1: logit of token 0 is " err.txt
    ok $? "--text on $m.gguf: exit 5, one line ($(head -1 err.txt))"
done
1b-logprobs -m nan.gguf --keep-going gen.jsonl > out.jsonl 2> err.txt; rc=$?
[ $rc -eq 5 ] && [ ! -s out.jsonl ] && [ "$(grep -c 'logit of token 0 is NaN' err.txt)" -eq 5 ]
ok $? "records on nan.gguf with --keep-going: each reported once, exit 5"
