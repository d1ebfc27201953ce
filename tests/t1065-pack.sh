#!/usr/bin/env bash
# Q4NX packs (man/1b.7): written by 1b-requant, read by 1b-load and every command's model
# loader, alone or inside an archive; a bad pack is refused with exit 3 and a message naming
# what is wrong (truncated, wrong version or format, missing or duplicated tensor, a tensor
# outside its file, hyper-parameters that disagree with meta.gguf, a file name that leaves the
# pack, a damaged file found by --check), by 1b-load and by 1b-gen alike; a pack runs on
# npu-sim and on the ref oracle, not on cpu.
. "$(dirname "$0")/lib.sh"
TOK=$SHARED/models/qwen3-tokenizer/tokenizer.json
plan 29
cd "$T" || exit 1
echo '{"id":"a","prompt":"Once upon a time","max_tokens":6}' > p.jsonl
1b-synth --preset qwen3-small --vocab 4000 --type q4_k_m --tokenizer "$TOK" -o m.gguf
1b-requant --type q4nx -o good m.gguf > rep.jsonl

# a good pack
1b-load good > load.json; rc=$?
[ $rc -eq 0 ] && jq -e '.format == "q4nx-pack" and .version == 1 and .types.Q4NX.tensors == 15
    and .types.F32.tensors == 9 and .hparams.n_layer == 2 and (.sha256 | length) == 64' load.json > /dev/null
ok $? "1b-load: format, version, 15 Q4NX and 9 F32 tensors, the manifest's sha256"
jq -e --slurpfile r rep.jsonl '.source.sha256 == ($r[-1].source_sha256) and .sha256 == ($r[-1].sha256)' load.json > /dev/null
ok $? "  the source GGUF's sha256 and the pack's identity are 1b-requant's"
jq -e '.format == "1b-q4nx" and .version == 1 and .architecture == "qwen3" and .hparams.n_embd == 256
    and .tokenizer.model == "gpt2" and .tokenizer.n_tokens == 4000 and .chat_template.name == "qwen3"
    and .meta == "meta.gguf" and (.tensors | length) == 15 and all(.tensors[]; .offset % 4096 == 0)' good/manifest.json > /dev/null
ok $? "the manifest: format, version, architecture, hparams, tokenizer, chat template, 15 page-aligned tiles"
1b-load --check good | jq -e '.check.ok and .check.files_verified and .check.nan == 0' > /dev/null
ok $? "1b-load --check: every file's sha256 verified, no NaN or Inf"
n=$(1b-load --tensors good | jq -s 'map(select(.tensor)) | length')
[ "$n" = 24 ]; ok $? "1b-load --tensors: 24 tensor records ($n)"
1b-load --meta tokenizer.ggml.model good | grep -qx '"gpt2"'
ok $? "1b-load --meta reads the meta GGUF's keys"
1b-gen -m good -d npu-sim < p.jsonl > sim.jsonl && jq -e '.route == "npu-sim" and (.tokens | length) == 6' sim.jsonl > /dev/null
ok $? "1b-gen -d npu-sim runs the pack"
1b-gen -m good -d ref < p.jsonl | jq -e '.route == "ref" and (.tokens | length) == 6' > /dev/null
ok $? "1b-gen -d ref runs the pack (its tiles dequantised: the pack's float64 oracle)"
out=$(1b-gen -m good -d cpu < p.jsonl 2>&1 >/dev/null); rc=$?
[ $rc -eq 3 ] && grep -q "no kernels for Q4NX weights: the model is a Q4NX pack, which -d npu-sim" <<<"$out"
ok $? "-d cpu on a pack: exit 3, pointing at npu-sim ($out)"
out=$(1b-gen -m m.gguf -d npu-sim < p.jsonl 2>&1 >/dev/null); rc=$?
[ $rc -eq 3 ] && grep -q "runs Q4NX packs, and this model has Q6_K weights (1b-requant --type q4nx" <<<"$out"
ok $? "-d npu-sim on a GGUF: exit 3, pointing at 1b-requant ($out)"

