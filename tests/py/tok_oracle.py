#!/usr/bin/env python3
"""tok_oracle.py — reference tokenizations for tests/t4100-tok.sh, from the tokenizers and
sentencepiece packages, compared with what `bin/unit/tok dump` printed.

  tok_oracle.py nfc CORPUS                          the corpus with every valid-UTF-8 line NFC
                                                    normalized (invalid lines as they are)
  tok_oracle.py check KIND SRC CORPUS OURS [--drop-normalizer]

KIND and the oracle it builds:
  hf      SRC is a tokenizer.json, loaded as it is ("special" ids) and with its added tokens
          removed ("plain" ids: nothing in the text can become an added token). With
          --drop-normalizer the file's normalizer (NFC for Qwen) is removed from both.
  smollm  SRC is a GGUF (gpt2 model, pre "smollm"): a tokenizers BPE over the file's tokens and
          merges with the pre-tokenizer Sequence[Digits(individual_digits), ByteLevel(no prefix
          space, GPT-2 regex)], as SmolLM2's tokenizer.json has it, no normalizer. The tokens of
          type CONTROL and USER_DEFINED are its added tokens for the "special" ids.
  spm     SRC is a GGUF (llama model): a sentencepiece ModelProto built from the file's tokens,
          scores and types (BPE, byte_fallback, add_dummy_prefix = tokenizer.ggml.add_space_prefix
          (default true), identity normalization, remove_extra_whitespaces off — GGUF/llama.cpp
          keep whitespace runs), with two conversions of llama.cpp's converter undone so that
          the proto is the model's own tokenizer.model again: the unknown token gets type
          UNKNOWN (the converter marks it CONTROL when tokenizer_config.json lists it as
          special; sentencepiece needs one UNKNOWN piece), and USER_DEFINED pieces get their
          spaces back as U+2581 (the converter "pre-normalizes" them to spaces). sentencepiece
          then matches user-defined pieces itself, always, in the escaped text (Gemma's
          whitespace runs, newline runs, HTML tags). It has no notion of parse_special, so the
          "special" ids are: the text cut at CONTROL token texts (leftmost, then longest), each
          stretch encoded by sentencepiece (each gets the dummy prefix, as in llama.cpp, where
          every stretch follows the start or a special token), the tokens in between. Real
          Gemma 3 (tests/t4100): its tokenizer.model is a sentencepiece BPE model, so this
          rebuilt proto is the reference; Hugging Face's tokenizer.json for it is not in the
          GGUF and not fetched.

Lines that are not valid UTF-8 cannot be given to either package (both take str): they are
skipped here and covered by the round-trip and fuzz tests. Exit 0 when every compared line
gives identical ids in both modes, else 1 with each difference shown token by token.
"""
import json
import sys
import unicodedata


def read_corpus(path):
    out = []
    for line in open(path, "rb").read().split(b"\n"):
        if not line:
            continue
        v = json.loads(line)
        if isinstance(v, str):
            out.append(v.encode("utf-8"))
        else:
            out.append(bytes.fromhex(v["hex"].replace(" ", "")))
    return out


def cmd_nfc(corpus):
    for b in read_corpus(corpus):
        try:
            s = unicodedata.normalize("NFC", b.decode("utf-8"))
            print(json.dumps({"hex": s.encode("utf-8").hex()}))
        except UnicodeDecodeError:
            print(json.dumps({"hex": b.hex()}))


def gguf_fields(path):
    from gguf import GGUFReader
    r = GGUFReader(path)

    def get(key, default=None):
        f = r.fields.get(key)
        if f is None:
            return default
        if f.types[0].name == "ARRAY":
            if f.types[1].name == "STRING":
                return [bytes(f.parts[i]).decode("utf-8") for i in f.data]
            return [f.parts[i].tolist()[0] for i in f.data]
        v = f.parts[f.data[0]]
        if f.types[0].name == "STRING":
            return bytes(v).decode("utf-8")
        return v.tolist()[0]
    return get


def hf_oracles(src, drop_normalizer):
    from tokenizers import Tokenizer
    d = json.load(open(src, encoding="utf-8"))
    if drop_normalizer:
        d["normalizer"] = None
    full = Tokenizer.from_str(json.dumps(d))
    d["added_tokens"] = []
    plain = Tokenizer.from_str(json.dumps(d))
    enc = lambda t: (lambda s: t.encode(s, add_special_tokens=False).ids)
    return enc(plain), enc(full), full


