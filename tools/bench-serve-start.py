#!/usr/bin/env python3
"""How long moe-serve takes to become healthy with its weights paged in:
verified as they are paged in (the default), or only paged in
(--prefault sync --no-verify-weights, so that it listens once they are):
    bench-serve-start.py BIN-DIR PLAN-DIR [--rounds N]

Each round starts the server four times, alternating the order: verified
and not, with the weight files in the page cache (hot) and evicted first
(cold, posix_fadvise DONTNEED: only this plan's files leave the cache).
The time is from the start of the process to the first 200 of /health.
Prints the medians and the median of the per-round ratios verified / not."""
import argparse
import glob
import http.client
import os
import signal
import statistics
import subprocess
import tempfile
import time

p = argparse.ArgumentParser()
p.add_argument("bin")
p.add_argument("plan")
p.add_argument("--rounds", type=int, default=5)
args = p.parse_args()
work = tempfile.mkdtemp(prefix="moe-serve-start-")


def evict():
    for path in glob.glob(os.path.join(args.plan, "weights-*.bin")):
        fd = os.open(path, os.O_RDONLY)
        os.fdatasync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        os.close(fd)


def warm():
    for path in glob.glob(os.path.join(args.plan, "weights-*.bin")):
        with open(path, "rb") as f:
            while f.read(1 << 24):
                pass


def start(verify):
    port_file = os.path.join(work, "port")
    if os.path.exists(port_file):
        os.remove(port_file)
    t0 = time.perf_counter()
    proc = subprocess.Popen([os.path.join(args.bin, "moe-serve"), args.plan, "--port", "0",
                             "--port-file", port_file]
                            + ([] if verify else ["--prefault", "sync", "--no-verify-weights"]),
                            stderr=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
    try:
        while not (os.path.exists(port_file) and open(port_file).read().strip()):
            if proc.poll() is not None:
                raise SystemExit("moe-serve exited")
            time.sleep(0.001)
        port = int(open(port_file).read())
        while True:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            c.request("GET", "/health")
            if c.getresponse().status == 200:
                return time.perf_counter() - t0
            time.sleep(0.001)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)


times = {(v, c): [] for v in (True, False) for c in ("hot", "cold")}
for r in range(args.rounds):
    for cache in ("hot", "cold"):
        for verify in ((True, False) if r % 2 == 0 else (False, True)):
            (evict if cache == "cold" else warm)()
            times[(verify, cache)].append(start(verify))
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
size = sum(os.path.getsize(f) for f in glob.glob(os.path.join(args.plan, "weights-*.bin")))
print(f"moe-serve start to a healthy /health, {size / 1e9:.2f} GB of weights, "
      f"{args.rounds} rounds interleaved; {cpu}, {os.cpu_count()} cores")
print("| weight files | paged in | paged in and verified | ratio (range) |")
print("|---|---|---|---|")
for cache in ("hot", "cold"):
    on, off = times[(True, cache)], times[(False, cache)]
    ratios = [a / b for a, b in zip(on, off)]
    print(f"| {cache} | {statistics.median(off):.3f} s | {statistics.median(on):.3f} s | "
          f"{statistics.median(ratios):.2f} ({min(ratios):.2f}-{max(ratios):.2f}) |")
