#!/usr/bin/env bash
# 1b-batchrep: the selftest (fingerprints and comparators on hand-made streams with known
# answers); in process on cpu and ref (N copies through the engine's barrier: one state, and
# the solo one); against canned replies that alternate between two answers (two states,
# counted as the field report counts them); readiness and bad replies; usage.
. "$(dirname "$0")/lib.sh"
. "$OB_TOP/tests/py/fixture_env.sh"
declare URL_batch URL_nolp  # set by name (printf -v), which shellcheck cannot see
plan 24
cd "$T" || exit 1
S=$SHARED/models/stories260K.gguf
FX=$OB_TOP/tests/fixtures/url
# the field report's probe; stories260K has no chat template, so it is sent as a plain prompt
PROBE="Explain in one paragraph why the sky appears blue."
one_line() { [ "$(wc -l < "$1")" -eq 1 ] && [ "$(cat "$1")" = "$2" ] || { sed 's/^/# got: /' "$1"; false; }; }

out=$(1b-batchrep --selftest); rc=$?
[ $rc -eq 0 ] && ! grep -q "^not ok" <<<"$out" && [ "$(grep -c '^ok' <<<"$out")" -ge 15 ]
ok $? "--selftest: $(grep -c '^ok' <<<"$out") checks of fingerprints and comparators" || grep -v '^ok' <<<"$out" | sed 's/^/# /'

# in process: the field report's probe, 4 copies x 3 rounds, against one solo request
1b-batchrep -m "$S" --prompt "$PROBE" --width 4 --rounds 3 --max-tokens 32 --vs-solo --json cpu.json > cpu.txt; rc=$?
[ $rc -eq 0 ] && jq -e '.states == 1 and .copies == 12 and .round_to_round == {"identical":8,"pairs":8}
    and .worst_abs_dlogp == 0 and .vs_solo.identical == 12 and (.per_round | all(.identical == 4))
    and .route == "cpu" and .state_list[0].tokens == 32' cpu.json > /dev/null
ok $? "cpu, width 4, 3 rounds: one state, 12/12 identical to the solo answer, 8/8 round to round"
grep -q "^verdict: repeatable (one state, the solo one)$" cpu.txt; ok $? "the table says so"
sed 's/^/# /' cpu.txt
1b-batchrep -m "$S" --width 8 --parallel 8 --rounds 2 --max-tokens 16 --prompt "Once upon a time" -q --json w8.json; rc=$?
[ $rc -eq 0 ] && jq -e '.states == 1 and .copies == 16' w8.json > /dev/null; ok $? "width 8, a plain prompt: one state"
1b-batchrep -m "$S" --prompt "$PROBE" -d ref -t 2 --width 2 --rounds 2 --max-tokens 16 --vs-solo -q --json ref.json; rc=$?
[ $rc -eq 0 ] && jq -e '.states == 1 and .route == "ref" and .vs_solo.identical == 4' ref.json > /dev/null
ok $? "ref, width 2: one state, the solo one"
1b-batchrep -m "$S" --prompt "$PROBE" --width 4 --rounds 2 --max-tokens 32 --parallel 1 -q --json p1.json; rc=$?
[ $rc -eq 0 ] && [ "$(jq -r '.state_list[0].fingerprint' p1.json)" = "$(jq -r '.state_list[0].fingerprint' cpu.json)" ]
ok $? "copies queued one at a time (--parallel 1) have the batched copies' fingerprint"
1b-batchrep -m "$S" --prompt "$PROBE" --width 4 --rounds 2 --max-tokens 32 --draft "$S" -q --json dr.json; rc=$?
[ $rc -eq 0 ] && jq -e '.states == 1' dr.json > /dev/null &&
    [ "$(jq -r '.state_list[0].fingerprint' dr.json)" = "$(jq -r '.state_list[0].fingerprint' cpu.json)" ]
ok $? "speculating with a draft model (the model itself): one state, the plain copies' fingerprint"

# a server that answers the same request A, A, B, A, A, ...: solo A; round 0 A and B (in the
# order the two requests arrived); round 1 A A
fixture_start batch "$FX/batch.json"
1b-batchrep --url "$URL_batch" --width 2 --rounds 2 --max-tokens 4 --top-logprobs 2 --vs-solo --json b.json > b.txt; rc=$?
[ $rc -eq 1 ] && jq -e '.states == 2 and .copies == 4 and .vs_solo.identical == 3
    and ([.per_round[].identical] == [1, 2]) and ([.per_round[].distinct] == [2, 1])
    and .round_to_round == {"identical": 1, "pairs": 2}
    and (.state_list | map(.copies) | sort) == [1, 3]' b.json > /dev/null
ok $? "two answers: 2 states, 3/4 identical to solo, 1/2 then 2/2 per round, 1/2 round to round (exit $rc)"
# B moves position 2 from -0.6077182 to -0.8577182 (float32) and changes token 3
w=$(jq '.worst_abs_dlogp' b.json)
awk -v w="$w" 'BEGIN { exit !(w > 0.2499 && w < 0.2501) }'
ok $? "worst |dlogp| in the mixture is the 0.25 at position 2 ($w), the changed token not compared"
jq -e '.vs_solo.same_token == {"min": 0.75, "median": 1, "max": 1}
       and (.vs_solo.mean_abs_dlogp.max > 0.0833 and .vs_solo.mean_abs_dlogp.max < 0.0834)' b.json > /dev/null
