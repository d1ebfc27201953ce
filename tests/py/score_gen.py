#!/usr/bin/env python3
"""score_gen.py — scoring equals generation, through 1b-serve (tests/t6016-serve-prompt-logprobs.sh).

  score_gen.py URL shape          prompt_logprobs' shape: [null, {id: {logprob, rank,
                                  decoded_token}}...], the prompt's token first, ranks, the
                                  alternatives = echo's top list
  score_gen.py URL chat           chat's prompt_logprobs (beside the choices) = those of the
                                  templated tokens (/tokenize) sent as a completion prompt
  score_gen.py URL equal MODE     MODE greedy or sampled: a completion generated with logprobs
                                  5, then prompt + completion scored (max_tokens 0) with
                                  prompt_logprobs 5 and with echo + logprobs 5: at every
                                  completion position the token's logprob, and each of the 5
                                  alternatives' ids and logprobs, are the generation's bits
  score_gen.py URL crowd          the scoring request sent alone, then among 7 concurrent other
                                  requests, then inside a batch of 3 prompts: its prompt_logprobs
                                  and echo are the same bytes every time, and so is a
                                  generation's answer

Exit 0 when every check holds; otherwise the first difference on stderr and exit 1.
Bits: a logprob is 1b's float32 written as the shortest decimal that reads back to it, so the
float32 of the parsed number is the value's bits; the checks compare those bits.
"""
import json
import struct
import sys
import threading
import urllib.request

URL = sys.argv[1]
PROMPT = [1, 400, 300, 42, 77, 5]        # token ids: the tokenizer plays no part
N = 5


def post(path, body):
    req = urllib.request.Request(URL + path, data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=120) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def completion(body):
    st, raw = post("/v1/completions", body)
    if st != 200:
        fail("HTTP %d for %s: %s" % (st, json.dumps(body)[:200], raw[:300]))
    return json.loads(raw)


def bits(x):
    return struct.unpack("<I", struct.pack("<f", x))[0]


def fail(msg):
    print(msg, file=sys.stderr)
    sys.exit(1)


def check(cond, msg):
    if not cond:
        fail(msg)


def sampling(mode):
    if mode == "greedy":
        return {"temperature": 0}
    return {"temperature": 0.9, "top_p": 0.95, "seed": 11}


def generate(mode, prompt=PROMPT, n=16):
    return completion(dict(prompt=prompt, max_tokens=n, logprobs=N, **sampling(mode)))


def score_body(ids):
    return {"prompt": ids, "max_tokens": 0, "prompt_logprobs": N, "echo": True, "logprobs": N}


def shape():
    a = completion({"prompt": PROMPT, "max_tokens": 0, "prompt_logprobs": 3, "echo": True,
                    "logprobs": 3})
    c = a["choices"][0]
    pl = c["prompt_logprobs"]
    check(len(pl) == len(PROMPT) and pl[0] is None, "prompt_logprobs: %d entries, first %r"
          % (len(pl), pl[0]))
    echo = c["logprobs"]["content"]
    for i in range(1, len(PROMPT)):
        e = pl[i]
        keys = list(e)
        check(keys[0] == str(PROMPT[i]), "position %d: the prompt's token %d is not first: %s"
              % (i, PROMPT[i], keys))
        mine = e[keys[0]]
        check(set(mine) == {"logprob", "rank", "decoded_token"}, "entry fields %s" % list(mine))
        check(bits(mine["logprob"]) == bits(echo[i]["logprob"]),
              "position %d: prompt_logprobs %r, echo %r" % (i, mine["logprob"], echo[i]["logprob"]))
        check(mine["decoded_token"] == echo[i]["token"], "decoded_token %r, echo's token %r"
              % (mine["decoded_token"], echo[i]["token"]))
        top = echo[i]["top_logprobs"]
        ranks = {t["id"]: k + 1 for k, t in enumerate(top)}
        if PROMPT[i] in ranks:
            check(mine["rank"] == ranks[PROMPT[i]] and len(keys) == 3,
                  "position %d: a token in the top list has its place as rank" % i)
        else:
            check(mine["rank"] > 3 and len(keys) == 4, "position %d: rank %d, %d keys"
                  % (i, mine["rank"], len(keys)))
        for t in top:
            if t["id"] != PROMPT[i]:
                x = e[str(t["id"])]
                check(x["rank"] == ranks[t["id"]] and bits(x["logprob"]) == bits(t["logprob"])
                      and x["decoded_token"] == t["token"],
                      "position %d: alternative %d differs from echo's" % (i, t["id"]))
    # 0 alternatives: the prompt's token alone; a one-token prompt: [null]
    a = completion({"prompt": PROMPT, "max_tokens": 0, "prompt_logprobs": 0})
    pl = a["choices"][0]["prompt_logprobs"]
    check(all(len(e) == 1 for e in pl[1:]) and "logprobs" in a["choices"][0]
          and a["choices"][0]["logprobs"] is None, "prompt_logprobs 0: one key per position")
    a = completion({"prompt": [7], "max_tokens": 2, "prompt_logprobs": 2})
    check(a["choices"][0]["prompt_logprobs"] == [None], "one token: [null]")
    # without it, no field
    a = completion({"prompt": PROMPT, "max_tokens": 1})
    check("prompt_logprobs" not in a["choices"][0], "prompt_logprobs written unasked")


