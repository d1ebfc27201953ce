#!/usr/bin/env python3
"""Client-side checks of 1b-serve for the tests/t60*-serve*.sh scripts.

Each subcommand is one check: it talks to a running server, prints what it saw (and why it
failed) and exits 0 when the check holds, 1 when it does not. Clients used: requests,
http.client, raw sockets (slow and vanishing clients) and the openai package.

Fingerprints compare float32 bits: a logprob on the wire is a JSON number; float32(number)
must be exactly the bit pattern 1b-gen printed for the same token.
"""
import argparse
import http.client
import json
import socket
import struct
import sys
import threading
import time
import urllib.parse

import requests


def f32hex(x):
    """The float32 bits of a JSON number (read as a double, rounded to float32)."""
    if x is None:
        return None
    if isinstance(x, str):
        x = float(x.replace("Infinity", "inf"))
    return struct.pack(">f", x).hex()


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def post(url, path, body, headers=None, timeout=120):
    return requests.post(url + path, json=body, headers=headers or {}, timeout=timeout)


def entries_fp(entries):
    """content-style logprob entries -> [(id, bits, bytes, [(id, bits)])]"""
    return [(e["id"], f32hex(e["logprob"]), tuple(e["bytes"]),
             tuple((t["id"], f32hex(t["logprob"])) for t in e.get("top_logprobs", [])))
            for e in entries]


def gen_fp(rec):
    """a 1b-gen result record -> the same shape"""
    return [(t["id"], t["bits"], tuple(t["bytes"]),
             tuple((x["id"], x["bits"]) for x in t.get("top", [])))
            for t in rec["tokens"]]


def choice_entries(resp):
    ch = resp["choices"][0]
    lp = ch.get("logprobs")
    if lp is None:
        return []
    return lp["content"]


def choice_text(resp):
    ch = resp["choices"][0]
    return ch["message"]["content"] if "message" in ch else ch["text"]


def sse(url, path, body, headers=None, raw=False):
    """POST with stream: the list of parsed data events (and whether [DONE] came last)."""
    r = requests.post(url + path, json=body, headers=headers or {}, stream=True, timeout=120)
    if r.status_code != 200:
        fail(f"stream status {r.status_code}: {r.text[:300]}")
    if not r.headers.get("Content-Type", "").startswith("text/event-stream"):
        fail("stream Content-Type " + r.headers.get("Content-Type", ""))
    events, done, buf = [], False, b""
    for chunk in r.iter_content(chunk_size=None):
        buf += chunk
        while b"\n\n" in buf:
            ev, buf = buf.split(b"\n\n", 1)
            line = ev.decode("utf-8")
            if not line.startswith("data: "):
                fail("event without 'data: ': " + line[:100])
            data = line[6:]
            if done:
                fail("event after [DONE]")
            if data == "[DONE]":
                done = True
            else:
                events.append(json.loads(data))
    if buf.strip():
        fail("trailing bytes after the last event: %r" % buf[:100])
    return events, done


def stream_collect(events, chat):
    """text, logprob entries, finish_reason, usage of a stream"""
    text, entries, finish, usage = "", [], None, None
    for ev in events:
        if "error" in ev:
            fail("error event: " + json.dumps(ev))
        if ev.get("usage"):
            usage = ev["usage"]
        for ch in ev["choices"]:
            if chat:
                text += ch["delta"].get("content", "") or ""
            else:
                text += ch.get("text", "")
            lp = ch.get("logprobs")
            if lp:
                entries += lp["content"]
            if ch.get("finish_reason"):
                finish = ch["finish_reason"]
    return text, entries, finish, usage


# ---- checks ------------------------------------------------------------------------------------

