#!/usr/bin/env python3
"""The trained example (examples/kjv-moe) with a tokenizer.json and a chat
template, for the server tests: make-text-checkpoint.py OUT-DIR

The tokenizer.json is a byte-level BPE without merges whose ids are those of
the example's ByT5 vocabulary (byte b -> id b + 3; 0 <pad>, 1 </s>, 2 <unk>),
with a post-processor that starts every text with </s> as the example was
trained. So a plan of it must generate exactly what the ByT5 plan does, and
the chat path can be checked against a completion of the rendered prompt.
The weights and configs are symlinks to the example's."""
import json
import os
import sys

# The chat template, and the same rendering in Python (render()) that the
# test checks moe-serve against.
TEMPLATE = ("{{ bos_token }}{% for m in messages %}{% if m['role'] == 'system' %}"
            "{{ m['content'] + '\\n\\n' }}{% else %}{{ m['role'] | upper }}: {{ m['content'] }}\n"
            "{% endif %}{% endfor %}{% if add_generation_prompt %}ASSISTANT:{% endif %}")


def render(messages, add_generation_prompt=True):
    out = ""
    for m in messages:
        if m["role"] == "system":
            out += m["content"] + "\n\n"
        else:
            out += m["role"].upper() + ": " + m["content"] + "\n"
    return out + ("ASSISTANT:" if add_generation_prompt else "")


def byte_chars():
    """GPT-2's bytes-to-unicode table (the ByteLevel pre-tokenizer's)."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + \
        list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


def tokenizer_json():
    specials = ["<pad>", "</s>", "<unk>"]
    vocab = {s: i for i, s in enumerate(specials)}
    for b, c in byte_chars().items():
        vocab[c] = b + 3
    added = [{"id": i, "content": s, "single_word": False, "lstrip": False, "rstrip": False,
              "normalized": False, "special": True} for i, s in enumerate(specials)]
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": None,
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
                          "use_regex": False},
        "post_processor": {
            "type": "TemplateProcessing",
            "single": [{"SpecialToken": {"id": "</s>", "type_id": 0}},
                       {"Sequence": {"id": "A", "type_id": 0}}],
            "pair": [{"SpecialToken": {"id": "</s>", "type_id": 0}},
                     {"Sequence": {"id": "A", "type_id": 0}},
                     {"Sequence": {"id": "B", "type_id": 1}}],
            "special_tokens": {"</s>": {"id": "</s>", "ids": [1], "tokens": ["</s>"]}},
        },
        "decoder": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
                    "use_regex": False},
        "model": {"type": "BPE", "dropout": None, "unk_token": None,
                  "continuing_subword_prefix": None, "end_of_word_suffix": None,
                  "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": vocab, "merges": []},
    }


def with_byte_tokenizer(src, out, vocab, names, chat_template=None):
    """`out`: symlinks to the files `names` of checkpoint `src` beside a
    byte-level tokenizer.json whose ids 0..min(vocab, 256)-1 are those byte
    values and the rest, up to `vocab`, "<tN>" (no specials, no
    post-processor), and a chat template when given (for the goldens and
    the benchmark model, whose vocabularies are not the example's)."""
    os.makedirs(out, exist_ok=True)
    for name in names:
        link = os.path.join(out, name)
        if not os.path.lexists(link):
            os.symlink(os.path.abspath(os.path.join(src, name)), link)
    tok = tokenizer_json()
    chars = byte_chars()
    tok["added_tokens"] = []
    tok["post_processor"] = None
    tok["model"]["vocab"] = {chars[b]: b for b in range(min(vocab, 256))}
    tok["model"]["vocab"].update({f"<t{i}>": i for i in range(256, vocab)})
    with open(os.path.join(out, "tokenizer.json"), "w") as f:
        json.dump(tok, f, ensure_ascii=False)
    config = {"tokenizer_class": "PreTrainedTokenizerFast"}
    if chat_template:
        config["chat_template"] = chat_template
    with open(os.path.join(out, "tokenizer_config.json"), "w") as f:
        json.dump(config, f)


def main():
    out = sys.argv[1]
    src = os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../examples/kjv-moe")
    os.makedirs(out, exist_ok=True)
    for name in ["config.json", "generation_config.json", "model.safetensors"]:
        link = os.path.join(out, name)
        if not os.path.lexists(link):
            os.symlink(os.path.abspath(os.path.join(src, name)), link)
    with open(os.path.join(out, "tokenizer.json"), "w") as f:
        json.dump(tokenizer_json(), f, ensure_ascii=False)
    with open(os.path.join(out, "tokenizer_config.json"), "w") as f:
        json.dump({"tokenizer_class": "PreTrainedTokenizerFast", "bos_token": "</s>",
                   "eos_token": "</s>",
                   "chat_template": TEMPLATE}, f, ensure_ascii=False, indent=1)


if __name__ == "__main__":
    main()
