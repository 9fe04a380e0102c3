#!/usr/bin/env python3
"""Two moe-serve builds over HTTP, rounds interleaved (make bench-serve-ab):
    bench-serve-ab.py BIN-A BIN-B PLAN [--rounds N] [--levels 1,8,32]

For each round and each concurrency level, A's server and then B's (the
order alternates between rounds) serve PLAN on a free port and the same
moe-bench (BIN-B's) drives it closed-loop: 8 x concurrency requests
(--per-client),
prompts of 16-64 tokens, 16-64 new tokens, the same seed. Prints, per
level, each side's median output tokens/s, TTFT and TPOT, and the median
of the per-round ratios B/A with its range: the machine is shared and
noisy, so only ratios measured side by side mean anything."""
import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time

p = argparse.ArgumentParser()
p.add_argument("bin_a")
p.add_argument("bin_b")
p.add_argument("plan")
p.add_argument("--rounds", type=int, default=5)
p.add_argument("--levels", default="1,8,32")
p.add_argument("--per-client", type=int, default=8, help="requests per level: this many times its concurrency")
args = p.parse_args()
work = tempfile.mkdtemp(prefix="moe-serve-ab-")


def serve(bin_dir):
    port_file = os.path.join(work, "port")
    if os.path.exists(port_file):
        os.remove(port_file)
    proc = subprocess.Popen([os.path.join(bin_dir, "moe-serve"), args.plan, "--port", "0",
                             "--port-file", port_file, "--kv-blocks", "256"],
                            stderr=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
    for _ in range(600):
        if os.path.exists(port_file) and open(port_file).read().strip():
            return proc, int(open(port_file).read())
        if proc.poll() is not None:
            raise SystemExit(f"{bin_dir}/moe-serve exited with {proc.returncode}")
        time.sleep(0.05)
    raise SystemExit(f"{bin_dir}/moe-serve did not start")


def healthy(port):
    import http.client
    for _ in range(600):
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            c.request("GET", "/health")
            if c.getresponse().status == 200:
                return
        except OSError:
            pass
        time.sleep(0.05)
    raise SystemExit("the server never became healthy")


def run(bin_dir, level):
    proc, port = serve(bin_dir)
    try:
        healthy(port)
        out = subprocess.run([os.path.join(args.bin_b, "moe-bench"), args.plan, "--concurrency",
                              str(level), "--requests", str(args.per_client * level), "--prompt-len", "16:64",
                              "--output-len", "16:64", "--seed", "1", "--url",
                              f"http://127.0.0.1:{port}", "--json", "-"],
                             check=True, capture_output=True, text=True).stdout
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
    lv = json.loads(out)["levels"][0]
    assert lv["completed"] == args.per_client * level, lv
    return lv["output_tokens_per_second"], lv["ttft_ms"]["median"], lv["tpot_ms"]["median"]


levels = [int(x) for x in args.levels.split(",")]
got = {(side, lv): [] for side in "AB" for lv in levels}
for r in range(args.rounds):
    for lv in levels:
        for side in ("AB" if r % 2 == 0 else "BA"):
            got[(side, lv)].append(run(args.bin_a if side == "A" else args.bin_b, lv))
    print(f"round {r + 1}/{args.rounds} done", file=sys.stderr)

cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
print(f"moe-serve A = {args.bin_a}, B = {args.bin_b}; {args.rounds} rounds interleaved; {cpu}, "
      f"{os.cpu_count()} cores")
print("| concurrency | requests | tok/s A | tok/s B | B/A (range) | TTFT ms A / B | TPOT ms A / B |")
print("|---|---|---|---|---|---|---|")
for lv in levels:
    a, b = got[("A", lv)], got[("B", lv)]
    ratios = [y[0] / x[0] for x, y in zip(a, b)]
    med = lambda xs, i: statistics.median(x[i] for x in xs)  # noqa: E731
    print(f"| {lv} | {args.per_client * lv} | {med(a, 0):.0f} | {med(b, 0):.0f} | "
          f"{statistics.median(ratios):.2f} ({min(ratios):.2f}-{max(ratios):.2f}) | "
          f"{med(a, 1):.2f} / {med(b, 1):.2f} | {med(a, 2):.2f} / {med(b, 2):.2f} |")
