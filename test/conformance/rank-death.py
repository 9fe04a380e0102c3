#!/usr/bin/env python3
"""A rank killed (or stopped) mid-collective: the others exit non-zero,
within 30 s, each with one line of its own on stderr; a stopped rank is
named by a rank that waited for it past the collective deadline.

  rank-death.py RANKS VICTIM [kill|stop] -- MPIRUN... RANK_DEATH_BINARY
"""
import re
import subprocess
import sys
import time


def main():
    n, victim = int(sys.argv[1]), int(sys.argv[2])
    how = sys.argv[3] if sys.argv[3] != "--" else "kill"
    command = sys.argv[sys.argv.index("--") + 1:]
    launcher, binary = command[:-1], command[-1]
    start = time.monotonic()
    run = subprocess.run(launcher + ["-np", str(n), binary, str(victim), "200", how, "3"],
                         capture_output=True, text=True, timeout=120)
    elapsed = time.monotonic() - start
    ours = [l for l in run.stderr.splitlines() if l.startswith("rank-death: ")]
    survivors = sorted(set(range(n)) - {victim})
    problems = []
    if run.returncode == 0:
        problems.append("the job exited 0")
    if elapsed >= 30:
        problems.append(f"the job took {elapsed:.1f} s")
    for r in survivors:
        lines = [l for l in ours if re.match(rf"rank-death: rank {r} of {n}: ", l)]
        if len(lines) != 1:
            problems.append(f"rank {r} printed {len(lines)} lines: {lines}")
    if how == "stop" and not any(re.search(rf"rank {victim} did not answer", l) for l in ours):
        problems.append(f"no line names rank {victim}")
    if problems:
        sys.exit("rank death: " + "; ".join(problems) + "\n--- stderr:\n" + run.stderr)
    print(f"rank {victim} of {n} {how}ed: {len(survivors)} ranks exited non-zero with one line "
          f"each within 30 s")
    for l in ours:
        print(l)


if __name__ == "__main__":
    main()
