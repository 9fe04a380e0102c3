#!/usr/bin/env python3
"""Our engine against llama.cpp on this machine, side by side.

  bench-vs-llamacpp.py BUILD_BIN [--rounds 5] [--threads 2] [--work DIR]
                       [--checkpoint DIR] [--batches 8,32,64] [--json FILE]

Stages (each skipped when its result is already there, except our plans):
  1. llama.cpp: `pip download --no-deps --no-binary :all: llama-cpp-python==V`
     into build-llamacpp/ (ignored; nothing of it is committed), its vendored
     llama.cpp extracted and built natively with CMake (GGML_NATIVE, Release,
     no curl, only llama-bench and llama-batched-bench, -j2).
  2. What convert_hf_to_gguf.py needs, in this Python (the .venv): the
     vendored gguf-py, mistral-common, sentencepiece (numpy left as it is).
  3. The medium benchmark checkpoint (tools/make-bench-checkpoint.sh); a copy
     of it (safetensors symlinked) with `architectures` in config.json and a
     byte-level BPE tokenizer trained with `tokenizers` to its vocabulary
     size (it has none; the tokenizer only makes the conversion work);
     converted to GGUF bf16 and q8_0 by the vendored convert_hf_to_gguf.py,
     run through a shim that names the pre-tokenizer (our tokenizer's hash is
     in no table) and reads config.json as written (transformers 5 renames
     keys that the converter expects).
  4. Our plans: moe-compile as is (bf16), --precision int8 (every matrix
     int8, one scale per row: q8_0's weights) and --precision w8a8 (the same
     weights, activations quantized per token to int8 as q8_0's dot products
     quantize theirs), --max-batch-tokens 512 --max-context 1024
     --weight-layout panels (the CPU layout: the bf16 plan's matrices in
     panels of 8 rows; quantized weights stay rows), compiled every run.
  5. ROUNDS rounds; in each, every figure is measured by llama.cpp and by us
     one after the other, the order alternating between rounds, so that the
     drift of a shared machine hits both alike. Per figure: the median of the
     per-round ratios ours / llama.cpp (speed over speed) with min and max.

Figures, all with THREADS threads:
  prefill 512          llama-bench -p 512 -n 0 -r 2 (best) | moe-roofline --only prefill
                       --prefill-tokens 512 (best of 2 prefills)
  decode batch 1       llama-bench -p 0 -n 32 -d 16 -r 2 (best) | moe-roofline --only
                       decode1 --prompt-len 16 --decode-steps 32 --repeats 2 (best)
  decode batch B       llama-batched-bench -npp 16 -ntg 32 -npl B (S_TG). Its B sequences
                       are identical (token 0 everywhere), so every row of a step routes
                       to the same 8 experts: ours is measured the same way (moe-bench, B
                       requests of sixteen 0 tokens, 33 greedy tokens, the same ones) and,
                       as the realistic figure, with B different random prompts
                       (moe-roofline --only decode-batch --batch B), which at B >= 32 reads
                       nearly every expert of every layer; its 'roof' is moe-roofline's
                       fraction of the batch's bound (the step's bytes at the triad or
                       its FLOPs at the matmul peak, whichever is slower).
  first prefill        a fresh process's first 512-token prefill: llama-bench -p 512 -n 0
                       -r 1 --no-warmup | moe-run --prompt-tokens <512 ids>
                       --max-new-tokens 1 (time to first token); weights in the page cache.

Fraction of the bandwidth roofline (decode): tokens/s x bytes read per token
/ STREAM triad bandwidth. The triad is moe-roofline's, measured in the same
round by our run of that figure. Bytes per token: ours from moe-roofline
(every dense weight, one embedding row, top_k / num_experts of the experts,
KV rows at the mean context); llama.cpp's by the same rule from its GGUF's
tensor sizes (its f16 KV). At batch B with different sequences a step reads
the expected number of distinct experts, num_experts x (1 - (1 - top_k /
num_experts)^B) per layer; with identical sequences, top_k.

Writes every raw number to JSON (default WORK/bench-vs-llamacpp.json).
"""
import argparse
import glob
import json
import os
import random
import shutil
import statistics
import struct
import subprocess
import sys
import time

from bench_common import cpu_model
from llamacpp import (CMAKE_FLAGS, LLAMA_DIR, LLAMACPP_VERSION, Runner, fail, gguf_bytes,
                      install_llamacpp, llama_src, llamacpp_isa, loadavg, log, median_min_max, run,
                      step_bytes)

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
PREFILL, PROMPT, STEPS = 512, 16, 32
TOKENIZER_RECIPE = 1  # bump when make_tokenizer changes: the GGUFs are then remade

