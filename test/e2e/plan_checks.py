"""What the end-to-end scripts share (standard library only; the tools on
PATH): run a tool, stop at the first failure with one FAIL line, and read
the logits a plan computes for a prompt."""
import os
import shlex
import struct
import subprocess
import sys

TIMEOUT = 600


def fail(message):
    print(f"FAIL: {message}")
    sys.exit(1)


def run(*cmd):
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT)
    if r.returncode != 0:
        fail(f"{' '.join(cmd)} exited {r.returncode}: {r.stderr.strip()}")
    return r.stdout


def logits(plan, prompt, steps, launcher=(), *flags):
    """Every logits row of a greedy run of `steps` tokens after `prompt`
    (launched through `launcher`, e.g. mpirun -np N, with moe-run `flags`),
    as bytes."""
    out = plan + ".logits"
    run(*launcher, "moe-run", plan, "--prompt-tokens", prompt, "--max-new-tokens", str(steps),
        "--ignore-eos", "--dump-logits", out, *flags)
    with open(out, "rb") as f:
        return f.read()


def greedy(plan, prompt, steps, launcher=(), *flags):
    """A greedy run of `steps` tokens after `prompt` (through `launcher`,
    with moe-run `flags`): its "generated:" line, every logits row as
    floats, and its standard output."""
    out = plan + ".logits"
    text = run(*launcher, "moe-run", plan, "--prompt-tokens", prompt, "--max-new-tokens",
               str(steps), "--ignore-eos", "--dump-logits", out, *flags)
    tokens = next(l for l in text.splitlines() if l.startswith("generated:"))
    with open(out, "rb") as f:
        data = f.read()
    return tokens, struct.unpack(f"<{len(data) // 4}f", data), text


def same_greedy_run(label, got, want, tolerance):
    """Fails unless `got` and `want` (greedy()'s) have the same tokens and
    logits within `tolerance`; the largest difference."""
    if got[0] != want[0]:
        fail(f"{label}: {got[0]}, one rank {want[0]}")
    if len(got[1]) != len(want[1]):
        fail(f"{label}: {len(got[1])} logits, one rank {len(want[1])}")
    err = max(abs(a - b) for a, b in zip(got[1], want[1]))
    if err > tolerance:
        fail(f"{label}: logits differ by up to {err:.3g}")
    return err


GOLDEN_TYPES = ("mixtral", "qwen2_moe", "qwen3_moe", "deepseek_v2", "deepseek_v3")


def check_ranked_models(check):
    """For a multi-rank script run as `SCRIPT MPIRUN GOLDENS EXAMPLE WORK
    RANKS` (RANKS: the rank counts, e.g. 2,4): check(mpirun, name,
    checkpoint, work, rank_counts) for each golden model type, then for the
    trained example."""
    mpirun = shlex.split(sys.argv[1])
    goldens, example, work = sys.argv[2:5]
    rank_counts = tuple(int(n) for n in sys.argv[5].split(","))
    for model in GOLDEN_TYPES:
        check(mpirun, model, os.path.join(goldens, model), work, rank_counts)
    check(mpirun, "kjv-moe", example, work, rank_counts)
