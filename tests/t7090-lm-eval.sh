#!/usr/bin/env bash
# lm-eval (EleutherAI's harness, pinned from PyPI by scripts/setup) as a user runs it against
# 1b-serve: --model local-completions with its remote tokenizer (no tokenizer files: the
# server's /tokenizer_info, /tokenize and /detokenize), on the project's own tasks
# (tests/data/lmeval: a multiple-choice loglikelihood task and a generate_until task, no
# network), at batch_size 1 and 8 (batch 8 sends "prompt" as an array of token lists) and
# num_concurrent 1 and 8. Every logged sample (loglikelihoods, greedy flags, generations) is
# the same in the four runs, and every loglikelihood lm-eval logged is the sum of the very
# float32 values 1b-logprobs gives for the tokens lm-eval's own code sent.
. "$(dirname "$0")/lib.sh"
. "$OB_TOP/tests/py/serve_env.sh"
declare URL_a  # set by name (printf -v), which shellcheck cannot see
plan 4
cd "$T" || exit 1
if ! need_python lm_eval; then
    for i in 1 2 3 4; do skip "lm-eval check $i" "lm_eval not installed (scripts/setup)"; done
    exit 0
fi
S=$SHARED/models/stories260K.gguf
serve_start a -m "$S" -t 1 --parallel 8
ok $? "server at $URL_a"

mkdir out
HF_HOME=$T/hf "$PY" "$OB_TOP/tests/py/lmeval_runs.py" "$URL_a" "$OB_TOP/tests/data/lmeval" out > lmeval.log 2>&1
ok $? "lm-eval: ob_mc and ob_gen at batch_size 1 and 8, num_concurrent 1 and 8" ||
    grep -v 'it/s]' lmeval.log | tail -15 | sed 's/^/# /'

bad=""
for r in 1-8 8-1 8-8; do
    cmp -s out/run-1-1.json "out/run-$r.json" || bad="$bad $r"
done
[ -z "$bad" ] && [ "$(jq '.ob_mc | length' out/run-1-1.json)" = 10 ] && [ "$(jq '.ob_gen | length' out/run-1-1.json)" = 8 ]
ok $? "every sample identical at batch_size/num_concurrent 1/1, 1/8, 8/1, 8/8 (10 + 8 samples)${bad:+: differ:$bad}" ||
    for r in $bad; do diff out/run-1-1.json "out/run-$r.json" | head -10 | sed 's/^/# /'; done

# the same tokens scored by 1b-logprobs in process: the server writes each float32 as the
# decimal of its exact double value, which lm-eval reads back exactly and sums in order; so the
# same sum of 1b-logprobs' values taken from their bits ("bits": the float32 pattern) means
# the same float32 bits, token for token
1b-logprobs -m "$S" -t 1 out/forced.jsonl > scored.jsonl 2> scored.err &&
"$PY" - out/forced.jsonl scored.jsonl > sums.txt <<'EOF'
import json, struct, sys
want = [json.loads(l) for l in open(sys.argv[1])]
got = [json.loads(l) for l in open(sys.argv[2])]
assert len(want) == len(got) == 40, (len(want), len(got))
bad = 0
for w, g in zip(want, got):
    s = sum(struct.unpack(">f", bytes.fromhex(t["bits"]))[0] for t in g["tokens"])
    if w["id"] != g["id"] or repr(s) != w["lm_eval_loglikelihood"]:
        bad += 1
        print("# %s: lm-eval %s, 1b-logprobs %r" % (w["id"], w["lm_eval_loglikelihood"], s))
print("%d of %d differ" % (bad, len(want)))
sys.exit(bad != 0)
EOF
ok $? "every loglikelihood lm-eval logged is the sum of 1b-logprobs' values for the same tokens ($(tail -1 sums.txt))" ||
    { head -5 sums.txt; head -3 scored.err; } | sed 's/^/# /'