def cmd_gen_match(a):
    """A request through the server equals the 1b-gen record of the same request, bit for bit."""
    body = json.loads(a.body)
    rec = json.loads(open(a.gen).readline())
    r = post(a.url, a.path, body)
    if r.status_code != 200:
        fail(f"status {r.status_code}: {r.text[:300]}")
    resp = r.json()
    got, want = entries_fp(choice_entries(resp)), gen_fp(rec)
    if len(got) != len(want):
        fail(f"{len(got)} tokens from the server, {len(want)} from 1b-gen")
    for i, (g, w) in enumerate(zip(got, want)):
        if g != w:
            fail(f"token {i} differs: server {g} 1b-gen {w}")
    if choice_text(resp) != rec["text"]:
        fail(f"text differs: {choice_text(resp)!r} vs {rec['text']!r}")
    if resp["choices"][0]["finish_reason"] != rec["finish_reason"]:
        fail("finish_reason %s vs %s" % (resp["choices"][0]["finish_reason"], rec["finish_reason"]))
    u = resp["usage"]
    if u["prompt_tokens"] != rec["prompt_tokens"] or u["completion_tokens"] != rec["completion_tokens"] \
            or u["total_tokens"] != u["prompt_tokens"] + u["completion_tokens"]:
        fail(f"usage {u} vs prompt {rec['prompt_tokens']} completion {rec['completion_tokens']}")
    # legacy completions logprobs agree with the content entries
    lp = resp["choices"][0]["logprobs"]
    if "token_logprobs" in lp:
        if [f32hex(x) for x in lp["token_logprobs"]] != [g[1] for g in got]:
            fail("token_logprobs differ from content")
        if [t for t in lp["tokens"]] != [e["token"] for e in lp["content"]]:
            fail("tokens differ from content")
        offs, n = [], 0
        for e in lp["content"]:
            offs.append(n)
            n += len(e["bytes"])
        if lp["text_offset"] != offs:
            fail("text_offset is not the running byte count")
    n = sum(1 + len(g[3]) for g in got)
    print(f"{len(got)} tokens, {n} logprobs: ids and float32 bits equal to 1b-gen's")


def cmd_stream_match(a):
    """Streaming and non-streaming give the same tokens, logprobs and text."""
    body = json.loads(a.body)
    chat = "chat" in a.path
    r = post(a.url, a.path, body)
    if r.status_code != 200:
        fail(f"status {r.status_code}: {r.text[:300]}")
    whole = r.json()
    sbody = dict(body, stream=True, stream_options={"include_usage": True})
    events, done = sse(a.url, a.path, sbody)
    if not done:
        fail("no data: [DONE] at the end")
    text, entries, finish, usage = stream_collect(events, chat)
    if text != choice_text(whole):
        fail(f"text differs: stream {text!r} whole {choice_text(whole)!r}")
    if entries_fp(entries) != entries_fp(choice_entries(whole)):
        fail("logprob entries differ")
    if finish != whole["choices"][0]["finish_reason"]:
        fail(f"finish_reason {finish} vs {whole['choices'][0]['finish_reason']}")
    if usage is None or usage["completion_tokens"] != whole["usage"]["completion_tokens"] or \
            usage["prompt_tokens"] != whole["usage"]["prompt_tokens"]:
        fail(f"usage {usage} vs {whole['usage']}")
    ids = {ev["id"] for ev in events}
    if len(ids) != 1:
        fail("chunks carry different ids")
    obj = "chat.completion.chunk" if chat else "text_completion"
    if any(ev["object"] != obj for ev in events):
        fail("chunk object is not " + obj)
    print(f"{len(events)} events, {len(entries)} tokens, text {len(text)} chars: equal")


def fingerprint(resp):
    return (choice_text(resp), tuple(entries_fp(choice_entries(resp))),
            resp["choices"][0]["finish_reason"])


def cmd_concurrent(a):
    """Each request alone, then all at once (released together): identical answers."""
    bodies = [json.loads(l) for l in open(a.bodies) if l.strip()]
    solo = []
    for b in bodies:
        r = post(a.url, a.path, b)
        if r.status_code != 200:
            fail(f"solo status {r.status_code}: {r.text[:200]}")
        solo.append(fingerprint(r.json()))
    for rnd in range(a.rounds):
        barrier = threading.Barrier(len(bodies))
        out = [None] * len(bodies)

        def run(i):
            barrier.wait()
            b = bodies[i]
            if a.stream_half and i % 2:
                events, done = sse(a.url, a.path, dict(b, stream=True))
                text, entries, finish, _ = stream_collect(events, "chat" in a.path)
                out[i] = (text, tuple(entries_fp(entries)), finish)
            else:
                r = post(a.url, a.path, b)
                out[i] = fingerprint(r.json()) if r.status_code == 200 else ("status", r.status_code)

        ts = [threading.Thread(target=run, args=(i,)) for i in range(len(bodies))]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        for i in range(len(bodies)):
            if out[i] != solo[i]:
                fail(f"round {rnd}: request {i} among {len(bodies)} differs from alone: "
                     f"{str(out[i])[:200]} vs {str(solo[i])[:200]}")
    print(f"{len(bodies)} requests x {a.rounds} rounds concurrently: identical to alone")


