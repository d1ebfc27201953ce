#!/usr/bin/env python3
"""chat_oracle.py — reference chat renderings for tests/t4200-chat.sh: the REAL template strings
rendered by jinja2 (as Hugging Face's apply_chat_template renders them), compared with what
`bin/unit/chat render` printed.

  chat_oracle.py check TEMPLATE TOKENIZER CASES OURS

TEMPLATE  tokenizer_config.json (its "chat_template"), a .gguf (its tokenizer.chat_template), a
          .jinja file (the template itself, e.g. Google's Gemma 3 template, or 1b's built-in one
          printed by `chat builtin gemma3`). (A model without a template has no rendering:
          1b refuses its conversations, see t4200.)
TOKENIZER hf:tokenizer.json   the tokenizers package on that file, NFC normalizer removed (1b does
                              not normalize; see tok_oracle.py)
          smollm:FILE.gguf    tok_oracle.py's SmolLM2 tokenizers oracle
          spm:FILE.gguf       tok_oracle.py's sentencepiece oracle (its special tokens are
                              the CONTROL ones: sentencepiece matches user-defined pieces
                              itself, in content as anywhere)
CASES     JSON lines: name, messages, add_generation_prompt (default true), enable_thinking
          (absent: not passed to the template), "ids": false (compare text only),
          "expect_error": true (1b must refuse the conversation); a conversation the template
          itself refuses (raise_exception, e.g. Gemma's roles that do not alternate) must be
          refused by 1b too
OURS      the output of `chat render` for the same CASES

Checks per case:
  text   our rendering equals jinja2's byte for byte.
  ids    our token ids equal the oracle's for the rule of lib/chat.h: special tokens only where
         the template writes them. The oracle finds those by rendering again with every
         special-token text inside message content "defused" (U+E000 inserted after its first
         character), so that every special-token text left in the output came from the
         template; it splits there, drops the U+E000 marks and encodes each stretch of text
         with the plain tokenizer (no added tokens). For a template that parses <think> and
         </think> out of assistant content (Qwen3), the tags it parses are left as they are.
         The defused rendering must equal the real one once the marks are dropped, else the
         oracle cannot tell and the case fails.
  hf     where the output holds no special-token text from content: our ids also equal the
         tokenizer run on the whole rendered string with special tokens matched everywhere (what
         apply_chat_template(tokenize=True) gives).
  stops  the first stop token is <|im_end|> (ChatML templates) or <end_of_turn> (Gemma).
Exit 0 when every case passes, else 1 with the differences.
"""
import json
import os
import re
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tok_oracle  # noqa: E402

MARK = "\ue000"


def gguf_meta(path):
    """The metadata of a GGUF file (v2/v3) as a get(key, default) function, like
    tok_oracle.gguf_fields: the gguf package's reader also maps every tensor and takes ~13 s
    on SmolLM2's 49k-token vocabulary; this reads only the key-value section."""
    scalar = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?",
              10: "<Q", 11: "<q", 12: "<d"}
    with open(path, "rb") as f:
        head = f.read(24)
        if head[:4] != b"GGUF":
            raise ValueError(f"{path}: not a GGUF file")
        n_kv = struct.unpack_from("<Q", head, 16)[0]
        buf = head + f.read(64 << 20)          # metadata lies well inside the first 64 MiB
    pos = 24

    def value(t):
        nonlocal pos
        if t in scalar:
            v = struct.unpack_from(scalar[t], buf, pos)[0]
            pos += struct.calcsize(scalar[t])
            return v
        if t == 8:
            n = struct.unpack_from("<Q", buf, pos)[0]
            pos += 8 + n
            return buf[pos - n:pos].decode("utf-8")
        if t == 9:
            et, n = struct.unpack_from("<IQ", buf, pos)
            pos += 12
            return [value(et) for _ in range(n)]
        raise ValueError(f"{path}: metadata type {t}")

    meta = {}
    for _ in range(n_kv):
        n = struct.unpack_from("<Q", buf, pos)[0]
        key = buf[pos + 8:pos + 8 + n].decode("utf-8")
        pos += 8 + n
        t = struct.unpack_from("<I", buf, pos)[0]
        pos += 4
        meta[key] = value(t)
    return lambda key, default=None: meta.get(key, default)


