#!/usr/bin/env python3
"""Validates a trace file against the trace-event format Perfetto and
chrome://tracing load (JSON object form): a `traceEvents` list whose events
have the keys their phase requires, complete ("X") events with
non-negative times, and per track (pid, tid) timestamps that only grow,
spans that do not overlap (a stream runs one thing at a time).

  check-trace.py FILE [--ranks N] [--min-collective-us US]

--ranks: the tracks must cover ranks 0..N-1. --min-collective-us: every
collective span lasts at least this long (an emulated link's latency).
Prints one summary line; exits 1 with the first violation."""
import argparse
import json
import sys

REQUIRED = {"X": ("name", "ph", "ts", "dur", "pid", "tid"), "M": ("name", "ph", "pid", "args")}


def fail(message):
    print("check-trace: " + message, file=sys.stderr)
    sys.exit(1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("file")
    ap.add_argument("--ranks", type=int)
    ap.add_argument("--min-collective-us", type=float)
    a = ap.parse_args()
    with open(a.file) as f:
        doc = json.load(f)
    if not isinstance(doc, dict) or not isinstance(doc.get("traceEvents"), list):
        fail("not an object with a traceEvents list")
    tracks = {}
    named = set()
    for i, e in enumerate(doc["traceEvents"]):
        ph = e.get("ph")
        if ph not in REQUIRED:
            fail(f"event {i}: phase {ph!r} (expected X or M)")
        for key in REQUIRED[ph]:
            if key not in e:
                fail(f"event {i}: {ph} event without {key!r}")
        if not isinstance(e["pid"], int) or ("tid" in e and not isinstance(e["tid"], int)):
            fail(f"event {i}: pid and tid must be integers")
        if ph == "M":
            if e["name"] not in ("process_name", "thread_name") or "name" not in e["args"]:
                fail(f"event {i}: metadata {e['name']!r} without args.name")
            if e["name"] == "thread_name":
                named.add((e["pid"], e["tid"]))
            continue
        if not all(isinstance(e[k], (int, float)) and e[k] >= 0 for k in ("ts", "dur")):
            fail(f"event {i}: ts and dur must be numbers >= 0")
        if a.min_collective_us is not None and e.get("cat") == "collective" \
                and e["dur"] < a.min_collective_us:
            fail(f"event {i}: collective {e['name']} lasts {e['dur']} us, "
                 f"less than {a.min_collective_us}")
        tracks.setdefault((e["pid"], e["tid"]), []).append(e)
    for (pid, tid), spans in tracks.items():
        if (pid, tid) not in named:
            fail(f"track rank {pid} stream {tid} has no thread_name")
        for x, y in zip(spans, spans[1:]):
            if y["ts"] < x["ts"]:
                fail(f"rank {pid} stream {tid}: timestamps go back at {y['ts']}")
            if y["ts"] < x["ts"] + x["dur"] - 1e-3:
                fail(f"rank {pid} stream {tid}: {y['name']} at {y['ts']} starts before "
                     f"{x['name']} ends")
    ranks = sorted({pid for pid, _ in tracks})
    if a.ranks is not None and ranks != list(range(a.ranks)):
        fail(f"tracks of ranks {ranks}, expected 0..{a.ranks - 1}")
    collectives = sum(e.get("cat") == "collective" for s in tracks.values() for e in s)
    print(f"trace valid: {len(ranks)} rank(s), {len(tracks)} track(s), "
          f"{sum(map(len, tracks.values()))} spans, {collectives} collective(s)")


if __name__ == "__main__":
    main()
