#!/usr/bin/env bash
# make lint, run by make check: clang's static analyzer finds nothing in the C of lib/ and cmd/,
# and shellcheck nothing in the shell scripts (the Makefile's lint section lists both; a
# finding a tool gets wrong is answered where it is, with its reason). Each tool is first
# shown a planted finding, so that a gate that cannot fail is a failure. A missing tool is a
# skip (scripts/setup installs clang and shellcheck), which OB_REQUIRE_ALL=1 makes a failure.
# tests/run: long (minutes: started first)
. "$(dirname "$0")/lib.sh"
plan 4
mk() { env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -s -C "$OB_TOP" "$@"; }   # a make of its own
lcc=${LINT_CC:-clang} sc=${SHELLCHECK:-shellcheck}
rel=${T#"$OB_TOP"/}                  # the scratch directory as make names it (tests/tmp/...)
cat > "$T/planted.c" <<'EOF'
int planted(int k)
{
    int *p = 0;
    return k ? *p : 0;
}
EOF
cat > "$T/planted.sh" <<'EOF'
#!/bin/sh
f=$1
rm -f $f
EOF

# planted: the gate fails, and prints the finding on one line
planted() {   # WHAT TOOL PATTERN MAKE-ARGS...
    local what=$1 tool=$2 pat=$3 out rc
    shift 3
    out=$(mk -j"$(nproc)" lint "$@" 2> "$T/err"); rc=$?
    [ $rc -ne 0 ] && [ "$(wc -l <<<"$out")" -eq 1 ] && grep -qE "$pat" <<<"$out"
    ok $? "make lint fails on a planted $what, one line: $out" ||
        { echo "# exit $rc; $tool said:"; sed 's/^/#   /' "$T/err" | tail -5; }
}
if command -v "$lcc" > /dev/null; then
    planted "null dereference" "$lcc" "^$rel/planted\\.c:4:[0-9]+: warning: .*\\[core\\.NullDereference\\]$" \
        LINT_C="$rel/planted.c" LINT_SH=
else
    skip "make lint fails on a planted null dereference" "$lcc missing (scripts/setup installs clang)"
fi
if command -v "$sc" > /dev/null; then
    planted "unquoted variable" "$sc" "^$rel/planted\\.sh:3:7: .*\\[SC2086\\]$" LINT_C= LINT_SH="$rel/planted.sh"
else
    skip "make lint fails on a planted unquoted variable" "$sc missing (scripts/setup installs shellcheck)"
fi
rm -rf "$OB_TOP/build/lint/$rel" "$OB_TOP/build/lint/sh/$rel"
(cd "$OB_TOP/build/lint" 2> /dev/null && rmdir -p tests/tmp sh/tests/tmp 2> /dev/null)

# the tree: nothing found (each tool alone, so that one's absence skips only its half)
clean() {   # WHAT MAKE-ARGS...
    local what=$1 out rc
    shift
    out=$(mk -j"$(nproc)" lint "$@" 2>&1); rc=$?
    ok $rc "make lint: $what ($(grep '^lint:' <<<"$out"))" || sed 's/^/# /' <<<"$out" | tail -40
}
if command -v "$lcc" > /dev/null; then
    clean "clang's static analyzer finds nothing in lib/ and cmd/" LINT_SH=
else
    skip "make lint: clang's static analyzer over lib/ and cmd/" "$lcc missing (scripts/setup installs clang)"
fi
if command -v "$sc" > /dev/null; then
    clean "shellcheck finds nothing in the scripts" LINT_C=
else
    skip "make lint: shellcheck over the scripts" "$sc missing (scripts/setup installs shellcheck)"
fi
