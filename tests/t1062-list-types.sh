#!/usr/bin/env bash
# --list-types: the names 1b-synth and 1b-requant take as --type, made from the one list of
# types (lib/types.h), and what the shell completions offer for --type (they ask it):
#  - 1b-requant lists q4nx, then exactly 1b-synth's names: the weight types in the order of
#    types.h's OB_TYPES_FLOAT, OB_TYPES_A8 and OB_TYPES_Q8K rows, then the K-quant mixes;
#  - each name listed is taken (1b-synth writes a model of it), and an unknown name's message
#    offers the same list;
#  - bash completes --type with the list for both commands, zsh builds its specs from it;
#  - --list-types into /dev/full: exit 5, one line naming stdout.
. "$(dirname "$0")/lib.sh"
plan 7
cd "$T" || exit 1

1b-synth --list-types > s.txt; rc=$?
1b-requant --list-types > r.txt; rc2=$?
{ echo q4nx; cat s.txt; } > want.txt
[ $rc -eq 0 ] && [ $rc2 -eq 0 ] && cmp -s want.txt r.txt
ok $? "1b-requant lists q4nx, then 1b-synth's $(wc -l < s.txt) names (exit $rc, $rc2)"

rows=$(sed -nE '/^#define OB_TYPES_(FLOAT|A8|Q8K)\(X\)/,/^$/s/^ *X\([A-Z0-9_]+, ([a-z0-9_]+),.*/\1/p' \
       "$OB_TOP/lib/types.h")
list=$(tr '\n' ' ' < s.txt)
[ -n "$rows" ] && [ "$list" = "$(tr '\n' ' ' <<<"$rows")q3_k_s q3_k_m q3_k_l q4_k_s q4_k_m q5_k_s q5_k_m " ]
ok $? "the weight types of lib/types.h in its order, then the K-quant mixes ($list)"

bad=""
while read -r t; do
    1b-synth --preset llama-tiny --embd 256 --ff 512 --layers 1 --vocab 512 --type "$t" \
        -o "m-$t.gguf" 2> err.txt || bad+=" $t($(head -c 100 err.txt))"
done < s.txt
[ -z "$bad" ]; ok $? "1b-synth writes a model of every type listed${bad:+: not$bad}"

1b-synth --type q7_k -o x.gguf 2> e1.txt
1b-requant --type q7_k -o y.gguf m-f32.gguf 2> e2.txt
[ "$(sed -n 's/.*(use one of: \(.*\))$/\1 /p' e1.txt)" = "$list" ] &&
    [ "$(sed -n 's/.*(q4nx, or one of: \(.*\))$/q4nx \1 /p' e2.txt)" = "$(tr '\n' ' ' < r.txt)" ]
ok $? "an unknown type's message offers the same names ($(head -1 e1.txt); $(head -1 e2.txt))"

bad=""
for c in 1b-synth 1b-requant; do
    got=$(bash -c 'source "$1/completions/1b.bash"; COMP_WORDS=("$2" --type ""); COMP_CWORD=2; _1b_complete; printf "%s\n" "${COMPREPLY[@]}"' _ "$OB_TOP" "$c" | sort)
    [ "$got" = "$("$c" --list-types | sort)" ] || bad+=" $c"
done
[ -z "$bad" ]; ok $? "bash completes --type with --list-types' names${bad:+: not for$bad}"

if command -v zsh >/dev/null; then
    bad=""
    for c in 1b-synth 1b-requant; do
        # the specs _1b hands to _arguments, _arguments replaced by a printer
        got=$(zsh -c 'words=("$2"); _arguments() { printf "%s\n" "$@"; }; source "$1/completions/_1b"' _ "$OB_TOP" "$c" | sed -n 's/^--type\[type\]:[A-Z]*:(\(.*\))$/\1/p')
        [ "$got" = "$("$c" --list-types | tr '\n' ' ' | sed 's/ $//')" ] || bad+=" $c($got)"
    done
    [ -z "$bad" ]; ok $? "zsh's --type spec holds --list-types' names${bad:+: not for$bad}"
else
    skip "zsh's --type spec holds --list-types' names" "zsh not installed"
fi

bad=""
for c in 1b-synth 1b-requant; do
    "$c" --list-types > /dev/full 2> err.txt; rc=$?
    [ $rc -eq 5 ] && [ "$(cat err.txt)" = "$c: stdout: No space left on device" ] || bad+=" $c(exit $rc)"
done
[ -z "$bad" ]; ok $? "--list-types > /dev/full: exit 5, one line naming stdout${bad:+:$bad}"
