#!/usr/bin/env bash
# 1b-serve keeps the contract over HTTP: the same request through the server and through
# 1b-gen gives the same token ids and float32 bits (completions on stories260K, chat on a
# synthetic Qwen3 with and without thinking, sampled), every logprob on the wire reads back
# to its bits, a request alone and among 7 others at --parallel 8 gives the same bits,
# streaming gives what a whole answer gives, echo/forced_tokens scoring equals generation,
# the openai client works (models.retrieve too), and the operational endpoints answer.
. "$(dirname "$0")/lib.sh"
. "$OB_TOP/tests/py/serve_env.sh"
declare URL_qw PID_qw URL_rf PID_rf URL_st PID_st  # set by name (printf -v), which shellcheck cannot see
plan 26
S=$SHARED/models/stories260K.gguf
cd "$T" || exit 1
1b-synth --preset qwen3-small --vocab 8000 --tokenizer "$SHARED/models/qwen3-tokenizer/tokenizer.json" \
    -o q.gguf 2> /dev/null
serve_start st -m "$S" --parallel 8 -t 1 && serve_start qw -m q.gguf --parallel 8 -t 1 --alias qwen3-synth
ok $? "two servers up: stories260K at $URL_st, synthetic qwen3 at $URL_qw"

# operational endpoints
[ "$(curl -s "$URL_st/health")" = '{"status":"ok"}' ] && [ "$(curl -s "$URL_st/livez")" = '{"status":"alive"}' ]
ok $? "/health and /livez answer 200 on an idle server"
m=$(curl -s "$URL_st/v1/models")
jq -e '.object == "list" and (.data | length) == 1 and .data[0].id == "stories260K.gguf"
       and .data[0].name == "llama" and .data[0].object == "model"
       and .data[0].sha256 == "270cba1bd5109f42d03350f60406024560464db173c0e387d91f0426d3bd256d"' <<<"$m" > /dev/null
ok $? "/v1/models: id, name and sha256 of the model ($m)"
one=$(jq -c '.data[0]' <<<"$m")
[ "$(curl -s "$URL_st/v1/models/stories260K.gguf")" = "$one" ] && [ "$(curl -s "$URL_st/models/llama")" = "$one" ] &&
    [ "$(curl -s "$URL_qw/v1/models/qwen3-synth" | jq -r .id)" = qwen3-synth ] &&
    cx 404 null model_not_found "$URL_st/v1/models/nope" && grep -q "'nope'" "$T/cx.out" &&
    cx 404 null model_not_found "$URL_st/v1/models/" &&
    cx 405 - method_not_allowed "$URL_st/v1/models/stories260K.gguf" -d '{}'
ok $? "/v1/models/ID (and /models/ID): the list's model object for its id, file name or name, the alias; 404 model_not_found for another"

# server == 1b-gen, bit for bit
echo '{"id":"a","prompt":"Once upon a time","max_tokens":64,"top_logprobs":3}' | 1b-gen -m "$S" > g1.jsonl
sc_ok "/v1/completions greedy = 1b-gen (ids, float32 bits of logprobs and top 3, text, usage)" gen-match "$URL_st" /v1/completions \
    '{"model":"stories260K.gguf","prompt":"Once upon a time","max_tokens":64,"temperature":0,"logprobs":3}' g1.jsonl
echo '{"id":"c","messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Why is the sky blue?"}],"thinking":false,"max_tokens":48,"top_logprobs":5}' \
    | 1b-gen -m q.gguf > g2.jsonl
sc_ok "/v1/chat/completions on qwen3, thinking off = 1b-gen with thinking false" gen-match "$URL_qw" /v1/chat/completions \
    '{"messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Why is the sky blue?"}],"chat_template_kwargs":{"enable_thinking":false},"max_tokens":48,"temperature":0,"logprobs":true,"top_logprobs":5}' g2.jsonl
echo '{"id":"c","messages":[{"role":"user","content":[{"type":"text","text":"Hello"},{"type":"text","text":" there"}]}],"max_tokens":40,"top_logprobs":2,"stop":["ab"]}' \
    | jq -c '.messages[0].content = "Hello there"' | 1b-gen -m q.gguf > g3.jsonl
sc_ok "chat with thinking on (default), content parts, max_completion_tokens, stop = 1b-gen" gen-match "$URL_qw" /v1/chat/completions \
    '{"model":"qwen3-synth","messages":[{"role":"user","content":[{"type":"text","text":"Hello"},{"type":"text","text":" there"}]}],"max_completion_tokens":40,"temperature":0,"logprobs":true,"top_logprobs":2,"stop":["ab"]}' g3.jsonl
echo '{"id":"t","prompt":"Once upon a time","max_tokens":48,"temperature":0.9,"top_k":40,"top_p":0.95,"min_p":0.02,"seed":7,"top_logprobs":1}' \
    | 1b-gen -m "$S" > g4.jsonl
sc_ok "sampled (temperature 0.9, top_k, top_p, min_p, seed 7) = 1b-gen" gen-match "$URL_st" /v1/completions \
    '{"prompt":"Once upon a time","max_tokens":48,"temperature":0.9,"top_k":40,"top_p":0.95,"min_p":0.02,"seed":7,"logprobs":1}' g4.jsonl

