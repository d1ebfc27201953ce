#!/usr/bin/env bash
# 1b-serve and large bodies: what a body may cost, and who waits while it is parsed.
#  - 8 bodies of 4 MB, each two million token ids, sent at once: each is refused (413, too many
#    JSON values) having cost a few MB, not the ~170 MB of a whole cJSON tree; the server's
#    peak RSS (VmHWM in /proc/PID/status) stays within 150 MB of its start, and what it holds
#    afterwards (VmRSS) within 80 MB. Bodies of legitimate size (a prompt and forced tokens
#    of the whole context) are still taken.
#  - bodies being read hold at most --max-body x max(16, --parallel + --queue) bytes in all:
#    24 clients announcing 1 MiB each and sending slowly, against --max-body 1M --parallel 1
#    --queue 1, get 16 of them read and the other 8 refused at once (503 overloaded, with
#    Retry-After); the reservation is given back when they go.
#  - 4 clients sending 4 MB text prompts at once (as many as HTTP threads) (each tokenized, then refused for its
#    length): /health and /livez, on new connections and on one kept alive, answer within
#    1 s meanwhile (a load balancer's probe timeout), because bodies are parsed and tokenized
#    off the threads that answer them.
# tests/run: alone (its probes are timed and its memory peaks measured: nothing beside it)
. "$(dirname "$0")/lib.sh"
. "$OB_TOP/tests/py/serve_env.sh"
declare URL_a PID_a URL_b PID_b  # set by name (printf -v), which shellcheck cannot see
plan 10
S=$SHARED/models/stories260K.gguf
cd "$T" || exit 1
serve_start a -m "$S" -t 1
ok $? "server with the defaults (--max-body 4M, --ctx 2048) at $URL_a"
P=${URL_a##*:}

# blast.py PORT PID KIND N: N clients at once, each POSTing a body of KIND (ids: 2M token ids;
# text: a 4 MB prompt) to /v1/completions, while /health and /livez are asked every 50 ms
# (new connections, and one kept alive). Prints a JSON summary with the server's memory.
cat > blast.py <<'EOF'
import http.client, json, socket, sys, threading, time
port, pid, kind, n = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
def mem():
    m = {}
    for line in open(f"/proc/{pid}/status"):
        k, _, v = line.partition(":")
        if k in ("VmRSS", "VmHWM"):
            m[k] = int(v.split()[0]) // 1024        # MiB
    return m
if kind == "ids":
    body = b'{"prompt":[' + b",".join([b"1"] * (2 * 1024 * 1024 - 40)) + b'],"max_tokens":1}'
else:
    body = b'{"prompt":"' + b"Once upon a time " * (4 * 1024 * 1024 // 17 - 10) + b'","max_tokens":1}'
assert len(body) <= 4 << 20
before = mem()
answers = []
def client():
    c = socket.create_connection(("127.0.0.1", port))
    c.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
    c.settimeout(120)
    d = b""
    while True:
        x = c.recv(65536)
        if not x:
            break
        d += x
        head, sep, rest = d.partition(b"\r\n\r\n")
        if sep and len(rest) >= int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0]):
            break
    answers.append((d.split(b"\r\n")[0].decode(), json.loads(d.partition(b"\r\n\r\n")[2])["error"]["code"]))
lat = []
stop = False
def probe():
    keep = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    while not stop:
        for path in ("/health", "/livez"):
            t = time.time()
            c = socket.create_connection(("127.0.0.1", port), timeout=30)
            c.sendall(b"GET %s HTTP/1.1\r\nHost: x\r\n\r\n" % path.encode())
            ok = c.recv(100).startswith(b"HTTP/1.1 200")
            c.close()
            lat.append((time.time() - t, ok))
            t = time.time()
            keep.request("GET", path)
            r = keep.getresponse()
            r.read()
            lat.append((time.time() - t, r.status == 200))
        time.sleep(0.05)
th = [threading.Thread(target=client) for i in range(n)]
pr = threading.Thread(target=probe)
pr.start()
t0 = time.time()
for t in th:
    t.start()
for t in th:
    t.join()
took = time.time() - t0
stop = True
pr.join()
time.sleep(0.5)
after = mem()
print(json.dumps({"answers": sorted(set(answers)), "n": len(answers), "took": round(took, 2),
                  "probes": len(lat), "probe_max": round(max(l[0] for l in lat), 3),
                  "probes_ok": all(l[1] for l in lat), "before": before, "after": after}))
EOF