ok $? "vs solo: same-token share min 0.75, mean |dlogp| max 0.25/3"
grep -q "^verdict: not repeatable (more than one state)$" b.txt; ok $? "the table says not repeatable"
# every copy sent the same bytes
[ "$(jq -c 'select(.method == "POST") | .body' "$T/batch.log" | sort -u | wc -l)" -eq 1 ] &&
    [ "$(grep -c '"POST"' "$T/batch.log")" -eq 5 ] &&
    jq -e 'select(.method == "POST") | .body | .logprobs == true and .top_logprobs == 2 and .cache_prompt == false
           and .messages[0].content == "Explain in one paragraph why the sky appears blue."' "$T/batch.log" > /dev/null
ok $? "5 byte-identical requests (1 solo + 2 x 2), with logprobs and cache_prompt false"

# unreachable, unusable replies, usage
port=$(free_port)
check_exit 4 "nothing listening: exit 4" 1b-batchrep --url "http://127.0.0.1:$port" --wait 0 -q
fixture_start nolp "$FX/nolp.json"
out=$(1b-batchrep --url "$URL_nolp" --width 2 --rounds 1 --messages '[{"role":"user","content":"Why is the sky blue?"}]' -q 2>&1); rc=$?
[ $rc -eq 3 ] && grep -q "no log-probabilities" <<<"$out"; ok $? "a server without log-probabilities: exit 3 ($out)"
check_exit 2 "no route" 1b-batchrep --width 2
check_exit 2 "--url with -d" 1b-batchrep --url http://127.0.0.1:1 -d cpu
check_exit 2 "--messages that is not an array" 1b-batchrep -m "$S" --messages '{"role":"user"}'

# chat to a model without a chat template: the default probe and --messages are refused (exit
# 3, one line naming the model and the option that sends a plain prompt), before any copy runs;
# a model with one (1b-synth's llama-tiny: ChatML) takes the default chat probe
1b-batchrep -m "$S" --width 2 --rounds 1 --max-tokens 4 > out.txt 2> err.txt; rc=$?
1b-batchrep -m "$S" --width 2 --rounds 1 --max-tokens 4 --messages '[{"role":"user","content":"Hi"}]' > out2.txt 2> err2.txt; rc2=$?
[ $rc -eq 3 ] && [ $rc2 -eq 3 ] && [ ! -s out.txt ] && [ ! -s out2.txt ] &&
    one_line err.txt "1b-batchrep: $S: the model has no chat template; give a plain prompt (--prompt TEXT) instead of the default chat probe" &&
    one_line err2.txt "1b-batchrep: $S: the model has no chat template; give a plain prompt (--prompt TEXT) instead of --messages"
ok $? "the chat probe or --messages to a model without a chat template: exit 3 ($rc, $rc2), --prompt named"
1b-synth --preset llama-tiny -o llama.gguf
1b-batchrep -m llama.gguf --width 2 --rounds 1 --max-tokens 4 -q --json l.json; rc=$?
[ $rc -eq 0 ] && jq -e '.states == 1 and .request.messages[0].content == "'"$PROBE"'"' l.json > /dev/null
ok $? "the default chat probe on 1b-synth's llama-tiny (ChatML template): runs, one state (exit $rc)"

# outputs: a --json file that cannot be written is found before the measurement (here before
# the model is even opened); a failed write to standard output is exit 5 with one line
mkdir dir
1b-batchrep -m no-such-model.gguf --json dir > out.txt 2> err.txt; rc=$?
[ $rc -eq 5 ] && [ ! -s out.txt ] && one_line err.txt "1b-batchrep: dir: Is a directory"
ok $? "--json DIR: exit 5 at once, before the model is opened"
1b-batchrep --selftest > /dev/full 2> err.txt; rc=$?
[ $rc -eq 5 ] && one_line err.txt "1b-batchrep: stdout: No space left on device"
ok $? "--selftest > /dev/full: exit 5"
1b-batchrep -m "$S" --prompt "$PROBE" --width 2 --rounds 1 --max-tokens 4 > /dev/full 2> err.txt; rc=$?
[ $rc -eq 5 ] && one_line err.txt "1b-batchrep: stdout: No space left on device"
ok $? "the report to /dev/full: exit 5, one line"
1b-batchrep -m "$S" --prompt "$PROBE" --width 2 --rounds 1 --max-tokens 4 --json - > /dev/full 2> err.txt; rc=$?
[ $rc -eq 5 ] && one_line err.txt "1b-batchrep: stdout: write: No space left on device"
ok $? "--json - to /dev/full: exit 5, one line"
# NaN logits: every copy fails; the reason is reported
cp "$S" nan.gguf
off=$(1b-load --tensors nan.gguf | grep '"output_norm.weight"' | grep -o '"offset":[0-9]*' | cut -d: -f2)
printf '\x00\x00\xc0\x7f' | dd of=nan.gguf bs=1 seek="$off" conv=notrunc status=none
1b-batchrep -m nan.gguf --prompt "$PROBE" --width 3 --rounds 2 --max-tokens 4 > out.txt 2> err.txt; rc=$?
[ $rc -eq 5 ] && one_line err.txt "1b-batchrep: round 0 copy 0 did not finish: logit of token 0 is NaN"
ok $? "a model whose logits are NaN: exit 5 with the reason"
