#!/usr/bin/env python3
"""Plans are replaced atomically: checks what happens to a plan directory
while moe-compile rewrites it (standard library only; the tools on PATH).

  replace-plan.py reader CHECKPOINT WORK [TOKENS]
      A moe-run decoding TOKENS tokens (120 by default) from WORK/plan (its
      weights mapped) while moe-compile rewrites WORK/plan twice: the reader
      must finish with exit 0 and the tokens of the plan it started with (or
      fail with one line), never die of a signal. TOKENS sets how long the
      reader outlasts the two compiles (with --recompute, about as the
      square of TOKENS).
  replace-plan.py truncate CHECKPOINT WORK
      A moe-run decoding from WORK/plan while its weight file is truncated
      under it (by hand, as no tool does): it must fail with exit 1 and one
      line, not die of SIGBUS.
  replace-plan.py interrupt CHECKPOINT WORK SIGNAL
      moe-compile rewriting WORK/plan is sent SIGNAL (TERM or KILL) while it
      writes: WORK/plan must still load and verify and hold the old plan;
      after SIGTERM nothing of the attempt is left beside it, after SIGKILL
      the next moe-compile clears what was left.

Prints one line per fact checked; exits 1 on the first that fails.
"""
import glob
import json
import os
import signal
import subprocess
import sys
import time

from plan_checks import fail, run

TIMEOUT = 300


def leftovers(plan):
    """What a compile into `plan` may leave beside it."""
    parent, name = os.path.split(os.path.abspath(plan))
    return sorted(glob.glob(os.path.join(parent, f".{name}.moe-compile-*")))


def maps(pid, path):
    """Whether process `pid` has a file under `path` mapped."""
    try:
        with open(f"/proc/{pid}/maps") as f:
            return any(os.path.abspath(path) in line for line in f)
    except OSError:
        return False


READER_TOKENS = 120


def reader_args(tokens=READER_TOKENS):
    return ["--prompt-tokens", "1,2,3,4,5,6,7,8", "--max-new-tokens", str(tokens), "--recompute"]


def start_reader(plan, args):
    """A moe-run decoding from `plan`, returned once it has the plan mapped."""
    proc = subprocess.Popen(["moe-run", plan, *args, "--json", "-"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + TIMEOUT
    while not maps(proc.pid, plan):
        if proc.poll() is not None or time.time() > deadline:
            fail("the reader ended before it mapped the plan")
        time.sleep(0.01)
    return proc


def reader(checkpoint, work, tokens):
    plan = os.path.join(work, "plan")
    run("moe-compile", checkpoint, "-o", plan)
    args = reader_args(tokens)
    expected = json.loads(run("moe-run", plan, *args, "--json", "-"))["generated_tokens"]
    proc = start_reader(plan, args)
    for precision in ("int8", "keep"):
        run("moe-compile", checkpoint, "-o", plan, "--precision", precision)
    if proc.poll() is not None and proc.returncode < 0:
        fail(f"the reader died of signal {-proc.returncode}")
    if proc.poll() is not None:
        fail("the reader finished before the plan was replaced twice: the test proved "
             "nothing; give it more tokens")
    print("reader: the plan was replaced twice while a moe-run had it mapped")
    out, err = proc.communicate(timeout=TIMEOUT)
    if proc.returncode < 0:
        fail(f"the reader died of signal {-proc.returncode}")
    if proc.returncode != 0:
        if len(err.strip().splitlines()) != 1:
            fail(f"the reader failed without a one-line error: {err!r}")
        print(f"reader: failed with one line: {err.strip()}")
        return
    if json.loads(out)["generated_tokens"] != expected:
        fail("the reader's tokens differ from those of the plan it started with")
    print("reader: finished with exit 0 and the tokens of the plan it started with")
    run("moe-plan", "verify", plan)
    print("reader: the new plan verifies")


def truncate(checkpoint, work):
    plan = os.path.join(work, "plan")
    run("moe-compile", checkpoint, "-o", plan)
    proc = start_reader(plan, reader_args())
    os.truncate(os.path.join(plan, "weights-0.bin"), 4096)
    out, err = proc.communicate(timeout=TIMEOUT)
    if proc.returncode == 0:
        fail("the reader finished although its weights were cut short: the test proved "
             "nothing; give it more tokens")
    if proc.returncode != 1 or len(err.strip().splitlines()) != 1:
        fail(f"expected exit 1 with one line, got {proc.returncode}: {err!r}")
    print(f"truncate: the reader stopped with exit 1: {err.strip()}")


def interrupt(checkpoint, work, sig):
    plan = os.path.join(work, "plan")
    run("moe-compile", checkpoint, "-o", plan)
    before = run("moe-plan", "show", plan)
    proc = subprocess.Popen(["moe-compile", checkpoint, "-o", plan, "--precision", "int8"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + TIMEOUT
    # Interrupt it once it writes weights beside the plan.
    while not any(os.path.getsize(w) > 0 for s in leftovers(plan)
                  for w in glob.glob(os.path.join(s, "weights-*.bin"))):
        if proc.poll() is not None or time.time() > deadline:
            fail("moe-compile finished before it could be interrupted: the test proved "
                 "nothing; use a larger checkpoint")
        time.sleep(0.005)
    proc.send_signal(getattr(signal, "SIG" + sig))
    _, err = proc.communicate(timeout=TIMEOUT)
    if sig == "TERM":
        if proc.returncode != 1 or len(err.strip().splitlines()) != 1:
            fail(f"SIGTERM: expected exit 1 with one line, got {proc.returncode}: {err!r}")
        print(f"interrupt: moe-compile stopped with exit 1: {err.strip()}")
    run("moe-plan", "verify", plan)
    if run("moe-plan", "show", plan) != before:
        fail("the plan changed")
    print(f"interrupt: after SIG{sig} the old plan still loads, verifies and is unchanged")
    left = leftovers(plan)
    if sig == "TERM" and left:
        fail(f"SIGTERM left {left}")
    if sig == "KILL":
        if not left:
            fail("SIGKILL left nothing: the test did not catch moe-compile mid-write")
        run("moe-compile", checkpoint, "-o", plan)
        if leftovers(plan):
            fail(f"the next compile left {leftovers(plan)}")
        print("interrupt: the next moe-compile cleared what SIGKILL left")
    else:
        print("interrupt: nothing of the interrupted compile is left")


def main():
    if len(sys.argv) in (4, 5) and sys.argv[1] == "reader":
        reader(sys.argv[2], sys.argv[3], int(sys.argv[4]) if len(sys.argv) == 5 else READER_TOKENS)
    elif len(sys.argv) == 4 and sys.argv[1] == "truncate":
        truncate(sys.argv[2], sys.argv[3])
    elif len(sys.argv) == 5 and sys.argv[1] == "interrupt":
        interrupt(sys.argv[2], sys.argv[3], sys.argv[4])
    else:
        sys.exit(__doc__)
    return 0


if __name__ == "__main__":
    sys.exit(main())