def cmd_echo_match(a):
    """echo + logprobs + max_tokens 0 scores the prompt: the scores of the 1b-gen continuation
    given as part of the prompt equal the logprobs 1b-gen generated them with."""
    rec = json.loads(open(a.gen).readline())
    ids = rec["prompt_ids"] + [t["id"] for t in rec["tokens"]]
    body = {"prompt": ids, "max_tokens": 0, "echo": True, "logprobs": a.top, "temperature": 0}
    r = post(a.url, "/v1/completions", body)
    if r.status_code != 200:
        fail(f"status {r.status_code}: {r.text[:300]}")
    resp = r.json()
    lp = resp["choices"][0]["logprobs"]
    np_ = len(rec["prompt_ids"])
    if len(lp["content"]) != len(ids) or lp["token_logprobs"][0] is not None:
        fail(f"{len(lp['content'])} entries for {len(ids)} prompt tokens; first {lp['token_logprobs'][0]}")
    if [e["id"] for e in lp["content"]] != ids:
        fail("echoed ids differ from the prompt")
    got, want = entries_fp(lp["content"][np_:]), gen_fp(rec)
    for i, (g, w) in enumerate(zip(got, want)):
        if g != w:
            fail(f"scored token {i} differs: {g} vs generated {w}")
    if resp["usage"]["completion_tokens"] != 0 or resp["usage"]["prompt_tokens"] != len(ids):
        fail("usage " + json.dumps(resp["usage"]))
    text = "".join(bytes(e["bytes"]).decode("utf-8", "replace") for e in lp["content"])
    if resp["choices"][0]["text"] != text:
        fail("echo text is not the prompt's tokens")
    # the forced_tokens extension scores the same continuation
    body = {"prompt": rec["prompt_ids"], "forced_tokens": [t["id"] for t in rec["tokens"]],
            "logprobs": a.top, "max_tokens": 1}
    r = post(a.url, "/v1/completions", body)
    got2 = entries_fp(r.json()["choices"][0]["logprobs"]["content"])
    if got2 != want:
        fail("forced_tokens scores differ from the generated logprobs")
    if r.json()["choices"][0]["finish_reason"] != "length":
        fail("forced_tokens finish_reason " + r.json()["choices"][0]["finish_reason"])
    print(f"{len(want)} continuation tokens scored by echo and by forced_tokens: equal bits")


