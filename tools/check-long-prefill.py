#!/usr/bin/env python3
"""A long prefill never trips the collective deadline (issue 49).

  check-long-prefill.py BIN_DIR [--work DIR] [--ranks 4] [--deadline SECONDS]
                        [--layouts ep,dp] [--batch-tokens 256,4096]

The deadline (--collective-timeout) bounds how long one rank waits inside
one collective for its peers, not how long a step computes. On the 1.76 GB
benchmark model (tools/make-bench-checkpoint.sh; its context is 4,096) a
prompt of 4,095 tokens runs under mpirun -np RANKS with the deadline
(default: the tools' own, no --collective-timeout), for plans whose ranks step together
(--ep) and for data-parallel attention (--ep --dp-attention: rank 0
prefills alone, the others join its steps and wait in each MoE layer's
exchange for its attention), each at the default --max-batch-tokens (256:
the prompt is chunked) and at 4096 (one step of the whole prompt). Each
run must finish, rc 0; the line says whether the prefill outlasted the
deadline (then the deadline bounded waiting, not work). A rank of a
data-parallel plan waits for another's computation of a layer of its step,
so a deadline must exceed the slowest layer of the largest step
(docs/parallelism.md has the figures of a 5 s deadline). Prints one line
per run; exits 1 if one failed. Heavy (minutes): `make check-long-prefill`
runs every case; `make test` the steps of 4,096 tokens
(test/e2e/long-prefill.test).
"""
import argparse
import os
import re
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe", "--mca",
          "btl_vader_single_copy_mechanism", "none"]
PROMPT = 4095


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("bin_dir")
    ap.add_argument("--work", default="/tmp/moe-bench-serve-ranks")
    ap.add_argument("--ranks", type=int, default=4)
    ap.add_argument("--deadline", type=float,
                    help="--collective-timeout (default: none given, the tools' default)")
    ap.add_argument("--layouts", default="ep,dp")
    ap.add_argument("--batch-tokens", default="256,4096")
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    ckpt = os.path.join(a.work, "ckpt")
    subprocess.run([os.path.join(HERE, "make-bench-checkpoint.sh"), ckpt], check=True)
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo")
                if l.startswith("model name")), "?")
    flag = [] if a.deadline is None else ["--collective-timeout", f"{a.deadline:g}"]
    if a.deadline is None:  # the tools' own, as their --help states it
        usage = subprocess.run([os.path.join(a.bin_dir, "moe-run"), "--help"],
                               capture_output=True, text=True, check=True).stdout
        a.deadline = float(re.search(r"--collective-timeout SECONDS.*?\(default ([0-9.]+)\)",
                                     usage, re.S).group(1))
    print(f"# {cpu}, {os.cpu_count()} cores; {PROMPT}-token prompt, {a.ranks} ranks, "
          f"--collective-timeout {a.deadline:g}{'' if flag else ' (the default)'}", flush=True)
    prompt = ",".join(str((i * 37) % 31999 + 1) for i in range(PROMPT))
    n = str(a.ranks)
    failed = False
    layouts = {"ep": ("ep", ["--ep", n]),
               "dp": ("ep + dp-attention", ["--ep", n, "--dp-attention"])}
    for label, flags in (layouts[k] for k in a.layouts.split(",")):
        for tokens in (int(t) for t in a.batch_tokens.split(",")):
            plan = os.path.join(a.work, f"prefill-{label.replace(' ', '')}-{tokens}")
            subprocess.run([os.path.join(a.bin_dir, "moe-compile"), ckpt, "-o", plan,
                            "--max-batch-tokens", str(tokens), *flags], check=True,
                           stdout=subprocess.DEVNULL)
            t0 = time.monotonic()
            r = subprocess.run(MPIRUN + ["-np", n, os.path.join(a.bin_dir, "moe-run"), plan,
                                         "--prompt-tokens", prompt, "--max-new-tokens", "1",
                                         "--ignore-eos", *flag], capture_output=True,
                                        text=True)
            took = time.monotonic() - t0
            ttft = re.search(r"in ([0-9.]+) (ms|s) \(time to first token\)", r.stdout)
            prefill = (float(ttft.group(1)) / (1000 if ttft.group(2) == "ms" else 1)
                       if ttft else None)
            ok = r.returncode == 0 and prefill is not None
            outlasted = ok and prefill > a.deadline
            print(f"{'ok  ' if ok else 'FAIL'} --{label} --max-batch-tokens {tokens}: rc "
                  f"{r.returncode}, prefill {prefill if prefill is None else round(prefill, 1)} s "
                  f"({'longer' if outlasted else 'not longer'} than the deadline, "
                  f"{a.deadline:g} s), job {took:.1f} s", flush=True)
            if not ok:
                failed = True
                print(r.stderr.strip()[-2000:])
            subprocess.run(["rm", "-rf", plan])
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
