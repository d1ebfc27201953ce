# bash completion for the 1b commands.
# Options come from the command itself (`CMD --list-options`: one "--name" or "--name=ARG"
# per line), and so do the types --type takes (`CMD --list-types`), so the completion cannot
# drift from the code.

_1b_complete()
{
    local cur=${COMP_WORDS[COMP_CWORD]} prev=
    [ "$COMP_CWORD" -gt 0 ] && prev=${COMP_WORDS[COMP_CWORD-1]}
    local cmd=${COMP_WORDS[0]} opts spec
    opts=$("$cmd" --list-options 2>/dev/null) || return 0
    COMPREPLY=()
    if [[ $prev == -* ]]; then
        spec=$(printf '%s\n' "$opts" | grep -E -- "^${prev}(=|\$)" | head -n 1)
        case $spec in
        *=ROUTE) COMPREPLY=($(compgen -W "cpu ref hrx hrx-sim npu npu-sim" -- "$cur")); return 0 ;;
        *=TYPE|*=MIX) COMPREPLY=($(compgen -W "$("$cmd" --list-types 2>/dev/null)" -- "$cur")); return 0 ;;
        *=MODE) COMPREPLY=($(compgen -W "ngram draft off" -- "$cur")); return 0 ;;
        *=FILE|*=MODEL|*=DIR|*=OUT) COMPREPLY=($(compgen -f -- "$cur")); compopt -o filenames 2>/dev/null; return 0 ;;
        *=NAME) COMPREPLY=($(compgen -W "qwen3-tiny qwen3-small qwen2-tiny llama-tiny qwen3-0.6b gemma3-tiny gemma3-270m" -- "$cur")); return 0 ;;
        *=*) return 0 ;;                    # a value that cannot be guessed
        esac
    fi
    if [[ $cur == -* ]]; then
        COMPREPLY=($(compgen -W "$(printf '%s\n' "$opts" | sed 's/=.*//')" -- "$cur"))
    else
        COMPREPLY=($(compgen -f -- "$cur"))
        compopt -o filenames 2>/dev/null
    fi
    return 0
}

complete -F _1b_complete 1b-load 1b-synth 1b-gen 1b-serve 1b-logprobs 1b-agree 1b-batchrep 1b-requant 1b-report