def cmd_openai(a):
    """The official openai client against the server: models, chat (with logprobs), legacy
    completions, streaming, errors."""
    import openai
    c = openai.OpenAI(base_url=a.url + "/v1", api_key=a.key or "none", max_retries=0)
    models = c.models.list()
    ids = [m.id for m in models.data]
    if ids != [a.model]:
        fail(f"models {ids}")
    one = c.models.retrieve(a.model)
    if one.to_dict() != models.data[0].to_dict():
        fail(f"models.retrieve({a.model!r}): {one} is not the listed {models.data[0]}")
    try:
        c.models.retrieve("no-such-model")
        fail("models.retrieve of an unknown model succeeded")
    except openai.NotFoundError as e:
        if e.body.get("code") != "model_not_found":
            fail("models.retrieve 404 body " + str(e.body))
    ch = c.chat.completions.create(model=a.model, messages=[{"role": "user", "content": "Hi"}],
                                   max_tokens=8, temperature=0, logprobs=True, top_logprobs=2)
    lp = ch.choices[0].logprobs.content
    if len(lp) != ch.usage.completion_tokens or not all(len(e.top_logprobs) == 2 for e in lp):
        fail("chat logprobs " + str(lp)[:300])
    if ch.model != a.model or ch.object != "chat.completion":
        fail("chat response " + str(ch)[:300])
    text = ""
    n = 0
    for chunk in c.chat.completions.create(model=a.model,
                                           messages=[{"role": "user", "content": "Hi"}],
                                           max_tokens=8, temperature=0, stream=True):
        for x in chunk.choices:
            text += x.delta.content or ""
            n += 1
    if text != ch.choices[0].message.content:
        fail(f"streamed text {text!r} vs {ch.choices[0].message.content!r}")
    cp = c.completions.create(model=a.model, prompt="Once upon a time", max_tokens=5,
                              temperature=0, logprobs=3)
    if len(cp.choices[0].logprobs.token_logprobs) != 5:
        fail("completion logprobs " + str(cp)[:300])
    try:
        c.chat.completions.create(model="no-such-model", messages=[{"role": "user", "content": "x"}])
        fail("an unknown model was accepted")
    except openai.NotFoundError as e:
        if e.body.get("code") != "model_not_found":
            fail("404 body " + str(e.body))
    try:
        c.chat.completions.create(model=a.model, messages=[{"role": "user", "content": "x"}], n=2)
        fail("n=2 was accepted")
    except openai.BadRequestError as e:
        if e.body.get("param") != "n":
            fail("400 body " + str(e.body))
    if a.key:
        bad = openai.OpenAI(base_url=a.url + "/v1", api_key="wrong", max_retries=0)
        try:
            bad.models.list()
            fail("a wrong key was accepted")
        except openai.AuthenticationError:
            pass
    print(f"openai {openai.__version__}: models (list, retrieve), chat + logprobs, stream ({n} chunks), "
          "completions, 404, 400" + (", 401" if a.key else ""))


def cmd_expect(a):
    """Send one request; check the status, the error param and that the body is an OpenAI
    error (for statuses >= 400)."""
    headers = dict(h.split(":", 1) for h in a.header)
    headers = {k.strip(): v.strip() for k, v in headers.items()}
    u = urllib.parse.urlsplit(a.url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=60)
    body = None
    if a.body_file:
        body = open(a.body_file, "rb").read()
    elif a.body is not None:
        body = a.body.encode("utf-8", "surrogateescape")
    if body is not None:
        headers.setdefault("Content-Type", "application/json")
    try:
        conn.request(a.method, a.path, body=body, headers=headers)
        r = conn.getresponse()
        data = r.read()
    except (ConnectionError, http.client.HTTPException) as e:
        fail(f"no answer: {e!r}")
    if r.status != a.status:
        fail(f"status {r.status}, want {a.status}: {data[:300]!r}")
    if a.status >= 400 and a.method != "HEAD":
        try:
            err = json.loads(data)["error"]
        except Exception:
            fail("not an OpenAI error body: %r" % data[:200])
        for k in ("message", "type", "param", "code"):
            if k not in err:
                fail(f"error body lacks {k}: {err}")
        if a.param is not None and err["param"] != a.param:
            fail(f"param {err['param']!r}, want {a.param!r}: {err['message']}")
        if a.code is not None and err["code"] != a.code:
            fail(f"code {err['code']!r}, want {a.code!r}: {err['message']}")
        print(f"{r.status} {err['type']} param={err['param']} code={err['code']}: {err['message']}")
    else:
        print(f"{r.status} {data[:120]!r}")
    for h in a.want_header:
        if not r.getheader(h):
            fail("no header " + h)