# Runs convert_hf_to_gguf.py with two replacements: the BPE pre-tokenizer is
# named (the converter identifies it by a hash of known tokenizers' output,
# and ours is in no table) and config.json is read as written (through
# transformers 5's AutoConfig Qwen3-MoE's num_experts and rope_theta get
# other names). argv: convert_hf_to_gguf.py, then the converter's arguments.
CONVERT_SHIM = r"""
import importlib.util, json, sys
path = sys.argv[1]
sys.argv = [path] + sys.argv[2:]
spec = importlib.util.spec_from_file_location("convert_hf_to_gguf", path)
m = importlib.util.module_from_spec(spec)
sys.modules["convert_hf_to_gguf"] = m
spec.loader.exec_module(m)
m.TextModel.get_vocab_base_pre = lambda self, tokenizer: "qwen2"
def load_hparams(dir_model, is_mistral_format=False):
    with open(dir_model / "config.json", encoding="utf-8") as f:
        return json.load(f)
m.ModelBase.load_hparams = staticmethod(load_hparams)
m.main()
"""


# ---- stage 2: conversion tools -------------------------------------------------------------


def install_convert_deps(version):
    probe = "import gguf, mistral_common, sentencepiece, tokenizers, torch, transformers"
    if subprocess.run([sys.executable, "-c", probe], capture_output=True).returncode == 0:
        log("conversion: gguf, mistral-common, sentencepiece present")
        return
    if subprocess.run([sys.executable, "-c", "import tokenizers, torch, transformers"],
                      capture_output=True).returncode != 0:
        fail(f"{sys.executable} lacks tokenizers, torch or transformers; "
             "run tools/setup-venv.sh and use .venv/bin/python")
    numpy = subprocess.run([sys.executable, "-c", "import numpy; print(numpy.__version__)"],
                           capture_output=True, text=True).stdout.strip()
    pins = [f"numpy=={numpy}"] if numpy else []
    log("conversion: pip install the vendored gguf-py, mistral-common, sentencepiece ...")
    run([sys.executable, "-m", "pip", "install", "-q", os.path.join(llama_src(version), "gguf-py"),
         "mistral-common>=1.8.3", "sentencepiece"] + pins, "pip install (conversion deps)")


# ---- stage 3: checkpoint, tokenizer, GGUF --------------------------------------------------


def safetensors_complete(path):
    """True when the file holds its whole header and every tensor (not still being written)."""
    try:
        size = os.path.getsize(path)
        with open(path, "rb") as f:
            n = struct.unpack("<Q", f.read(8))[0]
            header = json.loads(f.read(n))
        end = max(v["data_offsets"][1] for k, v in header.items() if k != "__metadata__")
        return size == 8 + n + end
    except (OSError, ValueError, struct.error, KeyError):
        return False


def make_checkpoint(ckpt):
    run([os.path.join(HERE, "make-bench-checkpoint.sh"), ckpt], "make-bench-checkpoint.sh")
    st = os.path.join(ckpt, "model.safetensors")
    for _ in range(120):  # another benchmark may be writing the same checkpoint
        if safetensors_complete(st):
            return
        log(f"checkpoint: {st} is incomplete (being written?); waiting ...")
        time.sleep(10)
    fail(f"{st} is incomplete; delete {ckpt} and run again")


def make_tokenizer(vocab_size, path):
    """A byte-level BPE (Qwen2's split regex) trained to exactly vocab_size tokens on the
    repository's text and deterministic made-up words; only for the GGUF conversion."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
    texts = [open(p, encoding="utf-8", errors="replace").read()
             for p in [os.path.join(ROOT, "examples/kjv-moe/heldout.txt")] +
             sorted(glob.glob(os.path.join(ROOT, "docs/*.md")))]
    rng = random.Random(0)
    syllables = ["ka", "to", "ri", "ne", "su", "mo", "la", "pe", "di", "gu", "xo", "vi", "ba",
                 "ce", "fu", "ha", "jo", "qu", "wy", "ze"]
    texts.append("".join(" " + "".join(rng.choice(syllables) for _ in range(rng.randint(2, 6)))
                         for _ in range(60000)))
    split = Regex(r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"""
                  r"""| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+""")
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(split, behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=1, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  special_tokens=["<|endoftext|>"])
    tok.train_from_iterator(texts, trainer)
    if tok.get_vocab_size() != vocab_size:
        fail(f"the trained tokenizer has {tok.get_vocab_size()} tokens, not {vocab_size}")
    tok.save(path)