def chat():
    msgs = [{"role": "user", "content": "Why is the sky blue?"}]
    st, raw = post("/v1/chat/completions", {"messages": msgs, "max_tokens": 1, "temperature": 0,
                                            "prompt_logprobs": 2,
                                            "chat_template_kwargs": {"enable_thinking": False}})
    check(st == 200, "chat: HTTP %d %s" % (st, raw[:200]))
    a = json.loads(raw)
    pl = a.get("prompt_logprobs")
    check(isinstance(pl, list) and len(pl) == a["usage"]["prompt_tokens"] and pl[0] is None
          and "prompt_logprobs" not in a["choices"][0], "chat: prompt_logprobs beside choices")
    st, raw = post("/tokenize", {"messages": msgs, "add_generation_prompt": True,
                                 "chat_template_kwargs": {"enable_thinking": False}})
    ids = json.loads(raw)["tokens"]
    c = completion({"prompt": ids, "max_tokens": 0, "prompt_logprobs": 2})["choices"][0]
    check(c["prompt_logprobs"] == pl, "chat's prompt_logprobs differ from those of its "
          "templated tokens sent as a completion prompt")


def equal(mode):
    g = generate(mode)["choices"][0]
    gl = g["logprobs"]["content"]
    ids = [t["id"] for t in gl]
    check(len(ids) == 16, "%s: %d tokens generated" % (mode, len(ids)))
    s = completion(score_body(PROMPT + ids))["choices"][0]
    pl = s["prompt_logprobs"]
    echo = s["logprobs"]["content"]
    n = len(PROMPT)
    check(len(pl) == n + len(ids) and len(echo) == n + len(ids), "scored lengths")
    for j, t in enumerate(gl):
        e = pl[n + j][str(t["id"])]
        check(bits(e["logprob"]) == bits(t["logprob"]),
              "%s: completion token %d (id %d): prompt_logprobs %r, generation %r"
              % (mode, j, t["id"], e["logprob"], t["logprob"]))
        check(bits(echo[n + j]["logprob"]) == bits(t["logprob"]),
              "%s: completion token %d: echo %r, generation %r"
              % (mode, j, echo[n + j]["logprob"], t["logprob"]))
        check(echo[n + j]["top_logprobs"] == t["top_logprobs"],
              "%s: token %d: echo's alternatives differ from the generation's" % (mode, j))
        for k, alt in enumerate(t["top_logprobs"]):
            x = pl[n + j].get(str(alt["id"]))
            check(x is not None and x["rank"] == k + 1 and bits(x["logprob"]) == bits(alt["logprob"]),
                  "%s: token %d: alternative %d (id %d) differs" % (mode, j, k, alt["id"]))
        if mode == "greedy":
            check(e["rank"] == 1, "greedy token %d has rank %d" % (j, e["rank"]))
        else:
            check(e["rank"] >= 1, "rank %d" % e["rank"])
    if mode == "sampled":
        check(any(pl[n + j][str(t)]["rank"] > 1 for j, t in enumerate(ids)),
              "sampled: every token was the argmax; the case proves nothing")


def crowd():
    ids = PROMPT + [t["id"] for t in generate("sampled")["choices"][0]["logprobs"]["content"]]
    body = score_body(ids)

    def key(choice):
        return json.dumps([choice["prompt_logprobs"], choice["logprobs"], choice["text"]])

    alone = key(completion(body)["choices"][0])
    gen_alone = json.dumps(generate("sampled", [1, 50, 60], 24)["choices"][0])
    others = [
        {"prompt": [1, 9, 8, 7], "max_tokens": 40, "temperature": 1, "seed": 5},
        {"prompt": [1, 300] * 20, "max_tokens": 0, "prompt_logprobs": 2},
        {"prompt": [[1, 2, 3], [1, 70]], "max_tokens": 30, "temperature": 0, "logprobs": 2},
        {"prompt": [1, 400, 300, 42], "max_tokens": 20, "echo": True, "logprobs": 1},
        {"prompt": [1, 11] * 30, "max_tokens": 10},
    ]
    got, errs = {}, []

    def run(name, b):
        try:
            got[name] = completion(b)
        except SystemExit:
            errs.append(name)

    for rnd in range(2):
        th = [threading.Thread(target=run, args=("o%d" % i, b)) for i, b in enumerate(others)]
        th.append(threading.Thread(target=run, args=("score", body)))
        th.append(threading.Thread(target=run, args=("gen", dict(
            prompt=[1, 50, 60], max_tokens=24, logprobs=N, **sampling("sampled")))))
        for t in th:
            t.start()
        for t in th:
            t.join()
        check(not errs, "a concurrent request failed: %s" % errs)
        check(key(got["score"]["choices"][0]) == alone,
              "round %d: the scores among 7 other requests differ from alone" % rnd)
        check(json.dumps(got["gen"]["choices"][0]) == gen_alone,
              "round %d: a generation among other requests differs from alone" % rnd)
    b = completion({"prompt": [[1, 9, 9, 9], ids, [1, 400]], "max_tokens": 0,
                    "prompt_logprobs": N, "echo": True, "logprobs": N})
    check(key(b["choices"][1]) == alone, "inside a batch of 3 prompts: the scores differ")


if __name__ == "__main__":
    what = sys.argv[2]
    if what == "shape":
        shape()
    elif what == "equal":
        equal(sys.argv[3])
    elif what == "chat":
        chat()
    elif what == "crowd":
        crowd()
    else:
        fail("unknown check %s" % what)