def cmd_dribble(a):
    """A client that sends its headers, then its body a few bytes at a time, does not hold up
    other requests; it gets its answer once its body is complete."""
    u = urllib.parse.urlsplit(a.url)
    body = json.dumps({"prompt": "Once upon a time", "max_tokens": 4, "temperature": 0}).encode()
    s = socket.create_connection((u.hostname, u.port))
    s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              b"Content-Length: %d\r\n\r\n" % len(body))
    s.sendall(body[:5])
    t0 = time.time()
    r = post(a.url, "/v1/completions", {"prompt": "Hello", "max_tokens": 4, "temperature": 0},
             timeout=10)
    fast = time.time() - t0
    if r.status_code != 200:
        fail(f"other request: {r.status_code}")
    if fast > 2:
        fail(f"another request took {fast:.2f}s while a client dribbled")
    for i in range(5, len(body), 4):
        s.sendall(body[i:i + 4])
        time.sleep(a.delay)
    s.settimeout(20)
    data = b""
    while b"\r\n\r\n" not in data:
        d = s.recv(4096)
        if not d:
            break
        data += d
    s.close()
    if not data.startswith(b"HTTP/1.1 200"):
        fail("dribbling client got %r" % data[:100])
    print(f"another request took {fast:.3f}s; the dribbling client got 200 after "
          f"{time.time() - t0:.1f}s")


def metrics(url, headers=None):
    out = {}
    for line in requests.get(url + "/metrics", headers=headers or {}, timeout=10).text.splitlines():
        if line and not line.startswith("#"):
            k, v = line.rsplit(" ", 1)
            out[k] = float(v)
    return out


def cmd_disconnect(a):
    """Clients that vanish (mid-stream, or while waiting for a whole answer) free their slots:
    the server keeps serving with --parallel 1."""
    u = urllib.parse.urlsplit(a.url)
    before = metrics(a.url).get('ob_requests_cancelled_total{reason="client"}', 0)
    body = json.dumps({"prompt": "Once upon a time", "max_tokens": a.tokens, "temperature": 0,
                       "stream": a.mode == "stream"}).encode()
    s = socket.create_connection((u.hostname, u.port))
    s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              b"Content-Length: %d\r\n\r\n" % len(body) + body)
    if a.mode == "stream":
        got = b""
        while got.count(b"data: ") < 3:
            got += s.recv(4096)
    else:
        time.sleep(0.3)
    # vanish: RST rather than FIN
    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    s.close()
    t0 = time.time()
    key = 'ob_requests_cancelled_total{reason="client"}'
    while True:
        m = metrics(a.url)
        if m.get("ob_slots_busy") == 0 and m.get("ob_requests_in_flight") == 0 and \
                m.get(key, 0) == before + 1:
            break
        if time.time() - t0 > 5:
            fail(f"5 s after the client vanished: cancelled by client {before} -> "
                 f"{m.get(key, 0)}, slots busy {m.get('ob_slots_busy')}, "
                 f"in flight {m.get('ob_requests_in_flight')}")
        time.sleep(0.02)
    freed = time.time() - t0
    r = post(a.url, "/v1/completions", {"prompt": "Hi", "max_tokens": 2, "temperature": 0}, timeout=10)
    if r.status_code != 200:
        fail(f"next request: {r.status_code}")
    print(f"{a.mode}: slot freed {freed:.3f}s after the client vanished; next request served")