def make_hf_copy(ckpt, hf):
    """ckpt with a tokenizer: config.json (+ architectures), model.safetensors symlinked."""
    config = json.load(open(os.path.join(ckpt, "config.json")))
    config.setdefault("architectures", ["Qwen3MoeForCausalLM"])
    stamp = os.path.join(hf, "made.json")
    st = os.path.join(ckpt, "model.safetensors")
    want = {"recipe": TOKENIZER_RECIPE, "config": config, "safetensors": os.path.abspath(st),
            "mtime": os.path.getmtime(st), "size": os.path.getsize(st)}
    if os.path.exists(stamp) and json.load(open(stamp)) == want:
        return want, False
    log(f"checkpoint: a copy with a tokenizer ({config['vocab_size']} tokens) in {hf} ...")
    shutil.rmtree(hf, ignore_errors=True)
    os.makedirs(hf)
    json.dump(config, open(os.path.join(hf, "config.json"), "w"), indent=2)
    os.symlink(os.path.abspath(st), os.path.join(hf, "model.safetensors"))
    make_tokenizer(config["vocab_size"], os.path.join(hf, "tokenizer.json"))
    json.dump({"tokenizer_class": "PreTrainedTokenizerFast", "eos_token": "<|endoftext|>",
               "model_max_length": config.get("max_position_embeddings", 4096)},
              open(os.path.join(hf, "tokenizer_config.json"), "w"), indent=2)
    json.dump(want, open(stamp, "w"), indent=1)
    return want, True


