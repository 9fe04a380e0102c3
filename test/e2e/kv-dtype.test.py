#!/usr/bin/env python3
"""Greedy tokens of a few prompts under two plans (f32 and int8 KV cache):
how many prompts agree on the first 16 tokens, and on all 32."""
import json
import subprocess
import sys

PROMPTS = ["And God said", "The LORD is my shepherd", "In the beginning",
           "And Jesus answered"]


def generate(plan, prompt):
    out = subprocess.run(["moe-run", plan, "--prompt", prompt, "--max-new-tokens", "32",
                          "--json", "-"], check=True, capture_output=True, text=True).stdout
    return json.loads(out)["generated_tokens"]


pairs = [(generate(sys.argv[1], p), generate(sys.argv[2], p)) for p in PROMPTS]
first = sum(a[:16] == b[:16] for a, b in pairs)
whole = sum(a == b for a, b in pairs)
print(f"{first}/{len(PROMPTS)} prompts: the first 16 greedy tokens identical with the int8 KV cache")
print(f"{whole}/{len(PROMPTS)} prompts: all 32 identical")
