#!/usr/bin/env python3
"""Prefault alone against prefault + every weight's checksum, hot and cold.

  bench-verify.py BIN_DIR PLAN_DIR [--rounds N]

Each run is `moe-run PLAN --prefault sync` with or without --verify-weights
(a sync prefault that checks each weight as its pages come in); its
warm-up, the time the prefault took inside LoadedPlan::open, is what is
compared. Hot: the weight files stay in the page cache. Cold: they are
evicted before every run (posix_fadvise DONTNEED, which only drops this
file's pages, unlike /proc/sys/vm/drop_caches). The four kinds of run are
interleaved, round after round, so that a noisy machine slows them alike.
"""
import argparse
import glob
import json
import os
import statistics
import subprocess


def evict(plan):
    for path in glob.glob(os.path.join(plan, "weights-*.bin")):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def warmup_ms(moe_run, plan, verify):
    cmd = [moe_run, plan, "--prefault", "sync", "--prompt-tokens", "1",
           "--max-new-tokens", "1", "--json", "-"]
    if verify:
        cmd.append("--verify-weights")
    run = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
    assert run["prefault"] == "sync" and run["warmup"] == "done", run
    assert run["weights_verified"] == verify, run
    return run["warmup_ms"]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("bin")
    parser.add_argument("plan")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    moe_run = os.path.join(args.bin, "moe-run")
    kinds = [(cache, verify) for cache in ("hot", "cold") for verify in (False, True)]
    times = {kind: [] for kind in kinds}
    # The files in the page cache for the first hot run, as a read from disk
    # leaves them (in large folios, where the kernel uses them), not as the
    # compiler's writes did.
    evict(args.plan)
    warmup_ms(moe_run, args.plan, False)
    for _ in range(args.rounds):
        for cache, verify in kinds:
            if cache == "cold":
                evict(args.plan)
            times[(cache, verify)].append(warmup_ms(moe_run, args.plan, verify))
    for cache in ("hot", "cold"):
        alone, checked = times[(cache, False)], times[(cache, True)]
        for name, t in (("prefault alone", alone), ("prefault + verify", checked)):
            print(f"{cache:4} {name:18} median {statistics.median(t):8.1f} ms  "
                  f"(min {min(t):.1f}, max {max(t):.1f}; {' '.join(f'{x:.1f}' for x in t)})")
        alone_ms, checked_ms = statistics.median(alone), statistics.median(checked)
        print(f"{cache:4} verify / alone: {checked_ms / alone_ms:.2f} (medians), "
              f"{checked_ms - alone_ms:+.1f} ms")


if __name__ == "__main__":
    main()
