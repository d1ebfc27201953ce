#!/usr/bin/env bash
# The examples of the manual (man/*.1, man/1b.7: their EXAMPLES sections) and of the README run
# as tests, as jq runs its manual's, so that none of them can rot: every command is run and
# must exit as the page says (0, or "# exit N" at its end), and where the page shows output
# the output must be that (tests/py/examples.py: "..." stands for any text, a line of "..."
# for any lines). A block that cannot run here says so in the page source
# (`.\" example: skip REASON` before its .Bd) and counts as a skip with that reason.
#
# Each page runs in a directory of its own, in order, with the files the examples name:
#   model.gguf, stories260K.gguf      ../shared/models/stories260K.gguf
#   SmolLM2-135M-Instruct.Q4_1.gguf   .cache/models/ (scripts/models fetches it)
#   prompts.jsonl, p.jsonl            tests/data/example-prompts.jsonl: the five prompts whose
#                                     numbers the pages quote (208 generated tokens)
#   prompts-plain.jsonl, contrib/     contrib/prompts-plain.jsonl (the default prompt set as
#                                     plain prompts, for stories260K), the contrib folder
#   book.txt                          a few lines of text
#   model.tar.zst                     stories260K.gguf in a tar archive
#   qwen3/tokenizer.json              ../shared/models/qwen3-tokenizer/
#   bin/, ../shared                   the built commands and the shared folder (README)
#   tests/                            the source tree's (the README's lm-eval tasks)
# and on PATH after bin/ the test python's programs (lm-eval, scripts/setup installs it), with
# Hugging Face's caches in the scratch directory and no network (HF_HOME, *_OFFLINE);
# and a server: the examples' port 8080 (and 8000, another engine's) is a 1b-serve on a free
# port, stories260K with four slots, or the one a page starts itself (`1b-serve ... &`, run
# on a free port and waited for).
# tests/run: long (minutes: started first)
. "$(dirname "$0")/lib.sh"
. "$OB_TOP/tests/py/serve_env.sh"
declare URL_base  # set by name (printf -v), which shellcheck cannot see
S=$SHARED/models/stories260K.gguf
SMOL=$OB_TOP/.cache/models/SmolLM2-135M-Instruct.Q4_1.gguf
EX="$PY $OB_TOP/tests/py/examples.py"
pages=("$OB_TOP"/man/*.1 "$OB_TOP"/man/1b.7 "$OB_TOP"/README)

# every block of every page first: the plan is their number
mkdir -p "$T/ex" "$T/pages"
n=0
for p in "${pages[@]}"; do
    b=$(basename "$p")
    if ! OB_TOP=$OB_TOP $EX extract "$p" "$T/ex/$b" 2> "$T/extract.err"; then
        mkdir -p "$T/ex/$b/000" && echo "$(basename "$p"): $(tail -1 "$T/extract.err")" > "$T/ex/$b/000/error" &&
            echo "$p" > "$T/ex/$b/000/title"
    fi
    n=$((n + $(find "$T/ex/$b" -mindepth 1 -maxdepth 1 -type d 2>/dev/null | wc -l)))
done
plan "$n"

cd "$T" || exit 1
tar --zstd -cf model.tar.zst -C "$SHARED/models" stories260K.gguf
printf '%s\n' 'Once upon a time there was a little dog.' 'The dog liked to run in the park.' \
    'One day it found a red ball under a tree.' > book.txt
ln -s "$SHARED" "$T/pages/shared"
serve_start base -m "$S" --parallel 4 -t 2 || echo "# the examples' server did not start: $(tail -3 "$T/base.log")"
base_port=${URL_base##*:}

fixtures() {                          # DIR
    local d=$1
    mkdir -p "$d"
    ln -s "$S" "$d/model.gguf"
    ln -s "$S" "$d/stories260K.gguf"
    [ -f "$SMOL" ] && ln -s "$SMOL" "$d/SmolLM2-135M-Instruct.Q4_1.gguf"
    cp "$OB_TOP/tests/data/example-prompts.jsonl" "$d/prompts.jsonl"
    cp "$OB_TOP/tests/data/example-prompts.jsonl" "$d/p.jsonl"
    cp "$OB_TOP/contrib/prompts-plain.jsonl" "$d/"
    ln -s "$OB_TOP/contrib" "$d/contrib"
    cp "$T/book.txt" "$T/model.tar.zst" "$d/"
    ln -s "$SHARED/models/qwen3-tokenizer" "$d/qwen3"
    ln -s "$BIN" "$d/bin"
    ln -s "$OB_TOP/tests" "$d/tests"
}

# the examples' servers and ports: 8080 and 8000 become the current server's
ports() { sed -E "s/(localhost|127\.0\.0\.1):(8080|8000)/127.0.0.1:$port/g"; }

# run one shell command of a block; why="" when it did what the page says, else why not
run_cmd() {                           # DIR STEM
    local d=$1 stem=$2 cmd want rc
    cmd=$(ports < "$stem.sh")
    want=$(cat "$stem.exit")
    why=""
    if [[ $cmd =~ ^(bin/)?1b-serve\ (.*)\&[[:space:]]*$ ]]; then
        local args=${BASH_REMATCH[2]}
        args=$(sed -E 's/--port +[0-9]+//' <<<"$args")
        eval "set -- $args"
        nserve=$((nserve + 1))
        cd "$d" || return
        if serve_start "page$nserve" "$@"; then
            local u=URL_page$nserve pid=PID_page$nserve
            port=${!u##*:}
            page_pids+=("${!pid}")
        else
            why="1b-serve did not start: $(tail -2 "$T/page$nserve.log" | tr '\n' ' ')"
        fi
        cd "$T" || return
        return
    fi
    (cd "$d" && PATH="$BIN:$(dirname "$PY"):$PATH" HF_HOME=$T/hf HF_DATASETS_OFFLINE=1 HF_HUB_OFFLINE=1 \
        timeout 300 bash -o pipefail -c "$cmd") > "$stem.out" 2> "$stem.err"
    rc=$?
    if [ "$rc" != "$want" ]; then
        why="exit $rc, the page says $want: $(head -c 300 "$stem.err" | tr '\n' ' ')"
    elif [ -f "$stem.expect" ] && ! $EX match "$stem.expect" "$stem.out"; then
        why="the output is not the page's:
$(diff "$stem.expect" "$stem.out" | head -12)"
    fi
}

nserve=0
for p in "${pages[@]}"; do
    b=$(basename "$p")
    d=$T/pages/$b
    fixtures "$d"
    port=$base_port
    page_pids=()
    for blk in $(find "$T/ex/$b" -mindepth 1 -maxdepth 1 -type d | sort); do
        title=$(cat "$blk/title")
        if [ -f "$blk/error" ]; then
            ok 1 "$title: $(cat "$blk/error")"
            continue
        fi
        if [ -f "$blk/skip" ]; then
            skip "$title" "$(cat "$blk/skip")"
            continue
        fi
        if grep -qs 'SmolLM2-135M-Instruct.Q4_1.gguf' "$blk"/*.sh "$blk"/script.py && [ ! -f "$SMOL" ]; then
            skip "$title" "model SmolLM2-135M-Instruct.Q4_1.gguf missing (scripts/models)"
            continue
        fi
        why=""
        k=0
        if [ -f "$blk/script.py" ]; then
            ports < "$blk/script.py" > "$blk/run.py"
            (cd "$d" && timeout 300 "$PY" "$blk/run.py") > "$blk/py.out" 2> "$blk/py.err" ||
                why="python: $(tail -1 "$blk/py.err")"
            k=1
        else
            for c in $(compgen -G "$blk/*.sh" | sed 's/.*\///; s/\.sh$//' | sort -n); do
                k=$((k + 1))
                run_cmd "$d" "$blk/$c"
                if [ -n "$why" ]; then
                    why="\$ $(head -1 "$blk/$c.sh"): $why"
                    break
                fi
            done
        fi
        [ -z "$why" ]; ok $? "$title: $k command$([ $k -eq 1 ] || echo s)" || printf '%s\n' "$why" | sed 's/^/# /'
    done
    for pid in "${page_pids[@]}"; do
        [ -n "$pid" ] && kill -TERM "$pid" 2>/dev/null
    done
done
