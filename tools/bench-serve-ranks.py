#!/usr/bin/env python3
"""Served throughput over ranks: moe-bench --url at several concurrencies
against a single-rank server and mpirun servers of the same model split
over ranks (issue 49).

  bench-serve-ranks.py BIN_DIR [--work DIR] [--ranks 4] [--concurrency 1,16,64]
                       [--layouts ep,dp,tp,dptp] [--keep]

The model is the 1.76 GB benchmark checkpoint (tools/make-bench-checkpoint.sh,
generated once into WORK/ckpt) with a byte-level tokenizer.json over its
32,000 ids added (the server needs text; moe-bench sends token ids). Every
server gets the same requests (moe-bench --seed 0); the table gives each
level's output tokens per second and time to first token as moe-bench
measured them, and the ratio to the single-rank server. Ranks share this
machine's cores: on a machine with fewer cores than ranks the ratios show
the overhead of splitting, not the scaling a node with a core (or a GPU)
per rank would see. Layouts: ep (--ep N), dp (--ep N --dp-attention:
each rank serves the requests rank 0 gives it), tp (--tp N), dptp (--ep N
--tp N/2 --dp-attention: two data-parallel groups of N/2 tensor-parallel
ranks, each serving the requests rank 0 gives it).
"""
import argparse
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "test", "e2e"))
from serve_common import Server  # noqa: E402

MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe", "--mca",
          "btl_vader_single_copy_mechanism", "none", "--mca", "odls_base_sigkill_timeout", "5"]


def text_checkpoint(ckpt, out, vocab):
    """`ckpt` with a tokenizer.json: ids 0-255 the bytes, the rest "<tN>"."""
    spec = importlib.util.spec_from_file_location(
        "mtc", os.path.join(HERE, "..", "test", "e2e", "make-text-checkpoint.py"))
    mtc = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mtc)
    mtc.with_byte_tokenizer(ckpt, out, vocab,
                            [n for n in os.listdir(ckpt) if not n.startswith("tokenizer")])


def bench(bin_dir, plan, url, concurrency, work):
    out = os.path.join(work, "bench.json")
    cmd = [os.path.join(bin_dir, "moe-bench"), plan, "--url", url, "--model-name", "bench",
           "--concurrency", concurrency, "--prompt-len", "64:64", "--output-len", "32:32",
           "--ignore-eos", "--seed", "0", "--json", out, "--api-key-file",
           os.path.join(work, "keys")]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    with open(out) as f:
        return json.load(f)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("bin_dir")
    ap.add_argument("--work", default="/tmp/moe-bench-serve-ranks")
    ap.add_argument("--ranks", type=int, default=4)
    ap.add_argument("--concurrency", default="1,16,64")
    ap.add_argument("--layouts", default="ep,dp,tp,dptp")
    ap.add_argument("--keep", action="store_true", help="keep the plans")
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    ckpt = os.path.join(a.work, "ckpt")
    subprocess.run([os.path.join(HERE, "make-bench-checkpoint.sh"), ckpt], check=True)
    text = os.path.join(a.work, "text")
    text_checkpoint(ckpt, text, 32000)
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo")
                if l.startswith("model name")), "?")
    print(f"# {cpu}, {os.cpu_count()} cores; prompts 64 tokens, 32 generated, --ignore-eos")
    n = str(a.ranks)
    layouts = {"one": ([], "one rank"), "ep": (["--ep", n], f"--ep {n}"),
               "dp": (["--ep", n, "--dp-attention"], f"--ep {n} --dp-attention"),
               "tp": (["--tp", n], f"--tp {n}"),
               "dptp": (["--ep", n, "--tp", str(a.ranks // 2), "--dp-attention"],
                        f"--ep {n} --tp {a.ranks // 2} --dp-attention")}
    results = {}
    for layout in ["one"] + a.layouts.split(","):
        if layout not in layouts:
            raise SystemExit(f"bench-serve-ranks.py: --layouts: unknown layout '{layout}' "
                             f"({', '.join(k for k in layouts if k != 'one')})")
        plan = os.path.join(a.work, "plan-" + layout)
        flags = layouts[layout][0]
        t0 = time.time()
        subprocess.run([os.path.join(a.bin_dir, "moe-compile"), text, "-o", plan,
                        "--max-context", "512", *flags], check=True, stdout=subprocess.DEVNULL)
        launcher = [] if layout == "one" else MPIRUN + ["-np", str(a.ranks)]
        server = Server(a.bin_dir, plan, os.path.join(a.work, "serve-" + layout),
                        "--kv-blocks", "512", name="bench", launcher=launcher)
        server.wait_healthy(600)
        try:
            report = bench(a.bin_dir, plan, f"http://127.0.0.1:{server.port}", a.concurrency,
                           os.path.join(a.work, "serve-" + layout))
        finally:
            server.proc.terminate()
            server.proc.wait(timeout=60)
        results[layout] = report
        print(f"# {layout}: compiled and served in {time.time() - t0:.0f} s", flush=True)
        if not a.keep:
            shutil.rmtree(plan)
    base = results["one"]
    print("| server | concurrency | output tok/s | x one rank | mean TTFT s |")
    print("|---|---|---|---|---|")
    for layout, report in results.items():
        for level in report["levels"]:
            c = int(level["concurrency"])
            ref = next(l for l in base["levels"] if l["concurrency"] == c)
            name = layouts[layout][1]
            print(f"| {name} | {c} | {level['output_tokens_per_second']:.1f} | "
                  f"{level['output_tokens_per_second'] / ref['output_tokens_per_second']:.2f} | "
                  f"{level['ttft_ms']['mean'] / 1e3:.3f} |")


if __name__ == "__main__":
    main()