def cmd_load(a):
    """clients x requests short requests at once: all answered 200 and identical to the
    reference answer of their prompt; prints requests/s and latency percentiles."""
    prompts = ["Once upon a time", "The little dog", "Lily and Ben", "One day, a bird"]
    ref = {}
    for p in prompts:
        r = post(a.url, "/v1/completions", {"prompt": p, "max_tokens": a.tokens, "temperature": 0,
                                            "logprobs": 1})
        ref[p] = fingerprint(r.json())
    lat, errors, mismatch = [], [], []
    lock = threading.Lock()
    barrier = threading.Barrier(a.clients)

    def client(k):
        sess = requests.Session()
        barrier.wait()
        for i in range(a.requests):
            p = prompts[(k + i) % len(prompts)]
            t = time.time()
            try:
                r = sess.post(a.url + "/v1/completions", json={"prompt": p, "max_tokens": a.tokens,
                                                               "temperature": 0, "logprobs": 1},
                              timeout=120)
            except Exception as e:
                with lock:
                    errors.append(repr(e))
                continue
            dt = time.time() - t
            with lock:
                lat.append(dt)
                if r.status_code != 200:
                    errors.append(f"{r.status_code} {r.text[:100]}")
                elif fingerprint(r.json()) != ref[p]:
                    mismatch.append(p)

    t0 = time.time()
    ts = [threading.Thread(target=client, args=(k,)) for k in range(a.clients)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    wall = time.time() - t0
    lat.sort()
    pct = lambda q: lat[min(len(lat) - 1, int(q * len(lat)))] * 1000 if lat else 0
    n = a.clients * a.requests
    print(f"{n} requests by {a.clients} clients in {wall:.2f}s: {len(lat) / wall:.1f} req/s, "
          f"latency ms p50 {pct(0.5):.1f} p90 {pct(0.9):.1f} p99 {pct(0.99):.1f} max {pct(1.0):.1f}")
    if errors:
        fail(f"{len(errors)} errors: {errors[:3]}")
    if len(lat) != n:
        fail(f"{n - len(lat)} requests lost")
    if mismatch:
        fail(f"{len(mismatch)} answers differ from the reference")


def cmd_bits(a):
    """Every logprob of many answers reads back (float32 of the JSON double) to the bits of the
    same logprob printed by 1b-gen (records in a file, one per line, in the same order as the
    requests file)."""
    recs = [json.loads(l) for l in open(a.gen) if l.strip()]
    bodies = [json.loads(l) for l in open(a.bodies) if l.strip()]
    if not recs or len(recs) != len(bodies):
        fail(f"{len(recs)} 1b-gen records for {len(bodies)} requests")
    n = 0
    for rec, b in zip(recs, bodies):
        if rec.get("error") or "tokens" not in rec:
            fail("1b-gen record without tokens: " + json.dumps(rec)[:200])
        r = post(a.url, a.path, b)
        if r.status_code != 200:
            fail(f"request {rec['id']}: status {r.status_code}: {r.text[:200]}")
        got, want = entries_fp(choice_entries(r.json())), gen_fp(rec)
        if got != want:
            for i, (g, w) in enumerate(zip(got, want)):
                if g != w:
                    fail(f"request {rec['id']} token {i}: {g} vs {w}")
            fail(f"request {rec['id']}: {len(got)} vs {len(want)} tokens")
        n += sum(1 + len(g[3]) for g in got)
    print(f"{len(recs)} requests, {n} logprobs: every float32 bit pattern as 1b-gen's")


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("gen-match"); p.add_argument("url"); p.add_argument("path")
    p.add_argument("body"); p.add_argument("gen")
    p = sub.add_parser("stream-match"); p.add_argument("url"); p.add_argument("path"); p.add_argument("body")
    p = sub.add_parser("concurrent"); p.add_argument("url"); p.add_argument("path"); p.add_argument("bodies")
    p.add_argument("--rounds", type=int, default=2); p.add_argument("--stream-half", action="store_true")
    p = sub.add_parser("echo-match"); p.add_argument("url"); p.add_argument("gen")
    p.add_argument("--top", type=int, default=3)
    p = sub.add_parser("openai"); p.add_argument("url"); p.add_argument("model"); p.add_argument("--key")
    p = sub.add_parser("expect"); p.add_argument("url"); p.add_argument("method"); p.add_argument("path")
    p.add_argument("status", type=int); p.add_argument("--body"); p.add_argument("--body-file")
    p.add_argument("--param"); p.add_argument("--code"); p.add_argument("--header", action="append", default=[])
    p.add_argument("--want-header", action="append", default=[])
    p = sub.add_parser("dribble"); p.add_argument("url"); p.add_argument("--delay", type=float, default=0.05)
    p = sub.add_parser("disconnect"); p.add_argument("url"); p.add_argument("mode", choices=["stream", "wait"])
    p.add_argument("--tokens", type=int, default=1500)
    p = sub.add_parser("load"); p.add_argument("url"); p.add_argument("--clients", type=int, default=32)
    p.add_argument("--requests", type=int, default=4); p.add_argument("--tokens", type=int, default=8)
    p = sub.add_parser("bits"); p.add_argument("url"); p.add_argument("path"); p.add_argument("bodies")
    p.add_argument("gen")
    a = ap.parse_args()
    globals()["cmd_" + a.cmd.replace("-", "_")](a)


if __name__ == "__main__":
    main()
