#!/usr/bin/env python3
"""Trains small tokenizers with the Hugging Face `tokenizers` library and
records how that library encodes and decodes a fixed set of strings, for the
C++ HfTokenizer tests (test/unit/text/tokenizer).

Re-run (deterministic; the output is committed):

  .venv/bin/python tools/make-tokenizer-goldens.py

It writes test/unit/text/tokenizer/data/:

  <name>.tokenizer.json  one per configuration below, as tokenizers saves it
  goldens.json           {tokenizers_version, tokenizers: [name],
                          cases: [{tokenizer, text, ids, ids_no_special,
                                   decode, decode_with_special}],
                          decode_cases: [{tokenizer, ids, decode,
                                          decode_with_special}]}

`ids` is encode(text).ids with add_special_tokens true, `ids_no_special` with
false; `decode`/`decode_with_special` decode `ids` with skip_special_tokens
true/false. decode_cases decode random id sequences (split UTF-8 characters,
stray byte tokens) to pin down U+FFFD handling.

Configurations (vocab ~2000, trained on examples/kjv-moe/heldout.txt plus a
multilingual paragraph):
  qwen2        NFC, Split(Qwen2 regex, Isolated) + ByteLevel(use_regex=false),
               ByteLevel decoder and post-processor, <|endoftext|>,
               <|im_start|>, <|im_end|> special.
  deepseek_v3  DeepSeek-V3's Split sequence (digits in threes, CJK, words),
               ByteLevel, TemplateProcessing with the BOS, an lstrip/rstrip
               added token and a single_word one.
  gpt2         ByteLevel(add_prefix_space=true, use_regex=true), legacy
               "a b" merges.
  llama        Prepend("▁") + Replace(" ", "▁"), no pre-tokenizer, BPE with
               byte_fallback and the 256 <0xNN> tokens, unk, the
               Replace/ByteFallback/Fuse/Strip decoder, "<s> $A", a
               normalized (non-special) added token.
  metaspace    the llama model with Metaspace(prepend_scheme="first")
               pre-tokenizer and decoder instead of the normalizer.
"""

import json
import pathlib
import random

import tokenizers
from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers
from tokenizers import pre_tokenizers, processors, trainers

ROOT = pathlib.Path(__file__).resolve().parent.parent
OUT = ROOT / "test/unit/text/tokenizer/data"
VOCAB = 2000

QWEN2_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}|"
               r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
DEEPSEEK_REGEXES = [
    r"\p{N}{1,3}",
    "[一-龥\u3040-ゟ゠-ヿ]+",
    r"[!\"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+|"
    r" ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
]

MULTILINGUAL = (
    "Café crème brûlée, naïve résumé. Ünïcödé façade. "
    "深度求索的混合专家模型。こんにちは、世界！カタカナとひらがな。"
    "مرحبا بالعالم. नमस्ते दुनिया। Привет, мир! Γειά σου κόσμε. "
    "I'M sure we don't, they'll, you've, she's, we're, I'd. "
    "Numbers 1234567 and 3.14159 and 2026-12-01.\n\n\tTabs\tand  spaces   here.\r\n"
)

TESTS = [
    "",
    "Hello world",
    "In the beginning God created the heaven and the earth.",
    "  leading spaces",
    "trailing spaces   ",
    " ",
    "   ",
    "a  b   c    d",
    "tabs\tand\t\ttabs",
    "line one\nline two\n\n\nline five",
    "windows\r\nline\r\nends\r\n",
    "\n",
    "mixed \t \n \r\n whitespace",
    "Café résumé naïve",
    "Cafe\u0301 re\u0301sume\u0301 nai\u0308ve",  # decomposed: NFC composes
    "ﬁ ligature and Ａ fullwidth ①",
    "深度求索的混合专家模型",
    "こんにちは世界、カタカナ",
    "مرحبا بالعالم",
    "नमस्ते दुनिया",
    "emoji 😀 🎉 👍🏽",
    "family 👨‍👩‍👧‍👦 and flags 🇫🇷🇯🇵",
    "1234567 12 1 123456789012",
    "pi is 3.14159, year 2026",
    "I'M don't they'll you've she's WE'RE I'd",
    "<|im_start|>user\nhi<|im_end|>",
    "<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>assistant\n",
    "<|endoftext|>",
    "text<|endoftext|>more text<|endoftext|>",
    "<s>Hello</s>",
    "before <s> after",
    "<think> reasoning </think> answer",
    "x<think>y",
    "the Lord said, Lords and lord Lordship Lord",
    "<0x41>",
    "<0x41><0xE6><0x97>",
    "▁already▁metaspaced ▁",
    "\u200b zero width \u00a0nbsp\u3000ideographic",
    "U+180E is not White_Space: a\u180e'b  \u180e c",  # PCRE2's \s differs from Oniguruma's
    "!!! ??? ... --- ***",
    "(parenthesis) [brackets] {braces} \"quotes\" 'single'",
    "A" * 300,
    "word " * 60,
]


def random_strings(rng):
    alphabet = list("abcdefghijklmnopqrstuvwxyz ABCDEFG 0123456789 \n\t.,;!?'\"-")
    alphabet += list("éüçñ深度求索こんにちは😀👍мир") + ["\u0301", "\r\n", "  "]
    return ["".join(rng.choice(alphabet) for _ in range(n)) for n in (50, 200, 500)]


def corpus():
    text = (ROOT / "examples/kjv-moe/heldout.txt").read_text(encoding="utf-8")
    return text.splitlines() + [MULTILINGUAL] * 20


