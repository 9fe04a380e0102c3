#!/usr/bin/env python3
"""Greedy tokens of a few prompts under two plans (f32 and int8 KV cache)."""
import json
import subprocess
import sys

PROMPTS = ["And God said", "The LORD is my shepherd", "In the beginning",
           "And Jesus answered"]


def generate(plan, prompt):
    out = subprocess.run(["moe-run", plan, "--prompt", prompt, "--max-new-tokens", "32",
                          "--json", "-"], check=True, capture_output=True, text=True).stdout
    return json.loads(out)["generated_tokens"]


same = sum(generate(sys.argv[1], p) == generate(sys.argv[2], p) for p in PROMPTS)
print(f"{same}/{len(PROMPTS)} prompts: 32 greedy tokens identical with the int8 KV cache")
