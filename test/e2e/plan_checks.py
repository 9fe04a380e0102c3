"""What the end-to-end scripts share (standard library only; the tools on
PATH): run a tool, stop at the first failure with one FAIL line, and read
the logits a plan computes for a prompt."""
import os
import shlex
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


def logits(plan, prompt, steps, launcher=()):
    """Every logits row of a greedy run of `steps` tokens after `prompt`
    (launched through `launcher`, e.g. mpirun -np N), as bytes."""
    out = plan + ".logits"
    run(*launcher, "moe-run", plan, "--prompt-tokens", prompt, "--max-new-tokens", str(steps),
        "--ignore-eos", "--dump-logits", out)
    with open(out, "rb") as f:
        return f.read()


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
