#!/usr/bin/env bash
# Every command: --help exits 0 with a usage line, --version works, an unknown option exits 2;
# every option the command knows (--list-options) is documented in its man page and shown by
# --help; man pages pass mandoc -Tlint; the bash completion offers the command's options.
. "$(dirname "$0")/lib.sh"

cmds=()
# the C commands and those written in Python (cmd/1b-*.py, built into bin/ by make)
for c in "$OB_TOP"/cmd/1b-*.c "$OB_TOP"/cmd/1b-*.py; do [ -e "$c" ] && b=$(basename "$c") && cmds+=("${b%.*}"); done
pages=("$OB_TOP"/man/*.[17])
plan $(( ${#cmds[@]} * 6 + ${#pages[@]} + 2 + ${#cmds[@]} + 6 + 3 + 2 ))

for c in "${cmds[@]}"; do
    out=$("$BIN/$c" --help 2>&1); rc=$?
    [ $rc -eq 0 ] && [[ $out == usage:* ]]; ok $? "$c --help"
    "$BIN/$c" --version | grep -q "^$c [0-9]"; ok $? "$c --version"
    check_exit 2 "$c --no-such-option" "$BIN/$c" --no-such-option
    man="$OB_TOP/man/$c.1"
    [ -f "$man" ]; ok $? "$c has a man page"
    text=$(mandoc -Tascii "$man" 2>/dev/null | col -bx)
    help=$("$BIN/$c" --help)
    missing=""
    for o in $("$BIN/$c" --list-options | sed 's/=.*//'); do
        [ "$o" = --list-options ] && continue
        # the option as a whole word: "-t" must not be found inside "--threads"
        re="(^|[^-[:alnum:]])$o([^-[:alnum:]]|\$)"
        grep -qE -- "$re" <<<"$text" || missing="$missing $o(man)"
        grep -qE -- "$re" <<<"$help" || missing="$missing $o(help)"
    done
    [ -z "$missing" ]; ok $? "$c: every option in its man page and --help${missing:+:$missing}"
    line=$(bash -c 'source "$1/completions/1b.bash"; COMP_WORDS=("$2" --); COMP_CWORD=1; _1b_complete; printf "%s\n" "${COMPREPLY[@]}"' _ "$OB_TOP" "$c" | sort | tr '\n' ' ')
    want=$("$BIN/$c" --list-options | sed 's/=.*//' | grep '^--' | sort | tr '\n' ' ')
    [ "$line" = "$want" ]; ok $? "$c: bash completion offers exactly its options"
done

for p in "${pages[@]}"; do
    check "mandoc -Tlint $(basename "$p")" mandoc -Tlint -W warning "$p"
done

# the exit-status table in 1b(7) names every status the library can produce: the tags of the
# list in its EXIT STATUS section, each with its text, are exactly 0 to 5
text=$(mandoc -Tascii "$OB_TOP/man/1b.7" | col -bx | sed -n '/^EXIT STATUS/,/^[A-Z]/p')
tags=$(grep -oE '^ +[0-9]+ {2,}[^ ]' <<<"$text" | awk '{print $1}' | tr '\n' ' ')
[ "$tags" = "0 1 2 3 4 5 " ]; ok $? "1b(7) documents exit statuses 0-5 (its table: ${tags:-none})"

if command -v zsh >/dev/null; then
    check "zsh completion parses" zsh -n "$OB_TOP/completions/_1b"
else
    skip "zsh completion parses" "zsh not installed"
fi

# the completions are registered for every command (bash's complete line, zsh's #compdef)
bash_cmds=" $(grep '^complete -F' "$OB_TOP/completions/1b.bash" | cut -d' ' -f4-) "
zsh_cmds=" $(sed -n '1s/^#compdef //p' "$OB_TOP/completions/_1b") "
miss_b="" miss_z=""
for c in "${cmds[@]}"; do
    [[ $bash_cmds == *" $c "* ]] || miss_b="$miss_b $c"
    [[ $zsh_cmds == *" $c "* ]] || miss_z="$miss_z $c"
done
[ -z "$miss_b" ]; ok $? "bash completion is registered for every command${miss_b:+: not$miss_b}"
[ -z "$miss_z" ]; ok $? "zsh completion is registered for every command${miss_z:+: not$miss_z}"
# bash completes --preset NAME with exactly 1b-synth's presets (its --help lists them)
line=$(bash -c 'source "$1/completions/1b.bash"; COMP_WORDS=(1b-synth --preset ""); COMP_CWORD=2; _1b_complete; printf "%s\n" "${COMPREPLY[@]}"' _ "$OB_TOP" | sort | tr '\n' ' ')
want=$("$BIN/1b-synth" --help | sed -n 's/.*--preset NAME .*preset: //p' | tr -d ',' | sed 's/ (default)//' | tr ' ' '\n' | grep . | sort | tr '\n' ' ')
[ -n "$want" ] && [ "$line" = "$want" ]; ok $? "bash completion offers 1b-synth's presets (${line:-none}; 1b-synth: ${want:-none})"

# what does not reach standard output is a failure: --help, --version and --list-options to
# /dev/full exit 5 (1b-agree: 2, its "trouble") with one line naming stdout
for c in "${cmds[@]}"; do
    want=5; [ "$c" = 1b-agree ] && want=2
    bad=""
    for o in --help --version --list-options; do
        "$BIN/$c" $o > /dev/full 2> "$T/err"; rc=$?
        [ $rc -eq $want ] && [ "$(cat "$T/err")" = "$c: stdout: No space left on device" ] || bad="$bad $o(exit $rc)"
    done
    [ -z "$bad" ]; ok $? "$c: --help, --version, --list-options > /dev/full: exit $want, one line${bad:+:$bad}"
done
# a closed pipe is a failed write too: exit 5 (1b-agree 2) and one line, not death by SIGPIPE
# (a Python parent restores SIGPIPE's default in its child, so the command ignores it itself)
closed() { "$PY" -c 'import os, subprocess, sys
r, w = os.pipe(); os.close(r)
sys.exit(subprocess.run(sys.argv[1:], stdout=w, stdin=subprocess.DEVNULL).returncode)' "$@"; }
bad=""
for c in "${cmds[@]}"; do
    want=5; [ "$c" = 1b-agree ] && want=2
    closed "$BIN/$c" --help 2> "$T/err"; rc=$?
    [ $rc -eq $want ] && [ "$(cat "$T/err")" = "$c: stdout: Broken pipe" ] || bad="$bad $c(exit $rc)"
done
[ -z "$bad" ]; ok $? "--help into a closed pipe: exit 5 (1b-agree 2), one line naming stdout${bad:+:$bad}"
printf '{"id":"a","prompt":"Once","max_tokens":2}\n' > "$T/p.jsonl"
closed "$BIN/1b-gen" -m "$SHARED/models/stories260K.gguf" -t 1 "$T/p.jsonl" 2> "$T/err"; rc=$?
closed "$BIN/1b-load" "$SHARED/models/stories260K.gguf" 2>> "$T/err"; rc2=$?
[ $rc -eq 5 ] && [ $rc2 -eq 5 ] && [ "$(cat "$T/err")" = "$(printf '%s\n' "1b-gen: stdout: write: Broken pipe" "1b-load: stdout: write: Broken pipe")" ]
ok $? "1b-gen's records and 1b-load's report into a closed pipe: exit 5, one line each (exit $rc, $rc2)"
# and so is a record or a report that cannot be written
"$BIN/1b-load" "$SHARED/models/stories260K.gguf" > /dev/full 2> "$T/err"; rc=$?
[ $rc -eq 5 ] && [ "$(cat "$T/err")" = "1b-load: stdout: write: No space left on device" ]
ok $? "1b-load > /dev/full: exit 5, one line ($(head -1 "$T/err"))"
echo '{"id":"a","tokens":[{"id":1,"logprob":-0.5}]}' > "$T/a.jsonl"
"$BIN/1b-agree" "$T/a.jsonl" "$T/a.jsonl" > /dev/full 2> "$T/err"; rc=$?
"$BIN/1b-agree" --json - "$T/a.jsonl" "$T/a.jsonl" > /dev/full 2>> "$T/err"; rc2=$?
[ $rc -eq 2 ] && [ $rc2 -eq 2 ] && [ "$(wc -l < "$T/err")" -eq 2 ]
ok $? "1b-agree > /dev/full (table, --json -): exit 2, one line each"

# an output that cannot be written is found before the work (here: before a missing input or
# tokenizer is even looked at); an input that is a directory is named as one
mkdir -p "$T/dir"
"$BIN/1b-agree" --json "$T/dir" "$T/missing.jsonl" 2> "$T/err"; rc=$?
[ $rc -eq 2 ] && [ "$(cat "$T/err")" = "1b-agree: $T/dir: Is a directory" ]
ok $? "1b-agree --json DIR: refused before the inputs are read ($(head -1 "$T/err"))"
"$BIN/1b-synth" --tokenizer "$T/missing.json" -o "$T/dir" 2> "$T/err"; rc=$?
"$BIN/1b-synth" --tokenizer "$T/missing.json" -o "$T/missing-dir/m.gguf" 2>> "$T/err"; rc2=$?
[ $rc -eq 5 ] && [ $rc2 -eq 5 ] && [ "$(cat "$T/err")" = "$(printf '%s\n' "1b-synth: $T/dir: is a directory" "1b-synth: $T/missing-dir/m.gguf: No such file or directory")" ]
ok $? "1b-synth -o DIR, -o MISSING/FILE: refused before the model is made, named once ($(head -1 "$T/err"))"
"$BIN/1b-serve" -m "$SHARED/models/stories260K.gguf" --api-key-file "$T/dir" 2> "$T/err"; rc=$?
[ $rc -eq 3 ] && [ "$(cat "$T/err")" = "1b-serve: --api-key-file: $T/dir: is a directory" ]
ok $? "1b-serve --api-key-file DIR: exit 3, named as a directory, not as empty"

# a word on the command line is quoted with its control bytes escaped
bad=""
for c in "${cmds[@]}"; do
    "$BIN/$c" $'--x\e[31m' 2> "$T/err" > /dev/null
    [ "$(head -1 "$T/err")" = "$c: unknown option '--x\x1b[31m'" ] || bad="$bad $c"
done
[ -z "$bad" ]; ok $? "an unknown option with an escape character is quoted escaped${bad:+:$bad}"
