#!/usr/bin/env python3
"""A greedy moe-run with penalties picks, at every step, the argmax of the
raw logits it dumped after vLLM's penalties, applied here in float32 from
their definition:
    check-penalties.py RUN.json LOGITS.f32 VOCAB REPETITION PRESENCE FREQUENCY
RUN.json is moe-run --json, LOGITS.f32 its --dump-logits (every prompt row,
then one row per decode step). Repetition divides a positive logit (and
multiplies a negative one) of every token of the prompt or the output so
far; frequency and presence subtract count * f + p from the output's."""
import json
import struct
import sys

run, dump, vocab = json.load(open(sys.argv[1])), open(sys.argv[2], "rb").read(), int(sys.argv[3])
repetition, presence, frequency = (float(x) for x in sys.argv[4:7])


def f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


prompt, generated = run["prompt_tokens"], run["generated_tokens"]
rows = len(dump) // (4 * vocab)
assert rows == len(prompt) + len(generated) - 1, (rows, len(prompt), len(generated))
flips = 0
for i, token in enumerate(generated):
    row = len(prompt) - 1 + i
    raw = struct.unpack_from(f"<{vocab}f", dump, row * 4 * vocab)
    seen = set(prompt) | set(generated[:i])
    counts = {t: generated[:i].count(t) for t in set(generated[:i])}
    logits = list(raw)
    for t in seen:
        logits[t] = f32(logits[t] / f32(repetition)) if logits[t] > 0 else f32(logits[t] * f32(repetition))
    for t, c in counts.items():
        logits[t] = f32(f32(logits[t] - f32(f32(frequency) * c)) - f32(presence))
    want = max(range(vocab), key=lambda v: (logits[v], -v))
    assert token == want, (i, token, want, logits[token], logits[want])
    flips += raw.index(max(raw)) != token
print(f"{len(generated)} greedy picks are the argmax of the penalised logits"
      f"{' (some differ from the raw argmax)' if flips else ''}")
