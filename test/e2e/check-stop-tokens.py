#!/usr/bin/env python3
"""moe-run --stop-token-ids and --min-tokens against the greedy run they
change:
    check-stop-tokens.py PLAN PROMPT GREEDY.json
GREEDY.json is moe-run --json of PROMPT with --ignore-eos and
--max-new-tokens 40. With its sixth token as a stop token the run ends at
that token's first place, kept ("eos"); with --min-tokens 12 as well, none
of the first 12 picks is that token, and the run ends at it or at 40."""
import json
import subprocess
import sys

plan, prompt, greedy = sys.argv[1], sys.argv[2], json.load(open(sys.argv[3]))["generated_tokens"]
stop = greedy[5]


def run(*flags):
    out = subprocess.run(["moe-run", plan, "--prompt", prompt, "--max-new-tokens", "40",
                          "--ignore-eos", "--stop-token-ids", str(stop), "--json", "-", *flags],
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out)


ended = run()
assert ended["generated_tokens"] == greedy[:greedy.index(stop) + 1], (ended, greedy)
assert ended["finish_reason"] == "eos", ended
held = run("--min-tokens", "12")["generated_tokens"]
assert len(held) >= 12 and stop not in held[:12], held
assert len(held) == 40 or held[-1] == stop, held
print(f"stop token: ends after {len(ended['generated_tokens'])} tokens; "
      f"min tokens 12: {len(held)}")