r=$(python3 blast.py "$P" "$PID_a" ids 8); echo "# $r"
jq -e '.n == 8 and .answers == [["HTTP/1.1 413 Content Too Large", "request_too_large"]]' <<<"$r" > /dev/null
ok $? "8 bodies of two million token ids at once: each 413 request_too_large"
jq -e '.after.VmHWM - .before.VmRSS < 150' <<<"$r" > /dev/null
ok $? "peak RSS within 150 MB of the start ($(jq -c '[.before.VmRSS, .after.VmHWM]' <<<"$r") MiB)"
jq -e '.after.VmRSS - .before.VmRSS < 80' <<<"$r" > /dev/null
ok $? "and afterwards the server holds within 80 MB of it ($(jq -c .after.VmRSS <<<"$r") MiB)"

# the limit is far from what a real request holds: a whole context of prompt ids, then a
# prompt and forced tokens that fill it
python3 -c 'import json; print(json.dumps({"prompt": [1] * 2047, "max_tokens": 1}))' > full.json
python3 -c 'import json; print(json.dumps({"prompt": [1] * 1024, "forced_tokens": [5] * 1024, "logprobs": 1}))' > forced.json
cx 200 - - "$URL_a/v1/completions" --data-binary @full.json &&
    cx 200 - - "$URL_a/v1/completions" --data-binary @forced.json
ok $? "a prompt of 2047 ids, and 1024 ids with 1024 forced tokens (--ctx 2048): 200"

# exactly at the bound: {"tokens":[...]} is the object, the array and its ids
python3 -c 'import json; print(json.dumps({"tokens": [1] * 12286}))' > at.json
python3 -c 'import json; print(json.dumps({"tokens": [1] * 12287}))' > over.json
cx 200 - - "$URL_a/detokenize" --data-binary @at.json &&
    cx 413 - request_too_large "$URL_a/detokenize" --data-binary @over.json &&
    grep -q 'more JSON values than this server takes (12288)' "$T/cx.out"
ok $? "12288 JSON values (4 x --ctx + 4096) are taken, 12289 get 413"

r=$(python3 blast.py "$P" "$PID_a" text 4); echo "# $r"
jq -e '.n == 4 and .answers == [["HTTP/1.1 400 Bad Request", "context_length_exceeded"]]' <<<"$r" > /dev/null
ok $? "4 text prompts of 4 MB at once: each tokenized and refused (400 context_length_exceeded) in $(jq .took <<<"$r") s"
jq -e '.probes_ok and .probe_max < 1' <<<"$r" > /dev/null
ok $? "meanwhile $(jq .probes <<<"$r") probes of /health and /livez all answered within 1 s (slowest $(jq .probe_max <<<"$r") s)"

serve_start b -m "$S" -t 1 --max-body 1M --parallel 1 --queue 1
out=$(python3 - "${URL_b##*:}" <<'EOF'
import collections, socket, subprocess, sys, time
port = int(sys.argv[1])
conns = []
for i in range(24):
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 1048576\r\n\r\n" +
              b'{"prompt":"' + b"a" * 1000)
    conns.append(s)
time.sleep(0.5)
c = collections.Counter()
for s in conns:
    s.setblocking(False)
    try:
        d = s.recv(4096)
        c[d.split(b"\r\n")[0].decode() + (" Retry-After" if b"\r\nRetry-After: 1\r\n" in d else "")
          + (" overloaded" if b'"code":"overloaded"' in d else "")] += 1
    except BlockingIOError:
        c["reading"] += 1
m = subprocess.run(["curl", "-s", f"http://127.0.0.1:{port}/metrics"], capture_output=True, text=True).stdout
held = [l for l in m.splitlines() if l.startswith("ob_request_body_bytes ")]
for s in conns:
    s.close()
time.sleep(0.3)
m = subprocess.run(["curl", "-s", f"http://127.0.0.1:{port}/metrics"], capture_output=True, text=True).stdout
after = [l for l in m.splitlines() if l.startswith("ob_request_body_bytes ")]
print(dict(c), held, after)
sys.exit(0 if c == {"reading": 16, "HTTP/1.1 503 Service Unavailable Retry-After overloaded": 8}
         and held == ["ob_request_body_bytes 16777232"] and after == ["ob_request_body_bytes 0"] else 1)
EOF
)
ok $? "24 bodies of 1 MiB announced against a budget of 16: 16 read, 8 refused at once with 503 and Retry-After; all given back ($out)"

kill -TERM "$PID_a" "$PID_b"; serve_wait_exit "$PID_a" 10; a=$RC; serve_wait_exit "$PID_b" 10
[ "$a" = 0 ] && [ "$RC" = 0 ] && ! grep -qv '^{' a.log b.log; ok $? "SIGTERM: exit 0, stderr held only JSON lines"
