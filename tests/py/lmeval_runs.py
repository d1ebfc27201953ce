"""lmeval_runs.py — lm-eval (the real harness, from PyPI) against a running 1b-serve.

    python lmeval_runs.py URL TASK_DIR OUT_DIR

Runs the project's own tasks (tests/data/lmeval: ob_mc, loglikelihood requests; ob_gen,
generate_until) through lm-eval's local-completions model with its remote tokenizer (the
server's /tokenizer_info, /tokenize and /detokenize; no tokenizer files), at batch_size 1 and 8
and num_concurrent 1 and 8, in one process (lm-eval's import costs more than an evaluation).
Writes OUT_DIR/run-B-C.json per run: every sample's arguments and responses, as lm-eval logged
them, in doc order. Writes OUT_DIR/forced.jsonl: for every loglikelihood request, the context
and continuation as lm-eval's own _encode_pair tokenizes them, as records for 1b-logprobs
(prompt_ids, tokens), with lm-eval's logged loglikelihood beside them. Exit 0 when every run
finished; the comparisons are the shell test's (tests/t7090-lm-eval.sh).
"""
import json
import logging
import os
import sys

os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
logging.disable(logging.WARNING)

import lm_eval  # noqa: E402
from lm_eval.api.registry import get_model  # noqa: E402
from lm_eval.tasks import TaskManager  # noqa: E402

url, task_dir, out_dir = sys.argv[1], sys.argv[2], os.path.abspath(sys.argv[3])
os.chdir(task_dir)                     # the tasks name their data files relative to it
base = url + "/v1/completions"
tm = TaskManager(include_path=".")
lm_obj = None

for bs in (1, 8):
    for nc in (1, 8):
        lm_obj = get_model("local-completions")(
            model="stories260K.gguf", base_url=base, tokenizer_backend="remote",
            num_concurrent=nc, max_retries=1, batch_size=bs)
        res = lm_eval.simple_evaluate(model=lm_obj, tasks=["ob_mc", "ob_gen"], task_manager=tm,
                                      log_samples=True, batch_size=bs)
        samples = {t: [{"doc_id": s["doc_id"], "arguments": s["arguments"],
                        "resps": s["resps"]}
                       for s in sorted(res["samples"][t], key=lambda s: s["doc_id"])]
                   for t in ("ob_mc", "ob_gen")}
        with open(os.path.join(out_dir, "run-%d-%d.json" % (bs, nc)), "w") as f:
            json.dump(samples, f, indent=1, sort_keys=True)

# the tokens lm-eval sent for each loglikelihood request, tokenized by its own code
with open(os.path.join(out_dir, "forced.jsonl"), "w") as f:
    for s in samples["ob_mc"]:
        # arguments: (context, continuation) per choice; resps: [(loglikelihood, is_greedy)]
        for k, (args, resp) in enumerate(zip(s["arguments"], s["resps"])):
            ctx, cont = lm_obj._encode_pair(args[0], args[1])
            f.write(json.dumps({"id": "%d-%d" % (s["doc_id"], k), "prompt_ids": ctx,
                                "tokens": [{"id": t} for t in cont],
                                "lm_eval_loglikelihood": repr(resp[0][0])}) + "\n")
