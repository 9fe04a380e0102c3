#!/usr/bin/env python3
"""Checks moe-plan simulate's timeline against closed forms and the plan's
own order (standard library only).

  check-simulation.py PLAN_JSON SIM_JSON [--one-stream] [--measured TRACE]

PLAN_JSON is `moe-plan json` of the plan, SIM_JSON its `moe-plan simulate
--json`. Every instruction starts after the one before it on its stream
and after the instruction recording each event it waits for; the step is
the last end, at least each stream's busy time and at most the serial sum;
one stream (--one-stream): the step is exactly the serial sum; each
collective lasts latency + wire bytes / bandwidth (with --measured, at
least that), the wire bytes of a ring all_reduce and of a row exchange
computed here from the plan's tensor shapes; the critical
path is a chain ending at the step's end. With --measured, the launches of
a plan without micro-batches last as long as the slowest rank's in the
trace's first step of the same tokens. Prints one line; exits 1 at the first violation."""
import argparse
import json
import sys

EPS = 1e-9
ELEMENT = {"F32": 4, "BF16": 2, "I32": 4}


def fail(message):
    print("check-simulation: " + message, file=sys.stderr)
    sys.exit(1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("plan")
    ap.add_argument("sim")
    ap.add_argument("--one-stream", action="store_true")
    ap.add_argument("--measured")
    a = ap.parse_args()
    plan, sim = json.load(open(a.plan)), json.load(open(a.sim))
    insts = plan["programs"][0]["instructions"]
    tensors = plan["tensors"]
    timeline = sim["instructions"]
    if [t["instruction"] for t in timeline] != list(range(len(insts))):
        fail("the timeline does not list every instruction in program order")
    tokens, ranks = sim["batch_tokens"], len(plan["programs"])
    link = sim["link"]
    last_on, recorded = {}, {}
    for t in timeline:
        inst = insts[t["instruction"]]
        if t["end"] < t["start"] - EPS:
            fail(f"instruction {t['instruction']} ends before it starts")
        if t["stream"] in last_on and t["start"] < last_on[t["stream"]] - EPS:
            fail(f"instruction {t['instruction']} starts before stream {t['stream']} is free")
        for e in inst.get("waits", []):
            if t["start"] < recorded[e] - EPS:
                fail(f"instruction {t['instruction']} starts before event {e} is recorded")
        last_on[t["stream"]] = t["end"]
        for e in inst.get("records", []):
            recorded[e] = t["end"]
        kind = inst.get("collective", "None")
        if kind in ("AllReduce", "AllToAllV"):
            # The payload: the rows of this rank's tokens (an exchange's
            # own rows [T, P, H], sent out or coming back).
            sends = kind == "AllToAllV" and len(inst["inputs"]) == 2
            out = tensors[inst["inputs"][0] if sends else inst["outputs"][0]]
            part, parts = out.get("part", 0), out.get("parts", 1)
            rows = tokens * (part + 1) // parts - tokens * part // parts
            payload = rows * ELEMENT[out["dtype"]]
            for d in out["shape"][1:]:
                payload *= d
            # A ring all_reduce puts 2 (N - 1) / N of it on the wire; an
            # exchange the (N - 1) / N of its rows that go to other ranks.
            wire = (2 if kind == "AllReduce" else 1) * (ranks - 1) * payload // ranks
            want = link["latency_us"] * 1e-6 + wire / (link["gb_per_s"] * 1e9)
            took = t["end"] - t["start"]
            # --measured adds the traced run's own transfer to the link's.
            if took < want - 1e-9 - 1e-6 * want or \
                    (not a.measured and took > want + 1e-9 + 1e-6 * want):
                fail(f"{kind} {t['instruction']} lasts {t['end'] - t['start']:.9f} s; "
                     f"the link takes {want:.9f} s for {wire} bytes")
    durations = [t["end"] - t["start"] for t in timeline]
    serial, step = sum(durations), max(t["end"] for t in timeline)
    if abs(serial - sim["serial_seconds"]) > 1e-9 * max(1, serial):
        fail(f"serial {sim['serial_seconds']} is not the sum of the durations {serial}")
    if abs(step - sim["step_seconds"]) > 1e-12:
        fail(f"step {sim['step_seconds']} is not the last end {step}")
    busy = sim["stream_busy_seconds"]
    if step < max(busy) - EPS or step > serial + EPS:
        fail(f"step {step} outside [the busiest stream {max(busy)}, the serial sum {serial}]")
    if a.one_stream and abs(step - serial) > 1e-9 * max(1, serial):
        fail(f"one stream: step {step} is not the serial sum {serial}")
    path = sim["critical_path"]
    if not path or abs(timeline[path[-1]]["end"] - step) > EPS or timeline[path[0]]["start"] > EPS:
        fail("the critical path does not run from the start to the step's end")
    for x, y in zip(path, path[1:]):
        if abs(timeline[y]["start"] - timeline[x]["end"]) > EPS:
            fail(f"critical path: {y} does not start where {x} ends")
    if a.measured:
        # Per launch the longest of the ranks' (each rank's first step).
        per_rank = {}
        for e in json.load(open(a.measured))["traceEvents"]:
            if e.get("ph") == "X" and e.get("cat") == "launch" and \
                    e["args"].get("tokens") == tokens:
                first = per_rank.setdefault(e["pid"], (e["args"]["step"], []))
                if e["args"]["step"] == first[0]:
                    first[1].append(e["dur"])
        lists = [spans for _, spans in per_rank.values()]
        want = sum(max(d) for d in zip(*lists)) * 1e-6
        got = sum(durations[i] for i, inst in enumerate(insts)
                  if inst.get("collective", "None") == "None")
        if abs(got - want) > 1e-9 + 1e-9 * want:
            fail(f"launches last {got} s in all; the trace measured {want} s")
    print(f"simulation consistent: {len(timeline)} instructions, {len(busy)} stream(s), step "
          f"{step * 1e3:.3f} ms of {serial * 1e3:.3f} ms serial, critical path of {len(path)}")


if __name__ == "__main__":
    main()
