#!/usr/bin/env bash
# 1b-serve against bad HTTP framing, sent on raw sockets: a body whose length is ambiguous
# (Transfer-Encoding other than chunked, both Transfer-Encoding and Content-Length, two
# Content-Lengths, white space before a header's colon, chunked in HTTP/1.0) is refused at
# once with 400 or 501 and the connection closed, never read until the idle timeout nor
# served; a Content-Length that is not a number gets 400 (libmicrohttpd's own) and is not
# served; a POST without a length gets 411, an unknown Expect 417. The siblings: Expect
# 100-continue, chunk extensions and trailers, pipelined requests and the absolute form of a
# URL are served; headers and URLs too large for a connection's memory, HTTP/0.9 and HTTP/2
# get libmicrohttpd's 4xx/5xx. The server serves on throughout.
. "$(dirname "$0")/lib.sh"
. "$OB_TOP/tests/py/serve_env.sh"
declare URL_a PID_a  # set by name (printf -v), which shellcheck cannot see
plan 12
S=$SHARED/models/stories260K.gguf
cd "$T" || exit 1
serve_start a -m "$S" -t 1 --idle-timeout 30
ok $? "server with --idle-timeout 30 at $URL_a"

# raw.py PORT: one request per line of stdin: NAME|WANT|CODE|REQUEST (REQUEST with \r\n and
# \x.. escapes, @BODY@ for a 44-byte completion body). WANT is the status of the first
# answer, CODE the error code of its JSON body ("-": none to check, "html": libmicrohttpd's
# own page); every answer must come within 5 s, and no request may be served (200) unless
# WANT says so. Prints the failures, exits 1 if any.
cat > raw.py <<'EOF'
import json, socket, sys, time
port = int(sys.argv[1])
body = b'{"prompt":"Once upon a time","max_tokens":2}'
assert len(body) == 44
bad = 0
for line in sys.stdin:
    if not line.strip():
        continue
    name, want, code, req = line.rstrip("\n").split("|", 3)
    req = req.encode().decode("unicode_escape").encode("latin-1").replace(b"@BODY@", body)
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(req)
    s.settimeout(5)
    t0 = time.time()
    out = b""
    try:
        while True:
            d = s.recv(65536)
            if not d:
                break
            out += d
    except socket.timeout:
        out += b"<no close within 5 s>"
    s.close()
    status = out.split(b"\r\n")[0].decode("latin-1")
    why = []
    if not status.startswith("HTTP/1.1 " + want):
        why.append(f"status {status!r}, want {want}")
    if b"<no close" in out:
        why.append("the connection stayed open")
    served = out.count(b"HTTP/1.1 200 OK")
    if want not in ("200", "100") and served:
        why.append("served")
    if code not in ("-", "html"):
        head, _, rest = out.partition(b"\r\n\r\n")
        try:
            got = json.loads(rest.split(b"HTTP/1.1 ")[0])["error"]["code"]
        except Exception:
            got = None
        if got != code:
            why.append(f"code {got}, want {code}")
        if b"\r\nConnection: close\r\n" not in head + b"\r\n":
            why.append("no Connection: close")
    if code == "html" and b"<html>" not in out:
        why.append("no HTML page")
    print(f"{'ok' if not why else 'BAD'} {name}: {status} {time.time() - t0:.2f}s {'; '.join(why)}")
    bad |= bool(why)
sys.exit(bad)
EOF
# rc DESC CASES...: run the cases (lines) and report one TAP line
rc() {
    local d=$1 out r
    shift
    out=$(printf '%s\n' "$@" | python3 raw.py "${URL_a##*:}" 2>&1); r=$?
    ok $r "$d" || printf '%s\n' "$out" | grep -v '^ok' | sed 's/^/# /'
    [ -n "${OB_VERBOSE_SC:-}" ] && printf '%s\n' "$out" | sed 's/^/#   /'
    return 0
}
P='POST /v1/completions HTTP/1.1\r\nHost: x\r\n'

rc "Transfer-Encoding gzip, identity, a list, or twice: 501 at once, closed (not read until the idle timeout)" \
    "gzip|501|unsupported_transfer_encoding|${P}Transfer-Encoding: gzip\r\n\r\n@BODY@" \
    "identity|501|unsupported_transfer_encoding|${P}Transfer-Encoding: identity\r\n\r\n@BODY@" \
    "gzip, chunked|501|unsupported_transfer_encoding|${P}Transfer-Encoding: gzip, chunked\r\n\r\n2c\r\n@BODY@\r\n0\r\n\r\n" \
    "two TE headers|501|unsupported_transfer_encoding|${P}Transfer-Encoding: chunked\r\nTransfer-Encoding: gzip\r\n\r\n2c\r\n@BODY@\r\n0\r\n\r\n" \
    "gzip on GET|501|unsupported_transfer_encoding|GET /health HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n"
rc "two Content-Lengths (conflicting or equal), or Transfer-Encoding with Content-Length: 400 invalid_framing, closed" \
    "44 then 3|400|invalid_framing|${P}Content-Length: 44\r\nContent-Length: 3\r\n\r\n@BODY@" \
    "3 then 44|400|invalid_framing|${P}Content-Length: 3\r\nContent-Length: 44\r\n\r\n@BODY@" \
    "44 twice|400|invalid_framing|${P}Content-Length: 44\r\nContent-Length: 44\r\n\r\n@BODY@" \
    "TE and CL|400|invalid_framing|${P}Transfer-Encoding: chunked\r\nContent-Length: 44\r\n\r\n2c\r\n@BODY@\r\n0\r\n\r\n"