# the ref route (float64 oracle) through the server = 1b-gen -d ref
serve_start rf -m "$S" -d ref -t 1 --parallel 2
echo '{"id":"r","prompt":"Once upon a time","max_tokens":24,"top_logprobs":2}' | 1b-gen -m "$S" -d ref > gr.jsonl
SC gen-match "$URL_rf" /v1/completions '{"prompt":"Once upon a time","max_tokens":24,"temperature":0,"logprobs":2}' gr.jsonl &&
    [ "$(curl -s "$URL_rf/v1/models" | jq -r '.data[0].route')" = ref ]
ok $? "-d ref: the server = 1b-gen -d ref"
kill -TERM "$PID_rf"

# many tokens: every logprob's float32 bits survive the JSON number
for i in $(seq 0 11); do
    printf '{"id":"b%d","prompt":"%s","max_tokens":80,"top_logprobs":5}\n' "$i" \
        "$(sed -n "$((i % 6 + 1))p" <<'EOF'
Once upon a time
The little dog ran
Lily wanted to
One day, Tim found a
The sun was
Mom said
EOF
)"
done > bodies.jsonl
1b-gen -m "$S" --parallel 4 < bodies.jsonl > gb.jsonl
jq -c '{prompt, max_tokens, temperature: 0, logprobs: .top_logprobs}' bodies.jsonl > wire.jsonl
sc_ok "12 requests x 80 tokens x (1 + 5 top): float32(JSON number) = 1b-gen's bits, every one" bits "$URL_st" /v1/completions wire.jsonl gb.jsonl
msgs='{"messages":[{"role":"user","content":"Tell me a story"}],"max_tokens":60,"temperature":0,"logprobs":true,"top_logprobs":4}'
for i in 1 2 3 4; do echo "$msgs" | jq -c ".messages[0].content += \" $i\""; done > chatw.jsonl
jq -c '{id: "q", messages, thinking: true, max_tokens, top_logprobs}' chatw.jsonl | 1b-gen -m q.gguf > gq.jsonl
sc_ok "the same on qwen3 chat (vocabulary 8000, multi-byte tokens)" bits "$URL_qw" /v1/chat/completions chatw.jsonl gq.jsonl

# alone vs among 7 others at --parallel 8
head -8 wire.jsonl > eight.jsonl
sc_ok "8 different requests alone, then all 8 at once (twice, half streaming): identical bits" concurrent "$URL_st" /v1/completions eight.jsonl --rounds 2 --stream-half
for i in 1 2 3 4 5 6 7 8; do echo "$msgs"; done > same.jsonl
sc_ok "8 identical chat requests alone and together: identical bits" concurrent "$URL_qw" /v1/chat/completions same.jsonl --rounds 2

# streaming = whole
sc_ok "/v1/completions stream = whole: text, tokens, bits, finish_reason (stop), usage" stream-match "$URL_st" /v1/completions '{"prompt":"Once upon a time","max_tokens":80,"temperature":0,"logprobs":2,"stop":[" Lily"," day"]}'
sc_ok "/v1/chat/completions stream = whole (qwen3: pieces of UTF-8 held until complete)" stream-match "$URL_qw" /v1/chat/completions '{"messages":[{"role":"user","content":"Hi"}],"max_tokens":120,"temperature":0,"logprobs":true,"top_logprobs":1}'
# stop strings that start inside the text of a token, on random multi-byte text
stops=$(jq -c '[.choices[0].message.content | explode | .[20:22], .[41:43] | implode]' \
    <<<"$(curl -s "$URL_qw/v1/chat/completions" -d '{"messages":[{"role":"user","content":"Hi"}],"max_tokens":120,"temperature":0}')")
sc_ok "stream = whole with stop strings taken from the middle of the text ($stops)" stream-match "$URL_qw" /v1/chat/completions "{\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}],\"max_tokens\":120,\"temperature\":0,\"logprobs\":true,\"stop\":$stops}"
sc_ok "stream = whole with echo" stream-match "$URL_st" /v1/completions '{"prompt":"Once upon a time","max_tokens":30,"temperature":0,"logprobs":1,"echo":true}'

# scoring: echo + max_tokens 0, and forced_tokens
sc_ok "echo + logprobs + max_tokens 0 scores the prompt; forced_tokens scores a continuation: = 1b-gen's bits" echo-match "$URL_st" g1.jsonl --top 3

# the openai package
if need_python openai; then
    sc_ok "openai client: models.list and retrieve, chat (logprobs), streaming, completions, errors" \
        openai "$URL_qw" qwen3-synth
else
    skip "openai client" "python package openai missing (scripts/setup)"
fi

