#!/usr/bin/env bash
# Every command: --help exits 0 with a usage line, --version works, an unknown option exits 2;
# every option the command knows (--list-options) is documented in its man page and shown by
# --help; man pages pass mandoc -Tlint; the bash completion offers the command's options.
. "$(dirname "$0")/lib.sh"

cmds=()
for c in "$OB_TOP"/cmd/1b-*.c; do cmds+=("$(basename "$c" .c)"); done
pages=("$OB_TOP"/man/*.[17])
plan $(( ${#cmds[@]} * 6 + ${#pages[@]} + 2 ))

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