rc "chunked in HTTP/1.0, white space before a colon: 400 invalid_framing" \
    "TE in 1.0|400|invalid_framing|POST /v1/completions HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n2c\r\n@BODY@\r\n0\r\n\r\n" \
    "name with space|400|invalid_framing|${P}Content-Length : 44\r\n\r\n@BODY@"
rc "Content-Length -1, 0x2c, +44, '44, 44', 10^23: refused by libmicrohttpd (400, 413), closed, not served" \
    "-1|400|html|${P}Content-Length: -1\r\n\r\n@BODY@" \
    "0x2c|400|html|${P}Content-Length: 0x2c\r\n\r\n@BODY@" \
    "+44|400|html|${P}Content-Length: +44\r\n\r\n@BODY@" \
    "44, 44|400|html|${P}Content-Length: 44, 44\r\n\r\n@BODY@" \
    "10^23|413|html|${P}Content-Length: 100000000000000000000000\r\n\r\n@BODY@"
rc "a POST without a length: 411 length_required; Expect other than 100-continue: 417" \
    "no length|411|length_required|${P}Connection: close\r\n\r\n" \
    "Expect|417|expectation_failed|${P}Expect: 200-ok\r\nContent-Length: 44\r\n\r\n@BODY@"
rc "well-formed requests are served: Content-Length with leading zeros, chunked with an extension and a trailer, Expect: 100-continue, the absolute form, two pipelined" \
    "leading zeros|200|-|${P}Content-Length: 000044\r\nConnection: close\r\n\r\n@BODY@" \
    "chunked|200|-|${P}Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n2c;ext=1\r\n@BODY@\r\n0\r\nX-Trailer: 1\r\n\r\n" \
    "100-continue|100|-|${P}Expect: 100-continue\r\nContent-Length: 44\r\nConnection: close\r\n\r\n@BODY@" \
    "absolute form|200|-|GET http://x/health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n" \
    "pipelined|200|-|GET /health HTTP/1.1\r\nHost: x\r\n\r\nGET /livez HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
rc "bad chunks, huge headers and URLs, many headers, HTTP/0.9 and HTTP/2: libmicrohttpd's 4xx/5xx, closed" \
    "chunk overflow|413|html|${P}Transfer-Encoding: chunked\r\n\r\nfffffffffffffffffff\r\n@BODY@\r\n0\r\n\r\n" \
    "short chunk|400|html|${P}Transfer-Encoding: chunked\r\n\r\n30\r\n@BODY@\r\n0\r\n\r\n" \
    "huge header|431|html|GET /health HTTP/1.1\r\nHost: x\r\nX-A: $(head -c 40000 /dev/zero | tr '\0' a)\r\n\r\n" \
    "many headers|431|html|GET /health HTTP/1.1\r\n$(for i in $(seq 3000); do printf 'X-%d: y\\r\\n' "$i"; done)\r\n" \
    "long url|414|html|GET /health?$(head -c 40000 /dev/zero | tr '\0' a) HTTP/1.1\r\nHost: x\r\n\r\n" \
    "HTTP/0.9|400|html|GET /health\r\n\r\n" \
    "HTTP/2|505|html|PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
out=$(python3 - "${URL_a##*:}" <<'EOF'
import socket, sys, time
# a client that sends the pipelined second request with Transfer-Encoding: gzip behind a good
# one: the good one is answered, the bad one refused, and nothing of the body after it is read
# as a third request
port = int(sys.argv[1])
b = b'{"prompt":"Once upon a time","max_tokens":2}'
s = socket.create_connection(("127.0.0.1", port))
s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 44\r\n\r\n" + b +
          b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n" +
          b"GET /livez HTTP/1.1\r\nHost: x\r\n\r\n")
s.settimeout(5)
out = b""
try:
    while True:
        d = s.recv(65536)
        if not d:
            break
        out += d
except socket.timeout:
    pass
st = [l for l in out.split(b"\r\n") if b"HTTP/1.1 " in l]
print(st)
sys.exit(0 if len(st) == 2 and st[0].endswith(b"200 OK") and b"501" in st[1] and b"alive" not in out else 1)
EOF
)
ok $? "a smuggling attempt (a good request, then one with Transfer-Encoding gzip whose 'body' is a third): 200, 501, and no third ($out)"
m=$(curl -s "$URL_a/metrics")
grep -q '^ob_requests_total{endpoint="/v1/completions",status="501"} 5$' <<<"$m" &&
    grep -q '^ob_requests_total{endpoint="/health",status="501"} 1$' <<<"$m" &&
    grep -q '^ob_requests_total{endpoint="/v1/completions",status="400"} 6$' <<<"$m"
ok $? "refusals counted by status in /metrics"
cx 200 - - "$URL_a/v1/completions" -d '{"prompt":"Once upon a time","max_tokens":3}'
ok $? "the server still serves"
kill -TERM "$PID_a"; serve_wait_exit "$PID_a" 10
[ "$RC" = 0 ] && ! grep -qv '^{' a.log; ok $? "SIGTERM: exit 0, stderr held only JSON lines"