# tokenize / detokenize
t=$(curl -s "$URL_st/tokenize" -d '{"content":"Once upon a time","add_special":true}')
[ "$(jq -c .tokens <<<"$t")" = "$(jq -c .prompt_ids g1.jsonl)" ]
ok $? "/tokenize with add_special = 1b-gen's prompt_ids ($t)"
d=$(curl -s "$URL_st/detokenize" -d "{\"tokens\":$(jq -c '[.tokens[].id]' g1.jsonl)}")
[ "$(jq -r .content <<<"$d")" = "$(jq -r .text g1.jsonl)" ] &&
    [ "$(curl -s "$URL_st/tokenize" -d '{"content":"Once","with_pieces":true}' | jq -c .tokens)" = '[{"id":403,"piece":" Once"}]' ]
ok $? "/detokenize gives the generated text back; with_pieces"
# vLLM's dialect beside llama-server's (lm-eval's remote tokenizer: t7090): "prompt" with
# add_special_tokens (default true) and special-token text read; "messages" rendered as
# /v1/chat/completions renders them; tokens and count; /detokenize's "prompt"; /tokenizer_info
t=$(curl -s "$URL_st/tokenize" -d '{"prompt":"Once upon a time"}')
c=$(curl -s "$URL_qw/tokenize" -d "$(jq -c '{messages, chat_template_kwargs: {enable_thinking: false}}' g2.jsonl)")
[ "$(jq -c .tokens <<<"$t")" = "$(jq -c .prompt_ids g1.jsonl)" ] && [ "$(jq .count <<<"$t")" = "$(jq '.prompt_ids | length' g1.jsonl)" ] &&
    [ "$(jq .max_model_len <<<"$t")" = 2048 ] &&
    [ "$(jq -c .tokens <<<"$c")" = "$(jq -c .prompt_ids g2.jsonl)" ] &&
    [ "$(curl -s "$URL_st/tokenize" -d '{"prompt":"</s>","add_special_tokens":false}' | jq -c .tokens)" = '[2]' ] &&
    [ "$(curl -s "$URL_st/tokenize" -d '{"content":"</s>"}' | jq '.tokens | length')" -gt 1 ] &&
    [ "$(curl -s "$URL_st/detokenize" -d '{"tokens":[403]}' | jq -c '[.prompt, .content]')" = '[" Once"," Once"]' ] &&
    cx 400 prompt invalid_value "$URL_st/tokenize" -d '{"content":"a","prompt":"b"}' &&
    cx 400 content missing_required_parameter "$URL_st/tokenize" -d '{"add_special_tokens":true}' &&
    cx 400 add_special invalid_value "$URL_st/tokenize" -d '{"prompt":"a","add_special":true,"add_special_tokens":true}' &&
    cx 400 messages invalid_value "$URL_st/tokenize" -d '{"messages":[{"role":"user","content":"Hi"}]}'
ok $? "/tokenize in vLLM's dialect: prompt = 1b-gen's prompt_ids, count, max_model_len, </s> read as EOS; messages = 1b-gen's chat prompt_ids; /detokenize's prompt; one input only; no template: 400"
i=$(curl -s "$URL_st/tokenizer_info")
jq -e '.bos_token == "<s>" and .eos_token == "</s>" and .pad_token == null and .add_bos_token == true
       and .model_max_length == 2048 and .chat_template == null' <<<"$i" > /dev/null &&
    [ "$(curl -s "$URL_qw/tokenizer_info" | jq -r .chat_template)" = "$(1b-load --meta tokenizer.chat_template q.gguf | jq -r .)" ]
ok $? "/tokenizer_info: BOS, EOS, no pad, the context, the chat template when the model has one ($i)"

# metrics and logs
mt=$(curl -s "$URL_st/metrics")
grep -q '^ob_requests_total{endpoint="/v1/completions",status="200"} [1-9]' <<<"$mt" &&
    grep -q '^ob_tokens_generated_total [1-9]' <<<"$mt" && grep -q '^ob_slots 8$' <<<"$mt" &&
    grep -q '^ob_slots_busy 0$' <<<"$mt" && grep -q '^ob_queue_depth 0$' <<<"$mt" &&
    grep -q '^ob_request_duration_seconds_count{endpoint="/v1/completions"} [1-9]' <<<"$mt" &&
    grep -q '^ob_time_to_first_token_seconds_bucket{endpoint="/v1/completions",le="+Inf"} [1-9]' <<<"$mt"
ok $? "/metrics: requests by endpoint and status, tokens, slots, queue, latency histograms"
n=$(grep -c '"path":"/v1/completions"' st.log)
badlog=$(jq -c 'select(.path == "/v1/completions") | select((.id and .status == 200 and .prompt_tokens > 0
       and (.completion_tokens | type) == "number" and .total_s >= 0 and .method == "POST") | not)' st.log)
[ -z "$badlog" ] && [ "$n" -ge 20 ]
ok $? "one JSON log line per request on stderr ($n for /v1/completions), with id, status, tokens, timings" ||
    head -3 <<<"$badlog" | sed 's/^/# /'
kill -TERM "$PID_st" "$PID_qw"
serve_wait_exit "$PID_st" 10; a=$RC; serve_wait_exit "$PID_qw" 10
[ "$a" = 0 ] && [ "$RC" = 0 ]
ok $? "SIGTERM: both exit 0"