_meta_cache = {}


def gguf_fields(path):
    if path not in _meta_cache:
        _meta_cache[path] = gguf_meta(path)
    return _meta_cache[path]


tok_oracle.gguf_fields = gguf_fields     # tok_oracle's oracles read their GGUF through this


def load_template(src):
    if src.endswith(".json"):
        return json.load(open(src, encoding="utf-8"))["chat_template"]
    if src.endswith(".jinja"):
        return open(src, encoding="utf-8").read()
    return gguf_fields(src)("tokenizer.chat_template")


def jinja_env():
    from jinja2.ext import loopcontrols
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    def raise_exception(msg):
        raise RuntimeError(msg)

    # the settings apply_chat_template uses
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[loopcontrols])
    env.filters["tojson"] = lambda x, indent=None, separators=None, sort_keys=False: \
        json.dumps(x, ensure_ascii=False, indent=indent, separators=separators,
                   sort_keys=sort_keys)
    env.globals["raise_exception"] = raise_exception
    return env


_compiled = {}


def render(tmpl, case, msgs):
    if tmpl not in _compiled:
        _compiled[tmpl] = jinja_env().from_string(tmpl)
    kw = {"messages": msgs, "add_generation_prompt": case.get("add_generation_prompt", True)}
    if "enable_thinking" in case:
        kw["enable_thinking"] = case["enable_thinking"]
    return _compiled[tmpl].render(**kw)


class Tok:
    """plain(text) -> ids without added tokens; full(text) -> ids with them; specials:
    text -> id of the added/control tokens; bos: id to prepend or None; eos."""

    def __init__(self, spec):
        kind, src = spec.split(":", 1)
        if kind == "hf":
            plain, full, _ = tok_oracle.hf_oracles(src, True)
            d = json.load(open(src, encoding="utf-8"))
            self.specials = {}
            for t in d["added_tokens"]:
                self.specials.setdefault(t["content"], t["id"])
            self.bos = None                     # Qwen: no BOS
            self.eos = self.specials.get("<|im_end|>")
        else:
            plain, full, _ = (tok_oracle.smollm_oracles if kind == "smollm"
                              else tok_oracle.spm_oracles)(src)
            get = gguf_fields(src)
            toks, types = get("tokenizer.ggml.tokens"), get("tokenizer.ggml.token_type")
            self.specials = {}
            for i, (t, ty) in enumerate(zip(toks, types)):
                if (ty == 3 or (ty == 4 and kind != "spm")) and t:
                    self.specials.setdefault(t, i)
            add_bos = get("tokenizer.ggml.add_bos_token", kind == "spm")
            self.bos = get("tokenizer.ggml.bos_token_id") if add_bos else None
            self.eos = get("tokenizer.ggml.eos_token_id")
        self.plain, self.full = plain, full
        alts = sorted(self.specials, key=len, reverse=True)
        self.pat = re.compile("(" + "|".join(re.escape(s) for s in alts) + ")")

    def defuse(self, s, keep=()):
        return self.pat.sub(lambda m: m.group(0) if m.group(0) in keep
                            else m.group(0)[0] + MARK + m.group(0)[1:], s)


def defused_messages(tok, msgs, parses_think):
    out = []
    for m in msgs:
        d = dict(m)
        c = m["content"]
        if m["role"] == "assistant" and parses_think and "reasoning_content" not in m \
                and "</think>" in c:
            # the template cuts reasoning out of c before its first </think> (after the last
            # <think> there) and the answer after its last </think>: those tags stay raw
            i = c.index("</think>")
            d["content"] = tok.defuse(c[:i], keep=("<think>",)) + \
                tok.defuse(c[i:], keep=("</think>",))
        else:
            d["content"] = tok.defuse(c)
        if "reasoning_content" in m:
            d["reasoning_content"] = tok.defuse(m["reasoning_content"])
        out.append(d)
    return out