def split_sequence(regexes):
    splits = [pre_tokenizers.Split(Regex(r), behavior="isolated", invert=False) for r in regexes]
    return pre_tokenizers.Sequence(splits + [
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)])


def byte_level(pre_tokenizer, special, normalizer=None):
    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizer
    tok.pre_tokenizer = pre_tokenizer
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=VOCAB, special_tokens=special, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(corpus(), trainer)
    return tok


def qwen2():
    tok = byte_level(split_sequence([QWEN2_REGEX]),
                     ["<|endoftext|>", "<|im_start|>", "<|im_end|>"], normalizers.NFC())
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    return tok


def deepseek_v3():
    bos, eos = "<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>"
    tok = byte_level(split_sequence(DEEPSEEK_REGEXES), [bos, eos])
    tok.post_processor = processors.TemplateProcessing(
        single=f"{bos} $A", special_tokens=[(bos, tok.token_to_id(bos))])
    tok.add_tokens([AddedToken("<think>", special=False, normalized=False, lstrip=True, rstrip=True),
                    AddedToken("</think>", special=False, normalized=False),
                    AddedToken("Lord", special=False, normalized=True, single_word=True)])
    return tok


def gpt2():
    tok = byte_level(pre_tokenizers.ByteLevel(add_prefix_space=True, use_regex=True),
                     ["<|endoftext|>"])
    tok.post_processor = processors.ByteLevel(trim_offsets=True)
    # Older files spell merges as "a b" strings.
    spec = json.loads(tok.to_str())
    spec["model"]["merges"] = [" ".join(m) for m in spec["model"]["merges"]]
    return Tokenizer.from_str(json.dumps(spec))


def sentencepiece_bpe(metaspace):
    """A Llama/Mistral-style BPE: trained on Metaspace words, then given the
    256 byte-fallback tokens after <unk>, <s>, </s> as Llama's vocab has."""
    tok = Tokenizer(models.BPE(unk_token="<unk>", fuse_unk=True, byte_fallback=True))
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first", split=True)
    trainer = trainers.BpeTrainer(vocab_size=VOCAB, special_tokens=["<unk>", "<s>", "</s>"],
                                  limit_alphabet=150, show_progress=False)
    tok.train_from_iterator(corpus(), trainer)
    spec = json.loads(tok.to_str())
    vocab = spec["model"]["vocab"]
    shifted = {t: (i if i < 3 else i + 256) for t, i in vocab.items()}
    shifted.update({f"<0x{b:02X}>": 3 + b for b in range(256)})
    spec["model"]["vocab"] = dict(sorted(shifted.items(), key=lambda kv: kv[1]))
    spec["post_processor"] = json.loads(processors.TemplateProcessing(
        single="<s> $A", special_tokens=[("<s>", 1)]).__getstate__())
    if metaspace:
        spec["decoder"] = json.loads(decoders.Metaspace(
            replacement="▁", prepend_scheme="first").__getstate__())
    else:
        spec["pre_tokenizer"] = None
        spec["normalizer"] = json.loads(normalizers.Sequence(
            [normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")]).__getstate__())
        spec["decoder"] = json.loads(decoders.Sequence([
            decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(),
            decoders.Strip(" ", 1, 0)]).__getstate__())
    tok = Tokenizer.from_str(json.dumps(spec))
    if not metaspace:  # a normalized added token: matched as "▁Lord"
        tok.add_tokens([AddedToken("Lord", special=False, normalized=True)])
    return tok


CONFIGS = {
    "qwen2": qwen2,
    "deepseek_v3": deepseek_v3,
    "gpt2": gpt2,
    "llama": lambda: sentencepiece_bpe(metaspace=False),
    "metaspace": lambda: sentencepiece_bpe(metaspace=True),
}


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    rng = random.Random(20261201)
    texts = TESTS + random_strings(rng)
    goldens = {"tokenizers_version": tokenizers.__version__, "tokenizers": [], "cases": [],
               "decode_cases": []}
    for name, build in CONFIGS.items():
        tok = build()
        (OUT / f"{name}.tokenizer.json").write_text(tok.to_str(pretty=False) + "\n", encoding="utf-8")
        tok = Tokenizer.from_file(str(OUT / f"{name}.tokenizer.json"))  # what the test loads
        goldens["tokenizers"].append(name)
        for text in texts:
            ids = tok.encode(text, add_special_tokens=True).ids
            goldens["cases"].append({
                "tokenizer": name, "text": text, "ids": ids,
                "ids_no_special": tok.encode(text, add_special_tokens=False).ids,
                "decode": tok.decode(ids, skip_special_tokens=True),
                "decode_with_special": tok.decode(ids, skip_special_tokens=False)})
        size = tok.get_vocab_size(with_added_tokens=True)
        for n in (1, 2, 3, 8, 32):
            ids = [rng.randrange(size) for _ in range(n)]
            goldens["decode_cases"].append({
                "tokenizer": name, "ids": ids,
                "decode": tok.decode(ids, skip_special_tokens=True),
                "decode_with_special": tok.decode(ids, skip_special_tokens=False)})
    (OUT / "goldens.json").write_text(json.dumps(goldens, ensure_ascii=False, indent=None) + "\n",
                                      encoding="utf-8")
    print(f"wrote {len(goldens['cases'])} cases for {len(CONFIGS)} tokenizers to {OUT}")


if __name__ == "__main__":
    main()
