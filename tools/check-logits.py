#!/usr/bin/env python3
"""Logits that a refactoring must not change, recorded once and compared
after each step (issue 50: "no behaviour change").

  check-logits.py record BIN_DIR DIR     compile and run, keep the logits in DIR
  check-logits.py compare BIN_DIR DIR    compile and run again, compare with DIR

For the five golden model types (test/e2e/goldens) and the trained example
(examples/kjv-moe), plans compiled with the default pipeline and with
--precision int8 on one rank, --ep 2 (expert_rows with held experts),
--tp 2 and --ep 2 --dp-attention --overlap two-batch (views, streams,
exchanges) under mpirun -np 2: moe-run --dump-logits of a prefill of 7
tokens and 4 greedy steps. `compare` prints one line per plan and exits 1
when any plan's logits differ by a byte (or it has none recorded).
Standard library only.
"""
import os
import sys

from bench_common import MPIRUN, run

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODELS = ["mixtral", "qwen2_moe", "qwen3_moe", "deepseek_v2", "deepseek_v3"]
PROMPT = "1,7,3,9,11,2,5"
STEPS = 4
# (label, moe-compile flags, ranks)
VARIANTS = [("one", [], 1), ("int8", ["--precision", "int8"], 1), ("ep2", ["--ep", "2"], 2),
            ("tp2", ["--tp", "2"], 2),
            ("dp2-overlap", ["--ep", "2", "--dp-attention", "--overlap", "two-batch"], 2)]


def logits(bin_dir, checkpoint, work, label, flags, ranks):
    plan = os.path.join(work, "plan-" + label)
    out = plan + ".logits"
    run(os.path.join(bin_dir, "moe-compile"), checkpoint, "-o", plan, "--max-context", "64",
        *flags)
    launcher = MPIRUN + ["-np", str(ranks)] if ranks > 1 else []
    run(*launcher, os.path.join(bin_dir, "moe-run"), plan, "--prompt-tokens", PROMPT,
        "--max-new-tokens", str(STEPS), "--ignore-eos", "--dump-logits", out)
    with open(out, "rb") as f:
        return f.read()


def main():
    if len(sys.argv) != 4 or sys.argv[1] not in ("record", "compare"):
        sys.exit(__doc__.strip())
    mode, bin_dir, store = sys.argv[1:]
    work = os.path.join(store, "work")
    os.makedirs(work, exist_ok=True)
    checkpoints = [(m, os.path.join(ROOT, "test", "e2e", "goldens", m)) for m in MODELS]
    checkpoints.append(("kjv-moe", os.path.join(ROOT, "examples", "kjv-moe")))
    differ = 0
    for name, checkpoint in checkpoints:
        for label, flags, ranks in VARIANTS:
            got = logits(bin_dir, checkpoint, work, f"{name}-{label}", flags, ranks)
            kept = os.path.join(store, f"{name}-{label}.logits")
            if mode == "record":
                with open(kept, "wb") as f:
                    f.write(got)
                print(f"{name} {label}: recorded {len(got)} bytes")
                continue
            want = open(kept, "rb").read() if os.path.exists(kept) else None
            same = want == got
            differ += not same
            print(f"{name} {label}: " + ("identical" if same else
                                          "NOT RECORDED" if want is None else
                                          f"DIFFERENT ({len(got)} bytes, {len(want)} recorded)"))
    if differ:
        sys.exit(f"check-logits: {differ} plan(s) differ from {store}")


if __name__ == "__main__":
    main()