def oracle_ids(tok, text):
    """split at special-token texts (all from the template), encode the stretches plainly"""
    ids = [] if tok.bos is None else [tok.bos]
    for k, part in enumerate(tok.pat.split(text)):
        if k % 2:
            ids.append(tok.specials[part])
        elif part:
            ids.extend(tok.plain(part.replace(MARK, "")))
    return ids


def first_diff(a, b):
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return min(len(a), len(b))


def main(argv):
    if len(argv) != 6 or argv[1] != "check":
        print(__doc__, file=sys.stderr)
        return 2
    tmpl = load_template(argv[2])
    tok = Tok(argv[3])
    cases = [json.loads(line) for line in open(argv[4], encoding="utf-8") if line.strip()]
    ours = [json.loads(line) for line in open(argv[5], encoding="utf-8") if line.strip()]
    if len(cases) != len(ours):
        print(f"{len(cases)} cases but {len(ours)} results")
        return 1
    if not tmpl:
        print(f"{argv[2]}: no chat template")
        return 1
    parses_think = "</think>" in tmpl
    bad = 0
    n_text = n_ids = n_hf = 0
    for case, our in zip(cases, ours):
        name = case["name"]
        msgs = case["messages"]
        if case.get("expect_error"):
            if "error" in our:
                n_text += 1
            else:
                bad += 1
                print(f"{name}: rendered, but 1b must refuse it")
            continue
        try:
            want = render(tmpl, case, msgs)
        except RuntimeError as ex:           # raise_exception: the template refuses it
            if "error" in our:
                n_text += 1
            else:
                bad += 1
                print(f"{name}: the template refuses it ({ex}), but 1b rendered it")
            continue
        if "error" in our:
            bad += 1
            print(f"{name}: 1b failed: {our['error']}")
            continue
        if our["text"] != want:
            bad += 1
            i = first_diff(our["text"], want)
            lo = max(0, i - 40)
            print(f"{name}: text differs at char {i}:\n  ours   {our['text'][lo:i + 40]!r}"
                  f"\n  jinja2 {want[lo:i + 40]!r}")
            continue
        n_text += 1
        end = "<end_of_turn>" if "<start_of_turn>" in tmpl else "<|im_end|>"
        stop_ok = our["stops"][:1] == [tok.specials.get(end)]
        if not stop_ok:
            bad += 1
            print(f"{name}: stops {our['stops']}")
        if not case.get("ids", True):
            continue
        dmsgs = defused_messages(tok, msgs, parses_think)
        dtext = render(tmpl, case, dmsgs)
        if dtext.replace(MARK, "") != want:
            bad += 1
            print(f"{name}: the defused rendering differs (oracle cannot split it)")
            continue
        wids = oracle_ids(tok, dtext)
        if our["ids"] != wids:
            bad += 1
            i = first_diff(our["ids"], wids)
            print(f"{name}: ids differ at {i}:\n  ours   {our['ids'][max(0, i - 5):i + 8]}"
                  f"\n  oracle {wids[max(0, i - 5):i + 8]}")
            continue
        n_ids += 1
        if MARK not in dtext:      # every special-token text in the output is the template's
            hids = ([] if tok.bos is None else [tok.bos]) + tok.full(want)
            if our["ids"] != hids:
                bad += 1
                i = first_diff(our["ids"], hids)
                print(f"{name}: ids differ from tokenizing the whole string at {i}:\n"
                      f"  ours {our['ids'][max(0, i - 5):i + 8]}\n"
                      f"  hf   {hids[max(0, i - 5):i + 8]}")
                continue
            n_hf += 1
    print(f"{len(cases)} cases: text equal {n_text}, ids equal {n_ids}, "
          f"whole-string ids equal {n_hf}, failures {bad}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