# bad packs: NAME | what is done to a copy | the message expected
bad() {  # name command... (run in the copy's directory); then the expected message
    local name=$1 want=$2; shift 2
    rm -rf "$name"; cp -r good "$name"
    (cd "$name" && eval "$*")
    local o1 o2 r1 r2
    o1=$(1b-load "$name" 2>&1 >/dev/null); r1=$?
    o2=$(1b-gen -m "$name" -d npu-sim < p.jsonl 2>&1 >/dev/null); r2=$?
    [ $r1 -eq 3 ] && [ $r2 -eq 3 ] && grep -q -- "$want" <<<"$o1" && grep -q -- "$want" <<<"$o2"
    ok $? "$name: 1b-load and 1b-gen exit 3 ($r1, $r2): $o1"
}
man() { jq -c "$1" manifest.json > m.tmp && mv m.tmp manifest.json; }
bad truncated "weights.q4nx: 1000000 bytes where the manifest gives" "truncate -s 1000000 weights.q4nx"
bad version2 "pack version 2; this 1b reads version 1" "man '.version = 2'"
bad format "format is \"gguf\", not \"1b-q4nx\"" "man '.format = \"gguf\"'"
bad missing "tensor 'blk.1.attn_k.weight' is missing" "man '.tensors |= map(select(.name != \"blk.1.attn_k.weight\"))'"
bad twice "tensor 'blk.0.attn_q.weight' is listed twice" "man '.tensors += [.tensors[1]]'"
bad outside "bytes 2015232..2056192 are not inside weights.q4nx" "man '.tensors[1].offset = 2015232'"
bad wrongsize "but \[256, 256\] Q4NX takes 40960" "man '.tensors[1].bytes = 40000'"
bad shape "shape is not \[k, n\] with k a multiple of 32" "man '.tensors[1].shape = [250, 256]'"
bad hparams "hparams.n_layer is 3 but meta.gguf gives 2" "man '.hparams.n_layer = 3'"
bad escape "files: '../m.gguf' is not a plain file name" "man '.files[\"../m.gguf\"] = .files[\"meta.gguf\"]'"
bad nometa "meta.gguf: No such file" "rm meta.gguf"
bad notjson "manifest.json" "echo '{not json' > manifest.json"
bad emptydir "not a Q4NX pack (no manifest.json)" "rm -f *"

# a damaged byte: the pack opens (no hash at every load), --check finds it
rm -rf damaged; cp -r good damaged
printf '\x55' | dd of=damaged/weights.q4nx bs=1 seek=5000 conv=notrunc status=none
1b-load damaged > /dev/null; r1=$?
out=$(1b-load --check damaged 2>&1 >/dev/null); r2=$?
[ $r1 -eq 0 ] && [ $r2 -eq 3 ] && grep -q "weights.q4nx: sha256 .*, but the manifest gives" <<<"$out"
ok $? "a damaged byte: 1b-load opens it ($r1), 1b-load --check exits 3 ($r2: $out)"

# inside archives: tar with the directory, zip of its files; a truncated one refused
export OB_CACHE_DIR=$T/cache
tar cf good.tar good && (cd good && zip -q ../good.zip ./*) && tar -C good --zstd -cf good.tar.zst .
for a in good.tar good.zip good.tar.zst; do
    1b-gen -m "$a" -d npu-sim < p.jsonl > "$a.jsonl" 2> err.txt
    cmp -s <(jq -c .tokens "$a.jsonl") <(jq -c .tokens sim.jsonl)
    ok $? "$a: the same tokens and bits as the directory ($(head -c 200 err.txt))"
done
compgen -G 'cache/blobs/*.q4nx' > /dev/null && jq -e --slurpfile r rep.jsonl '.path | endswith($r[-1].sha256 + ".q4nx")' \
    <(1b-load good.zip) > /dev/null
ok $? "the archives' pack is extracted once, named by its manifest's sha256"
rm -rf cutp && cp -r good cutp && truncate -s 300000 cutp/weights.q4nx && tar cf cutp.tar cutp
out=$(1b-load cutp.tar 2>&1); rc=$?
[ $rc -eq 3 ] && [ -z "$(find cache/blobs -mindepth 1 -maxdepth 1 ! -name '*.q4nx')" ]
ok $? "a pack archived truncated: exit 3, no partial directory left in the cache ($out)"
