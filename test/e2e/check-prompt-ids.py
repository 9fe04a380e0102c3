#!/usr/bin/env python3
"""moe-run --prompt on a plan whose checkpoint ships a tokenizer.json
encodes as Hugging Face `tokenizers` does:
    check-prompt-ids.py MOE-RUN PLAN TOKENIZER-NAME GOLDENS.json
For each golden string of that tokenizer (test/unit/text/tokenizer/data,
made by tools/make-tokenizer-goldens.py), the prompt tokens moe-run reports
must equal the goldens' ids with special tokens added."""
import json
import subprocess
import sys

moe_run, plan, name, goldens = sys.argv[1:5]
cases = [c for c in json.load(open(goldens))["cases"]
         if c["tokenizer"] == name and c["text"] and len(c["ids"]) <= 1000]  # context: 1024
for c in cases:
    out = subprocess.run([moe_run, plan, "--prompt=" + c["text"], "--max-new-tokens", "2",
                          "--ignore-eos", "--json", "-"], check=True, capture_output=True,
                         text=True).stdout
    got = json.loads(out)["prompt_tokens"]
    assert got == c["ids"], (name, c["text"], got, c["ids"])
print(f"{name}: {len(cases)} prompts encoded as tokenizers does")
