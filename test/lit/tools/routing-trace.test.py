"""Checks a trace of make-routing-trace.py: header, per-step sums, the
realised skew over the whole trace, and drift between the first and last
day."""
import json
import sys

lines = [json.loads(l) for l in open(sys.argv[1])]
head, steps = lines[0], lines[1:]
assert head["format"] == "moe-routing-trace" and head["version"] == 1, head
assert head["layers"] == [3, 5] and head["num_experts"] == 64 and head["top_k"] == 8, head
assert len(steps) == head["days"] * head["steps_per_day"]
for s in steps:
    assert len(s["counts"]) == 2
    for c in s["counts"]:
        # k distinct experts per token: at most one pick of an expert per token
        assert len(c) == 64 and sum(c) == 64 * 8 and max(c) <= 64, c
print(f"header ok, {len(steps)} steps, every step 64 tokens x 8 distinct picks per layer")
totals = [0] * 64
for s in steps:
    if s["day"] == 1:
        for e, n in enumerate(s["counts"][0]):
            totals[e] += n
top = sorted(totals, reverse=True)
print(f"hottest 8 share {sum(top[:8]) / sum(top):.3f}")


def hot(day):
    t = [0] * 64
    for s in steps:
        if s["day"] == day:
            for e, n in enumerate(s["counts"][0]):
                t[e] += n
    return set(sorted(range(64), key=lambda e: -t[e])[:8])


first, last = hot(1), hot(head["days"])
assert first != last and len(first & last) >= 2, (first, last)
print("day 1 vs day 3: hot sets differ" if first != last else "same")