def smollm_oracles(src):
    from tokenizers import Tokenizer, AddedToken, models, pre_tokenizers, decoders
    get = gguf_fields(src)
    toks, types = get("tokenizer.ggml.tokens"), get("tokenizer.ggml.token_type")
    merges = get("tokenizer.ggml.merges")
    vocab = {}
    for i, t in enumerate(toks):
        vocab.setdefault(t, i)

    def build(with_added):
        t = Tokenizer(models.BPE(vocab=vocab, merges=[tuple(m.split(" ", 1)) for m in merges]))
        t.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Digits(individual_digits=True),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)])
        t.decoder = decoders.ByteLevel()
        if with_added:
            t.add_special_tokens([AddedToken(s, special=True, normalized=False)
                                  for s, ty in zip(toks, types) if ty in (3, 4)])
        return t
    plain, full = build(False), build(True)
    enc = lambda t: (lambda s: t.encode(s, add_special_tokens=False).ids)
    return enc(plain), enc(full), full


def spm_oracles(src):
    import sentencepiece as spm
    from sentencepiece import sentencepiece_model_pb2 as pb
    get = gguf_fields(src)
    toks, types = get("tokenizer.ggml.tokens"), get("tokenizer.ggml.token_type")
    scores = get("tokenizer.ggml.scores")
    m = pb.ModelProto()
    unk = get("tokenizer.ggml.unknown_token_id", 0)
    for i, (t, s, ty) in enumerate(zip(toks, scores, types)):
        p = m.pieces.add()
        if ty == 4:
            t = t.replace(" ", "\u2581")
        if i == unk:
            ty = 2
        p.piece, p.score, p.type = t, s, ty
    ts = m.trainer_spec
    ts.model_type = pb.TrainerSpec.BPE
    ts.byte_fallback = True
    ts.vocab_size = len(toks)
    ts.unk_id = unk
    ts.bos_id = get("tokenizer.ggml.bos_token_id", -1)
    ts.eos_id = get("tokenizer.ggml.eos_token_id", -1)
    ts.pad_id = -1
    ns = m.normalizer_spec
    ns.name = "identity"
    ns.add_dummy_prefix = bool(get("tokenizer.ggml.add_space_prefix", True))
    ns.remove_extra_whitespaces = False
    ns.escape_whitespaces = True
    sp = spm.SentencePieceProcessor(model_proto=m.SerializeToString())
    specials = sorted({(t, i) for i, (t, ty) in enumerate(zip(toks, types)) if ty == 3 and t},
                      key=lambda x: x[1])
    first = {}
    for t, i in specials:
        first.setdefault(t, i)

    def plain(s):
        return sp.encode(s)

    def special(s):
        out, frag, i = [], 0, 0
        while i < len(s):
            best = max((t for t in first if s.startswith(t, i)), key=len, default=None)
            if best is None:
                i += 1
                continue
            if i > frag:
                out += sp.encode(s[frag:i])
            out.append(first[best])
            i = frag = i + len(best)
        if frag < len(s):
            out += sp.encode(s[frag:])
        return out

    class Show:
        def id_to_token(self, i):
            return sp.id_to_piece(i)
    return plain, special, Show()


def cmd_check(kind, src, corpus, ours, drop_normalizer):
    if kind == "hf":
        plain, special, show = hf_oracles(src, drop_normalizer)
    elif kind == "smollm":
        plain, special, show = smollm_oracles(src)
    elif kind == "spm":
        plain, special, show = spm_oracles(src)
    else:
        sys.exit("unknown kind " + kind)
    lines = read_corpus(corpus)
    got = [json.loads(x) for x in open(ours, encoding="utf-8") if x.strip()]
    if len(got) != len(lines):
        print("# %s has %d records for %d corpus lines" % (ours, len(got), len(lines)))
        return 1
    compared = skipped = bad = 0
    for n, (b, g) in enumerate(zip(lines, got), 1):
        try:
            s = b.decode("utf-8")
        except UnicodeDecodeError:
            skipped += 1
            continue
        compared += 1
        for mode, fn in (("plain", plain), ("special", special)):
            want = fn(s)
            if want != g[mode]:
                bad += 1
                print("# line %d (%s) %r" % (n, mode, s[:80]))
                print("#   want %s" % [(i, show.id_to_token(i)) for i in want][:40])
                print("#   got  %s" % [(i, show.id_to_token(i)) for i in g[mode]][:40])
    print("# %s: %d lines compared in 2 modes, %d differ; %d lines skipped (not UTF-8)"
          % (kind, compared, bad, skipped))
    return 1 if bad or not compared else 0


def main(argv):
    if len(argv) >= 2 and argv[0] == "nfc":
        cmd_nfc(argv[1])
        return 0
    if len(argv) >= 5 and argv[0] == "check":
        return cmd_check(argv[1], argv[2], argv[3], argv[4], "--drop-normalizer" in argv[5:])
    sys.stderr.write(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
