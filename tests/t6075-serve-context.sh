#!/usr/bin/env bash
# The end of the context (--ctx 256, stories260K): a prompt that fills it exactly is taken when
# nothing is generated (max_tokens 0), on 1b-serve (echo with logprobs: a score for every
# position after the first, the same bits as the same positions sent as a one-token prompt and
# forced_tokens) and in 1b-gen; a prompt of 257 tokens, or of 256 with max_tokens 1, is
# refused by both (400 context_length_exceeded, exit 3), since generating needs one more
# position; 255 with max_tokens 1 generates its one token. 1b-logprobs scores a record whose
# prompt and tokens fill the context, and refuses one more.
. "$(dirname "$0")/lib.sh"
. "$OB_TOP/tests/py/serve_env.sh"
declare URL_a PID_a  # set by name (printf -v), which shellcheck cannot see
plan 7
S=$SHARED/models/stories260K.gguf
cd "$T" || exit 1
serve_start a -m "$S" -t 1 --ctx 256
ok $? "server with --ctx 256 at $URL_a"
C=$URL_a/v1/completions

# ids.json N [MAX_TOKENS]: a completion body of N token ids (BOS, then ids of the vocabulary)
body() {
    python3 -c 'import json, sys
n, mt = int(sys.argv[1]), int(sys.argv[2])
ids = [1] + [(i * 37 + 11) % 500 + 10 for i in range(n - 1)]
print(json.dumps({"prompt": ids, "max_tokens": mt, "echo": True, "logprobs": 1, "temperature": 0}))' "$@"
}
body 256 0 > full.json
body 257 0 > over.json
body 256 1 > full1.json
body 255 1 > gen1.json

cx 200 - - "$C" --data-binary @full.json && cp "$T/cx.out" full.out &&
    jq -e '.usage.prompt_tokens == 256 and .usage.completion_tokens == 0
           and (.choices[0].logprobs.token_logprobs | length == 256 and .[0] == null
                and (.[1:] | all(type == "number")))' full.out > /dev/null
ok $? "256 prompt ids, max_tokens 0, echo: 200 with the logprobs of all 255 positions after the first"

jq -c '{prompt: .prompt[:1], forced_tokens: .prompt[1:], logprobs: 1}' full.json > forced.json
cx 200 - - "$C" --data-binary @forced.json &&
    [ "$(jq -c '.choices[0].logprobs.token_logprobs[1:]' full.out 2> /dev/null)" = \
      "$(jq -c '.choices[0].logprobs.token_logprobs' "$T/cx.out")" ]
ok $? "and the same values as its first id as the prompt and the other 255 as forced_tokens"

cx 400 - context_length_exceeded "$C" --data-binary @over.json &&
    cx 400 - context_length_exceeded "$C" --data-binary @full1.json &&
    grep -q 'one more is needed to generate' "$T/cx.out" &&
    cx 200 - - "$C" --data-binary @gen1.json && jq -e '.usage.completion_tokens == 1' "$T/cx.out" > /dev/null
ok $? "257 ids: 400; 256 ids with max_tokens 1: 400 (one more position is needed); 255 with max_tokens 1: one token"

# 1b-gen, the same prompts as records: taken (0) or refused (3)
verdicts=""
for f in full over full1 gen1; do
    jq -c '{id: "r", prompt, max_tokens}' $f.json > $f.jsonl
    1b-gen -m "$S" -t 1 --ctx 256 $f.jsonl > $f.gen 2> $f.err
    verdicts+="$? "
done
[ "$verdicts" = "0 3 3 0 " ] && jq -e '.prompt_tokens == 256 and (.tokens | length) == 0' full.gen > /dev/null &&
    ! grep -q 'one more' over.err && grep -q 'one more is needed' full1.err
ok $? "1b-gen --ctx 256: the same verdicts (exit $verdicts for 256+0, 257+0, 256+1, 255+1)" ||
    cat full.err over.err | sed 's/^/# /'

# 1b-logprobs: 128 prompt ids and 128 tokens fill the context; 129 tokens do not fit
jq -c '{id: "s", prompt: "x", prompt_ids: .prompt[:128], tokens: [.prompt[128:][] | {id: .}]}' full.json > fill.jsonl
jq -c '.tokens += [{id: 5}]' fill.jsonl > more.jsonl
1b-logprobs -m "$S" -t 1 --ctx 256 fill.jsonl > fill.out && jq -e '.tokens | length == 128' fill.out > /dev/null &&
    { 1b-logprobs -m "$S" -t 1 --ctx 256 more.jsonl > /dev/null 2> more.err; [ $? = 3 ]; }
ok $? "1b-logprobs --ctx 256: 128 + 128 scored, 128 + 129 refused (exit 3: $(cat more.err))"

kill -0 "$PID_a" 2> /dev/null && curl -sf "$URL_a/health" > /dev/null
ok $? "the server still serves"
