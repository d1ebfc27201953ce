#!/usr/bin/env bash
# The route registry (lib/route.c) and contexts (lib/ctx.c): routes found by name, a route that
# is not built in (exit 4) and an unknown one (exit 2, the routes listed), device options
# (index, memory limit), the device a route names, and a backend's optional whole-layer op.
. "$(dirname "$0")/lib.sh"
cd "$T" || exit 1
S=$SHARED/models/stories260K.gguf
plan 3
out=$("$UNIT/route" "$S" 2>&1); rc=$?
ok $rc "registry and contexts ($(grep -c '^ok' <<<"$out") checks)" || grep -v '^ok' <<<"$out" | head -20 | sed 's/^/# /'
grep '^ok\|^not ok' <<<"$out" | sed 's/^/#   /'
echo '{"prompt":"a","max_tokens":1}' > one.jsonl
1b-gen -m "$S" -d nosuch < one.jsonl > /dev/null 2> err.txt; rc=$?
[ $rc -eq 2 ] && grep -qE "unknown route 'nosuch' \(this build has cpu, ref, (hrx-sim; not built: hrx|hrx, hrx-sim)" err.txt
ok $? "1b-gen -d nosuch: exit 2, the routes this build has ($(cat err.txt))"
1b-gen -m "$S" -d npu-sim < one.jsonl > /dev/null 2> err.txt; rc=$?
[ $rc -eq 4 ] && grep -q "route 'npu-sim' is not built into this binary" err.txt
ok $? "1b-gen -d npu-sim: exit 4, not built in ($(cat err.txt))"
