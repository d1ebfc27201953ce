#!/usr/bin/env bash
# contrib/openapi.yaml describes 1b-serve: it is a valid OpenAPI 3.1 document that lists the
# same endpoints as man/1b-serve.1 (paths, aliases and methods), the same error statuses and
# error body; and schemathesis (PyPI, a fuzzer no one here wrote) runs every operation of it
# against a real 1b-serve on loopback (the ASan build when make check built one), bounded in
# time: any 5xx, any answer whose status, content type, headers or body the document does not
# allow (SSE events included), any schema-invalid request that is not refused, any endpoint
# that ignores the API key, and a server that dies or logs a sanitizer error, fail.
# OB_FUZZ_SEED and OB_FUZZ_SECONDS change the seed (default 1) and the time budget (default 40).
. "$(dirname "$0")/lib.sh"
. "$OB_TOP/tests/py/serve_env.sh"
declare URL_s PID_s  # set by name (printf -v), which shellcheck cannot see
plan 6

DOC=$OB_TOP/contrib/openapi.yaml
MAN=$OB_TOP/man/1b-serve.1
if ! need_python schemathesis yaml; then
    for i in 1 2 3 4 5 6; do skip "openapi check $i" "schemathesis not installed (scripts/setup)"; done
    exit 0
fi

# ---- the document against the man page ----
"$PY" - "$DOC" "$MAN" > "$T/cmp.out" 2>&1 <<'EOF'
import re, sys, yaml
doc = yaml.safe_load(open(sys.argv[1]))
man = open(sys.argv[2]).read()

def deref(item):
    ref = item.get("$ref")
    if ref:
        node = doc
        for k in ref.lstrip("#/").split("/"):
            node = node[k.replace("~1", "/").replace("~0", "~")]
        return node
    return item

methods = {p: sorted(m.upper() for m in deref(i) if m in ("get", "post", "put", "delete", "patch", "head"))
           for p, i in doc["paths"].items()}
sec = man.split(".Sh ENDPOINTS", 1)[1].split("\n.Sh ", 1)[0]
heads = dict((p, [m]) for m, p in re.findall(r"^\.Ss (GET|POST) (/\S+)$", sec, re.M))
aliases = set(re.findall(r"\bPa (/[a-z0-9/{}]+)(?=[\s,]|$)", sec, re.M)) - {"/v1"}
want = dict(heads)
for a in aliases:       # an alias has the method of the path it names
    twin = [p for p in heads if p in ("/v1" + a, a[3:] if a.startswith("/v1/") else None)]
    if len(twin) != 1:
        print("alias %s: no endpoint of the man page it stands for" % a)
        sys.exit(1)
    want[a] = heads[twin[0]]
if methods != want:
    print("document:", methods)
    print("man page:", want)
    sys.exit(1)
print("%d paths, %d of them aliases" % (len(want), len(aliases)))
EOF
ok $? "the document and man/1b-serve.1 list the same endpoints and methods: $(tail -1 "$T/cmp.out")" ||
    sed 's/^/# /' "$T/cmp.out"

mandoc -Tascii "$MAN" | col -bx > "$T/man.txt"
"$PY" - "$DOC" "$MAN" "$T/man.txt" > "$T/cmp.out" 2>&1 <<'EOF'
import re, sys, yaml
doc = yaml.safe_load(open(sys.argv[1]))
man = open(sys.argv[2]).read()
sec = man.split(".Sh STATUS CODES", 1)[1].split("\n.Sh ", 1)[0]
in_man = set(re.findall(r"^\.It ([1-5][0-9][0-9])$", sec, re.M))
in_doc = set()
def walk(node):
    if isinstance(node, dict):
        for k, v in node.items():
            if k == "responses" and isinstance(v, dict):
                in_doc.update(s for s in v if re.fullmatch(r"[1-5][0-9][0-9]", str(s)))
            walk(v)
    elif isinstance(node, list):
        for v in node:
            walk(v)
walk(doc["paths"]); walk(doc["components"]["pathItems"])
# 405 answers a method that is no operation: the document says so in its description
ok = in_doc == in_man - {"405"} and "405 with Allow" in doc["info"]["description"]
text = open(sys.argv[3]).read().split("STATUS CODES", 1)[-1]      # the page as rendered
m = re.search(r'\{"error":\{(.*?)\}\}', text, re.S)
fields = set(re.findall(r'"(\w+)":', m.group(1))) if m else set()
req = set(doc["components"]["schemas"]["Error"]["properties"]["error"]["required"])
ok = ok and req == fields
print("statuses: man %s, document %s; error fields %s" % (sorted(in_man), sorted(in_doc), sorted(req)))
sys.exit(0 if ok else 1)
EOF
ok $? "the same statuses (405 in the description) and error body as the man page: $(tail -1 "$T/cmp.out")" ||
    sed 's/^/# /' "$T/cmp.out"

# ---- schemathesis against a real server ----
serve=$BIN/1b-serve
[ -x "$BIN/san/1b-serve" ] && serve=$BIN/san/1b-serve
key=t6090-key
# small limits keep every generated request cheap: at most 4 tokens, 128 positions
if PATH=$(dirname "$serve"):$PATH serve_start s -m "$SHARED/models/stories260K.gguf" --parallel 2 -t 1 \
        --max-tokens-cap 4 --ctx 128 --api-key "$key"; then
    ok 0 "$(basename "$(dirname "$serve")")/1b-serve started for the fuzzer"
else
    ok 1 "1b-serve did not start: $(tail -2 "$T/s.log")"
fi
secs=${OB_FUZZ_SECONDS:-40}
(cd "$T" && timeout $((secs + 60)) "$(dirname "$PY")/schemathesis" run "$DOC" --url "$URL_s" \
    -H "Authorization: Bearer $key" --checks all \
    --exclude-checks positive_data_acceptance,use_after_free,ensure_resource_availability,object_level_authorization \
    --phases coverage,fuzzing -n 25 -w 1 --seed "${OB_FUZZ_SEED:-1}" --max-time "$secs" \
    --request-timeout 30 --suppress-health-check all --output-truncate true > "$T/st.out" 2>&1)
rc=$?
summary=$(grep -E '^=+ .* in [0-9.]+s =+$' "$T/st.out" | tail -1 | tr -s ' =')
ok $rc "schemathesis: every operation, no failure (exit $rc:$summary)" ||
    grep -v '^ *|' "$T/st.out" | grep -A40 -E '^=+ (FAILURES|ERRORS)' | head -60 | sed 's/^/# /'
kill -0 "$PID_s" 2> /dev/null && curl -sf "$URL_s/health" > /dev/null
ok $? "the server is alive and ready after the run"
! grep -aE 'AddressSanitizer|runtime error|LeakSanitizer' "$T/s.log" > "$T/san.out"
ok $? "the server logged no sanitizer error ($(head -1 "$T/san.out"))"