def convert(version, hf, outtype, gguf, remake, log_file):
    stamp = gguf + ".json"
    want = {"llamacpp": version, "hf": json.load(open(os.path.join(hf, "made.json"))),
            "outtype": outtype}
    if not remake and os.path.exists(gguf) and os.path.exists(stamp) and \
            json.load(open(stamp)) == want:
        log(f"gguf: {os.path.basename(gguf)} already converted")
        return
    log(f"gguf: convert_hf_to_gguf.py --outtype {outtype} -> {gguf} (about a minute) ...")
    tmp = gguf + ".tmp"
    run([sys.executable, "-c", CONVERT_SHIM, os.path.join(llama_src(version), "convert_hf_to_gguf.py"),
         hf, "--outtype", outtype, "--outfile", tmp], f"convert_hf_to_gguf.py --outtype {outtype}",
        log_file=log_file)
    os.replace(tmp, gguf)
    json.dump(want, open(stamp, "w"), indent=1)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("bin", help="our build's bin directory (build/bin)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batches", default="8,32,64", help="batched decode sizes")
    ap.add_argument("--work", default=os.path.join(LLAMA_DIR, "work"),
                    help="models, plans, logs (default build-llamacpp/work)")
    ap.add_argument("--checkpoint", default="/tmp/moe-bench-plan/ckpt",
                    help="the benchmark checkpoint (made when absent; shared with bench-roofline)")
    ap.add_argument("--llamacpp-version", default=LLAMACPP_VERSION,
                    help=f"llama-cpp-python sdist version (default {LLAMACPP_VERSION})")
    ap.add_argument("--json", help="raw numbers (default WORK/bench-vs-llamacpp.json)")
    a = ap.parse_args()
    if a.rounds < 1 or a.threads < 1:
        fail("--rounds and --threads must be at least 1")
    try:
        batches = [int(b) for b in a.batches.split(",")]
    except ValueError:
        fail(f"--batches: '{a.batches}' is not a list of integers")
    for tool in ("moe-compile", "moe-roofline", "moe-bench", "moe-run"):
        if not os.access(os.path.join(a.bin, tool), os.X_OK):
            fail(f"{a.bin}/{tool} not found (make build)")
    work = os.path.abspath(a.work)
    os.makedirs(work, exist_ok=True)
    json_path = a.json or os.path.join(work, "bench-vs-llamacpp.json")
    stages = {}

    def stage(name, fn, *args):
        t0 = time.monotonic()
        r = fn(*args)
        stages[name] = round(time.monotonic() - t0, 1)
        return r

    cpu = cpu_model()
    log(f"bench-vs-llamacpp: {cpu}, {os.cpu_count()} cores, {a.threads} threads, "
        f"{a.rounds} rounds; work {work}")
    build = stage("install llama.cpp", install_llamacpp, a.llamacpp_version)
    llama_bin = os.path.join(build, "bin")
    stage("conversion packages", install_convert_deps, a.llamacpp_version)
    stage("checkpoint", make_checkpoint, a.checkpoint)
    config = json.load(open(os.path.join(a.checkpoint, "config.json")))
    hf = os.path.join(work, "hf")
    _, remade = stage("tokenizer", make_hf_copy, a.checkpoint, hf)
    ggufs = {"bf16": os.path.join(work, "model-bf16.gguf"),
             "q8_0": os.path.join(work, "model-q8_0.gguf")}
    for outtype, path in ggufs.items():
        stage(f"gguf {outtype}", convert, a.llamacpp_version, hf, outtype, path, remade,
              os.path.join(work, "convert.log"))
    plans = {name: os.path.join(work, f"plan-{name}") for name in ("bf16", "int8", "w8a8")}

    def compile_plans():
        for name, precision in (("bf16", []), ("int8", ["--precision", "int8"]),
                                ("w8a8", ["--precision", "w8a8"])):
            log(f"ours: moe-compile {' '.join(precision) or '(as stored: bf16)'} -> {plans[name]}")
            shutil.rmtree(plans[name], ignore_errors=True)
            run([os.path.join(a.bin, "moe-compile"), a.checkpoint, "-o", plans[name],
                 "--max-batch-tokens", str(PREFILL), "--max-context", "1024",
                 "--weight-layout", "panels"] + precision,
                "moe-compile")
    stage("moe-compile", compile_plans)
    inventory = {k: gguf_bytes(p, config) for k, p in ggufs.items()}

    r = Runner(a, llama_bin, a.bin, work)
    # (key, label, llama.cpp measurement, our measurement, kind)
    figures = [
        ("prefill_bf16", f"prefill {PREFILL}, bf16",
         lambda: r.llama_prefill(ggufs["bf16"], PREFILL),
         lambda: r.ours_prefill(plans["bf16"], PREFILL), "prefill"),
        ("prefill_int8", f"prefill {PREFILL}, int8 vs q8_0",
         lambda: r.llama_prefill(ggufs["q8_0"], PREFILL),
         lambda: r.ours_prefill(plans["int8"], PREFILL), "prefill"),
        ("prefill_w8a8", f"prefill {PREFILL}, w8a8 vs q8_0",
         lambda: r.llama_prefill(ggufs["q8_0"], PREFILL),
         lambda: r.ours_prefill(plans["w8a8"], PREFILL), "prefill"),
        ("decode1_bf16", "decode batch 1, bf16",
         lambda: r.llama_decode1(ggufs["bf16"], PROMPT, STEPS),
         lambda: r.ours_decode1(plans["bf16"], PROMPT, STEPS), "decode1"),
        ("decode1_int8", "decode batch 1, int8 vs q8_0",
         lambda: r.llama_decode1(ggufs["q8_0"], PROMPT, STEPS),
         lambda: r.ours_decode1(plans["int8"], PROMPT, STEPS), "decode1"),
        ("decode1_w8a8", "decode batch 1, w8a8 vs q8_0",
         lambda: r.llama_decode1(ggufs["q8_0"], PROMPT, STEPS),
         lambda: r.ours_decode1(plans["w8a8"], PROMPT, STEPS), "decode1"),
    ]
    for b in batches:
        figures.append((f"decode{b}_bf16_same", f"decode batch {b}, bf16, identical seqs",
                        lambda b=b: r.llama_batched(ggufs["bf16"], b, PROMPT, STEPS),
                        lambda b=b: r.ours_batched_identical(plans["bf16"], b, PROMPT, STEPS),
                        "same"))
        figures.append((f"decode{b}_bf16", f"decode batch {b}, bf16, ours: distinct seqs",
                        None, lambda b=b: r.ours_batched(plans["bf16"], b, PROMPT, STEPS),
                        "distinct"))
    figures += [
        ("first_prefill_bf16", f"first prefill {PREFILL} (fresh process), bf16",
         lambda: r.llama_first_prefill(ggufs["bf16"], PREFILL),
         lambda: r.ours_first_prefill(plans["bf16"], config["vocab_size"], PREFILL), "first"),
        ("first_prefill_int8", f"first prefill {PREFILL} (fresh process), int8 vs q8_0",
         lambda: r.llama_first_prefill(ggufs["q8_0"], PREFILL),
         lambda: r.ours_first_prefill(plans["int8"], config["vocab_size"], PREFILL), "first"),
    ]

    rounds = []
    t_measure = time.monotonic()
    for n in range(a.rounds):
        order = ("llama.cpp", "ours") if n % 2 == 0 else ("ours", "llama.cpp")
        log(f"round {n + 1} of {a.rounds} ({order[0]} first) ...")
        results = {}
        batched_llama = {}
        for key, label, llama_fn, ours_fn, kind in figures:
            got = {}
            for who in order:
                fn = llama_fn if who == "llama.cpp" else ours_fn
                if fn is None:  # the distinct-sequence batch is paired with the same llama run
                    continue
                load = loadavg()
                got[who] = fn()
                got[who]["loadavg_before"] = load
            if kind == "same":
                batched_llama[key.replace("_same", "")] = got["llama.cpp"]
            if kind == "distinct":
                got["llama.cpp"] = batched_llama[key]
            got["ratio"] = got["ours"]["tokens_per_second"] / got["llama.cpp"]["tokens_per_second"]
            results[key] = got
            log(f"  {label}: llama.cpp {got['llama.cpp']['tokens_per_second']:.1f} tok/s, "
                f"ours {got['ours']['tokens_per_second']:.1f} tok/s, "
                f"ours / llama.cpp {got['ratio']:.2f}")
        rounds.append({"order": list(order), "figures": results})
    stages["measurements"] = round(time.monotonic() - t_measure, 1)

    # Roofline fractions per round, with the triad that our run of the figure measured
    # (batched, identical sequences: that of our distinct-sequence run of the same B).
    ctx1 = PROMPT + STEPS / 2
    inv16 = inventory["bf16"]
    ours_kv = 2 * inv16["kv_per_position"]  # our KV is f32, llama.cpp's f16
    for rd in rounds:
        f = rd["figures"]
        for prec, gguf_type in (("bf16", "bf16"), ("int8", "q8_0"), ("w8a8", "q8_0")):
            g = f[f"decode1_{prec}"]
            l = g["llama.cpp"]
            l["bytes_per_token"] = step_bytes(inventory[gguf_type], config, 1, True, ctx1)
            l["roofline_fraction"] = (l["tokens_per_second"] * l["bytes_per_token"] /
                                      (g["ours"]["triad_gbps"] * 1e9))
        for b in batches:
            same, dist = f[f"decode{b}_bf16_same"], f[f"decode{b}_bf16"]
            triad = dist["ours"]["triad_gbps"] * 1e9
            ours1 = dist["ours"]["bytes_per_token_batch1"]
            extra = (b - 1) * (inv16["embedding_row"] + ours_kv * ctx1)
            o = same["ours"]
            o["bytes_per_step"] = ours1 + extra
            o["roofline_fraction"] = o["tokens_per_second"] / b * o["bytes_per_step"] / triad
            l = same["llama.cpp"]  # also dist["llama.cpp"]: the same run
            l["bytes_per_step"] = step_bytes(inv16, config, b, True, ctx1)
            l["roofline_fraction"] = l["tokens_per_second"] / b * l["bytes_per_step"] / triad

    # ---- the table ----
    summary = {}
    rows = []
    for key, label, _, _, kind in figures:
        per = [rd["figures"][key] for rd in rounds]
        ratios = [g["ratio"] for g in per]
        med, lo, hi = median_min_max(ratios)
        lt = statistics.median(g["llama.cpp"]["tokens_per_second"] for g in per)
        ot = statistics.median(g["ours"]["tokens_per_second"] for g in per)
        s = {"label": label, "llamacpp_tokens_per_second": lt, "ours_tokens_per_second": ot,
             "ratio_median": med, "ratio_min": lo, "ratio_max": hi}
        roof = ["", ""]
        if all("roofline_fraction" in g["ours"] for g in per):
            s["ours_roofline_fraction"] = statistics.median(g["ours"]["roofline_fraction"]
                                                            for g in per)
            roof[1] = f"{s['ours_roofline_fraction']:.2f}"
        if all("roofline_fraction" in g["llama.cpp"] for g in per):
            s["llamacpp_roofline_fraction"] = statistics.median(
                g["llama.cpp"]["roofline_fraction"] for g in per)
            roof[0] = f"{s['llamacpp_roofline_fraction']:.2f}"
        summary[key] = s
        rows.append((label, f"{lt:.1f}", f"{ot:.1f}", f"{med:.2f} ({lo:.2f}-{hi:.2f})", *roof))

    triads = [g["ours"]["triad_gbps"] for rd in rounds for g in rd["figures"].values()
              if "triad_gbps" in g["ours"]]
    isa = llamacpp_isa()
    log("")
    log(f"cpu: {cpu}, {os.cpu_count()} cores; {a.threads} threads each; {a.rounds} rounds, "
        f"llama.cpp and ours alternating which goes first")
    log(f"llama.cpp: llama-cpp-python {a.llamacpp_version} (llama.cpp "
        f"{rounds[0]['figures']['prefill_bf16']['llama.cpp'].get('build_commit')}), "
        f"-march=native: {isa}")
    isas = sorted({g["ours"]["kernel_isa"] for rd in rounds for g in rd["figures"].values()
                   if "kernel_isa" in g["ours"]})
    log(f"ours: kernels/cpu at ISA level {', '.join(isas)} (kernels/cpu/Isa.h), KV f32; "
        "llama.cpp: KV f16")
    log(f"STREAM triad (moe-roofline, per figure): median {statistics.median(triads):.1f} GB/s, "
        f"{min(triads):.1f}-{max(triads):.1f}")
    d1 = rounds[0]["figures"]["decode1_bf16"]
    d8 = rounds[0]["figures"]["decode1_int8"]
    loads = [g[who]["loadavg_before"] for rd in rounds for g in rd["figures"].values()
             for who in ("ours", "llama.cpp")]
    log(f"load average before each measurement: median {statistics.median(loads):.1f}, "
        f"max {max(loads):.1f} ({os.cpu_count()} cores; above that other processes take "
        "turns on the cores, which costs llama.cpp's spinning threads the most)")
    log(f"bytes per decode token (batch 1): bf16 ours {d1['ours']['bytes_per_token'] / 1e6:.1f} MB, "
        f"llama.cpp {d1['llama.cpp']['bytes_per_token'] / 1e6:.1f} MB; int8 ours "
        f"{d8['ours']['bytes_per_token'] / 1e6:.1f} MB, q8_0 llama.cpp "
        f"{d8['llama.cpp']['bytes_per_token'] / 1e6:.1f} MB")
    log("")
    head = ("figure (tok/s, median of rounds)", "llama.cpp", "ours",
            "ours/llama.cpp med (min-max)", "roof llama", "roof ours")
    widths = [max(len(str(x[i])) for x in rows + [head]) for i in range(len(head))]
    fmt = lambda cols: "  ".join(str(c).ljust(w) if i == 0 else str(c).rjust(w)
                                 for i, (c, w) in enumerate(zip(cols, widths)))
    log(fmt(head))
    log(fmt(["-" * w for w in widths]))
    for row in rows:
        log(fmt(row))
    log("")
    log("roof: fraction of the bandwidth roofline (tok/s x bytes per token / triad); 'ours: "
        "distinct seqs': of the batch's bound (moe-roofline: bandwidth or compute). Batched "
        "llama.cpp (llama-batched-bench) decodes B identical sequences (token 0), whose rows "
        "route to the same experts; 'identical seqs' measures ours the same way, 'ours: "
        "distinct seqs' decodes B different random prompts (llama.cpp column: the same "
        "identical-sequence run).")
    log("stages (s): " + ", ".join(f"{k} {v:.0f}" for k, v in stages.items()))
    document = {"cpu": cpu, "cores": os.cpu_count(), "threads": a.threads, "rounds": a.rounds,
                "llamacpp": {"llama_cpp_python": a.llamacpp_version,
                             "build_commit": rounds[0]["figures"]["prefill_bf16"]["llama.cpp"]
                             .get("build_commit"),
                             "cmake_flags": CMAKE_FLAGS, "march_native": isa},
                "models": {"checkpoint": a.checkpoint, "gguf": ggufs, "plans": plans,
                           "gguf_bytes": inventory},
                "config": config, "prefill_tokens": PREFILL, "prompt_tokens": PROMPT,
                "decode_steps": STEPS, "batches": batches, "summary": summary,
                "per_round": rounds, "stages_seconds": stages}
    with open(json_path, "w") as f:
        json.dump(document, f, indent=1)
    log(f"json: {json_path}")


if __name__ == "__main__":
    main()
