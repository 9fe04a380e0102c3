#!/usr/bin/env python3
"""Real-size MoE shapes on this CPU: ours against llama.cpp, side by side.

  bench-real-size.py BUILD_BIN [--models qwen3-30b-a3b,deepseek-v2-lite]
                     [--pairs w4a8:q4_0,w8a8:q8_0] [--layers 12] [--rounds 3]
                     [--threads 2] [--prefill 512,2048] [--contexts 512,2048,4096]
                     [--batches 16,64] [--steps 16] [--work DIR] [--json FILE]

Our benchmark model (64 experts, hidden 1024, vocabulary 4,096, 1.7 GB) nearly
fits in the last-level cache of some machines and hid what real shapes cost:
a 151,936-token vocabulary, weights far larger than any cache, MLA. This
benchmark writes models of the shapes people run, with random weights:

  qwen3-30b-a3b      Qwen3-30B-A3B: hidden 2048, 128 experts top 8 (768 wide),
                     32 query / 4 KV heads, vocabulary 151,936
  deepseek-v2-lite   DeepSeek-V2-Lite: MLA (rank 512), 64 experts top 6 + 2
                     shared (1408 wide), first layer dense, vocabulary 102,400

truncated to --layers layers (48 and 27 in full), as
  ours:      moe-compile --shape-only --precision P, then moe-plan synth
             (random weights of every tensor's type and shape);
  llama.cpp: tools/make-gguf.py --type T (random quants in valid blocks: a
             converted checkpoint would need the bf16 one, 61 GB for Qwen).
Both are remade when their inputs change (a stamp beside each). llama.cpp is
llama-cpp-python's vendored copy, built natively once (tools/llamacpp.py).

Before writing anything the disk and memory are checked: llama.cpp repacks
Q4_0 in memory (about twice the file), so a run needs that much RAM; the
benchmark refuses, naming the largest --layers that fits.

Figures, per model and pair (ours P against llama.cpp T), all with --threads:
  prefill N          llama-bench -p N -n 0 | moe-roofline --only prefill
  decode 1 @ C       batch 1 after C tokens of context: llama-bench -p 0 -n S -d C |
                     moe-roofline --only decode1 --prompt-len C --decode-steps S
  batch B            llama-batched-bench -npp 16 -ntg S -npl B (B identical
                     sequences) | moe-bench, B identical requests; and ours with B
                     distinct sequences (moe-roofline --only decode-batch)
  first token        a fresh process's first 512-token prefill, page cache warm:
                     llama-bench -p 512 -n 0 -r 1 --no-warmup (process wall time) |
                     moe-run --max-new-tokens 1 (process wall time); again after
                     dropping the page cache where this user may (root)
Each round measures every figure by both engines, one after the other, the
order alternating between rounds. The ratio is ours / llama.cpp (speed over
speed; time to first token: llama.cpp's time over ours); every round is
printed, then the median.

Roofline (decode at batch 1): bytes a token reads, ours counted from the plan
by moe-roofline, llama.cpp's from its GGUF by the same rule (dense tensors
whole, top_k / experts of the expert stacks, the KV rows of the context),
over the STREAM triad that moe-roofline measures in each of its runs: every
triad of a round is listed as a range. A fraction above 1.0 means the
bandwidth was measured low (another tenant): it is reported as such, not as
a fraction. Peak RSS of every process comes from wait4. Before the rounds,
moe-bench --verify at concurrency 16 checks each plan's batch invariance.

Writes every raw number to JSON (default WORK/bench-real-size.json).
"""
import argparse
import copy
import hashlib
import json
import os
import random
import re
import shutil
import statistics
import sys
import time

from bench_common import cpu_model
from llamacpp import (LLAMA_DIR, LLAMACPP_VERSION, Runner, fail, gguf_bytes, install_llamacpp,
                      llamacpp_isa, loadavg, log, median_min_max, run)

HERE = os.path.dirname(os.path.abspath(__file__))
FIRST_TOKEN_PROMPT = 512
BATCH_PROMPT = 16

MODELS = {
    # Qwen/Qwen3-30B-A3B config.json
    "qwen3-30b-a3b": {
        "architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe",
        "attention_bias": False, "attention_dropout": 0.0, "bos_token_id": 151643,
        "eos_token_id": 151645, "decoder_sparse_step": 1, "head_dim": 128,
        "hidden_act": "silu", "hidden_size": 2048, "intermediate_size": 6144,
        "max_position_embeddings": 40960, "max_window_layers": 48, "mlp_only_layers": [],
        "moe_intermediate_size": 768, "norm_topk_prob": True, "num_attention_heads": 32,
        "num_experts": 128, "num_experts_per_tok": 8, "num_hidden_layers": 48,
        "num_key_value_heads": 4, "rms_norm_eps": 1e-06, "rope_scaling": None,
        "rope_theta": 1000000.0, "sliding_window": None, "tie_word_embeddings": False,
        "torch_dtype": "bfloat16", "use_sliding_window": False, "vocab_size": 151936,
    },
    # deepseek-ai/DeepSeek-V2-Lite config.json
    "deepseek-v2-lite": {
        "architectures": ["DeepseekV2ForCausalLM"], "model_type": "deepseek_v2",
        "attention_bias": False, "bos_token_id": 100000, "eos_token_id": 100001,
        "first_k_dense_replace": 1, "hidden_act": "silu", "hidden_size": 2048,
        "intermediate_size": 10944, "kv_lora_rank": 512, "max_position_embeddings": 163840,
        "moe_intermediate_size": 1408, "moe_layer_freq": 1, "n_group": 1,
        "n_routed_experts": 64, "n_shared_experts": 2, "norm_topk_prob": False,
        "num_attention_heads": 16, "num_experts_per_tok": 6, "num_hidden_layers": 27,
        "num_key_value_heads": 16, "q_lora_rank": None, "qk_nope_head_dim": 128,
        "qk_rope_head_dim": 64, "rms_norm_eps": 1e-06,
        "rope_scaling": {"beta_fast": 32, "beta_slow": 1, "factor": 40, "mscale": 0.707,
                         "mscale_all_dim": 0.707, "original_max_position_embeddings": 4096,
                         "type": "yarn"},
        "rope_theta": 10000, "routed_scaling_factor": 1.0, "scoring_func": "softmax",
        "tie_word_embeddings": False, "topk_group": 1, "topk_method": "greedy",
        "torch_dtype": "bfloat16", "v_head_dim": 128, "vocab_size": 102400,
    },
}
# Bytes per weight element, scales included (ours: rows of a few thousand).
GGUF_ELEMENT_BYTES = {"q4_0": 18 / 32, "q8_0": 34 / 32}
OUR_ELEMENT_BYTES = {"int4": 0.5 + 4 / 128, "w4a8": 0.5 + 4 / 128, "int8": 1.0, "w8a8": 1.0}


def int_list(text, flag):
    try:
        values = [int(v) for v in text.split(",") if v]
    except ValueError:
        fail(f"{flag}: '{text}' is not a comma-separated list of integers")
    if not values or min(values) < 1:
        fail(f"{flag}: '{text}' needs positive integers")
    return values


def experts_of(config):
    return config.get("num_experts") or config["n_routed_experts"]


def llama_kv_per_position(config):
    """Bytes llama.cpp's f16 cache holds per context position: per layer a key
    and a value per KV head, or with MLA the latent and the rope key (one head)."""
    layers = config["num_hidden_layers"]
    if config["model_type"] == "deepseek_v2":
        return layers * (config["kv_lora_rank"] + config["qk_rope_head_dim"]) * 2
    return layers * 2 * config["num_key_value_heads"] * config["head_dim"] * 2


def stamp_matches(path, want):
    try:
        return json.load(open(path + ".stamp.json")) == want
    except (OSError, ValueError):
        return False


def write_stamp(path, want):
    json.dump(want, open(path + ".stamp.json", "w"), indent=1)


def directory_bytes(path):
    return sum(os.path.getsize(os.path.join(path, f)) for f in os.listdir(path))


class Model:
    """One model shape at --layers layers: its config, our plans, its GGUFs."""

    def __init__(self, name, layers, work):
        self.name = name
        self.config = copy.deepcopy(MODELS[name])
        if layers > self.config["num_hidden_layers"]:
            fail(f"--layers {layers}: {name} has only {self.config['num_hidden_layers']}")
        self.config["num_hidden_layers"] = layers
        self.dir = os.path.join(work, f"{name}-{layers}l")
        self.config_dir = os.path.join(self.dir, "config")

    def write_config(self):
        os.makedirs(self.config_dir, exist_ok=True)
        path = os.path.join(self.config_dir, "config.json")
        text = json.dumps(self.config, indent=1)
        if not os.path.exists(path) or open(path).read() != text:
            open(path, "w").write(text)

    def shape(self, precision):
        return os.path.join(self.dir, f"shape-{precision}")

    def plan(self, precision):
        return os.path.join(self.dir, f"plan-{precision}")

    def gguf(self, gguf_type):
        return os.path.join(self.dir, f"model-{gguf_type}.gguf")


def compile_shape(bin_dir, model, precision, max_context):
    """The shape-only plan (no weights: fast): what synth will write, and its size."""
    out = model.shape(precision)
    shutil.rmtree(out, ignore_errors=True)
    run([os.path.join(bin_dir, "moe-compile"), model.config_dir, "--shape-only", "--precision",
         precision, "--max-batch-tokens", "2048", "--max-context", str(max_context), "-o", out],
        "moe-compile --shape-only")
    show = run([os.path.join(bin_dir, "moe-plan"), "show", out], "moe-plan show").stdout
    weights = re.search(r"^weights\s+([\d.]+) (KiB|MiB|GiB)", show, re.M)
    kv = re.search(r"(\d+) bytes per token", show)
    if not weights or not kv:
        fail(f"moe-plan show {out}: no weights or KV line")
    scale = {"KiB": 2**10, "MiB": 2**20, "GiB": 2**30}[weights.group(2)]
    return {"weight_bytes": float(weights.group(1)) * scale, "kv_bytes_per_token": int(kv.group(1)),
            "show": show}


def make_plan(bin_dir, model, precision, max_context, compiler):
    """Synthesises the plan unless one from the same config, precision, context
    and compiler (its --version line) is there."""
    want = {"config": model.config, "precision": precision, "max_context": max_context,
            "compiler": compiler}
    out = model.plan(precision)
    if os.path.isdir(out) and stamp_matches(out, want):
        log(f"ours: {os.path.basename(out)} of {model.name} already written")
        return
    shutil.rmtree(out, ignore_errors=True)
    log(f"ours: moe-plan synth {model.name} {precision} -> {out} ...")
    t0 = time.monotonic()
    run([os.path.join(bin_dir, "moe-plan"), "synth", model.shape(precision), "-o", out],
        "moe-plan synth")
    write_stamp(out, want)
    log(f"ours: {directory_bytes(out) / 2**30:.2f} GiB in {time.monotonic() - t0:.0f} s")


def make_gguf(model, gguf_type, seed):
    script = os.path.join(HERE, "make-gguf.py")
    want = {"config": model.config, "type": gguf_type, "seed": seed,
            "writer": hashlib.sha256(open(script, "rb").read()).hexdigest()}
    out = model.gguf(gguf_type)
    if os.path.exists(out) and stamp_matches(out, want):
        log(f"llama.cpp: {os.path.basename(out)} of {model.name} already written")
        return
    log(f"llama.cpp: make-gguf.py {model.name} {gguf_type} -> {out} ...")
    t0 = time.monotonic()
    tmp = out + ".tmp"
    run([sys.executable, script, os.path.join(model.config_dir, "config.json"), tmp, "--type",
         gguf_type, "--seed", str(seed)], "make-gguf.py")
    os.replace(tmp, out)
    write_stamp(out, want)
    log(f"llama.cpp: {os.path.getsize(out) / 2**30:.2f} GiB in {time.monotonic() - t0:.0f} s")


def mem_available():
    for line in open("/proc/meminfo"):
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) * 1024
    return 0


def check_resources(models, pairs, shapes, work, max_context):
    """Refuses, naming the largest --layers that fits, when the disk or the
    memory is short. Plans and GGUFs already written need no disk."""
    need_disk = 0
    need_ram = 0
    per_layer = {}
    for m in models:
        for precision, gguf_type in pairs:
            s = shapes[(m.name, precision)]
            ours = s["weight_bytes"]
            theirs = ours / OUR_ELEMENT_BYTES[precision] * GGUF_ELEMENT_BYTES[gguf_type]
            if not os.path.isdir(m.plan(precision)):
                need_disk += ours
            if not os.path.exists(m.gguf(gguf_type)):
                need_disk += theirs
            kv = s["kv_bytes_per_token"] * max_context
            # llama.cpp repacks Q4_0/Q8_0 for its CPU kernels: about twice the file.
            run_ram = max(ours, 2 * theirs) + kv + 2**30
            need_ram = max(need_ram, run_ram)
            per_layer[(m.name, precision)] = run_ram / m.config["num_hidden_layers"]
    free_disk = shutil.disk_usage(work).free
    have_ram = mem_available()
    worst = max(per_layer.values())
    fits = int(have_ram // worst)
    if need_disk > free_disk * 0.9:
        fail(f"{need_disk / 2**30:.1f} GiB of plans and GGUFs to write, {free_disk / 2**30:.1f} "
             f"GiB free in {work}: free some, or run with fewer --layers")
    if need_ram > have_ram:
        fail(f"a run needs about {need_ram / 2**30:.1f} GiB of memory, {have_ram / 2**30:.1f} "
             f"GiB is available: run with --layers {max(1, fits)} or fewer")
    return {"disk_to_write": need_disk, "disk_free": free_disk, "ram_needed": need_ram,
            "ram_available": have_ram}


def figures_of(r, m, precision, gguf_type, a):
    """(key, label, llama.cpp measurement, our measurement, kind) of one pair."""
    plan, gguf = m.plan(precision), m.gguf(gguf_type)
    f = []
    for n in a.prefill:
        f.append((f"prefill{n}", f"prefill {n}", lambda n=n: r.llama_prefill(gguf, n),
                  lambda n=n: r.ours_prefill(plan, n), "speed"))
    for c in a.contexts:
        f.append((f"decode1_ctx{c}", f"decode 1 @ {c}",
                  lambda c=c: r.llama_decode1(gguf, c, a.steps),
                  lambda c=c: r.ours_decode1(plan, c, a.steps), "decode1"))
    for b in a.batches:
        f.append((f"batch{b}", f"batch {b}, identical seqs",
                  lambda b=b: r.llama_batched(gguf, b, BATCH_PROMPT, a.steps),
                  lambda b=b: r.ours_batched_identical(plan, b, BATCH_PROMPT, a.steps), "speed"))
        f.append((f"batch{b}_distinct", f"batch {b}, ours distinct seqs", None,
                  lambda b=b: r.ours_batched(plan, b, BATCH_PROMPT, a.steps), "distinct"))
    f.append(("first_token", f"first token ({FIRST_TOKEN_PROMPT}, fresh process)",
              lambda: r.llama_first_prefill(gguf, FIRST_TOKEN_PROMPT),
              lambda: r.ours_first_prefill(plan, m.config["vocab_size"], FIRST_TOKEN_PROMPT),
              "first"))
    if can_drop_caches():
        f.append(("first_token_cold", f"first token ({FIRST_TOKEN_PROMPT}), cold page cache",
                  lambda: cold(lambda: r.llama_first_prefill(gguf, FIRST_TOKEN_PROMPT)),
                  lambda: cold(lambda: r.ours_first_prefill(plan, m.config["vocab_size"],
                                                            FIRST_TOKEN_PROMPT)),
                  "first"))
    return f


DROP_CACHES = "/proc/sys/vm/drop_caches"


def can_drop_caches():
    return os.access(DROP_CACHES, os.W_OK)


def cold(measure):
    """measure() after the page cache is dropped: the weights come from the disk."""
    os.sync()
    with open(DROP_CACHES, "w") as f:
        f.write("3\n")
    return measure()


def verify_batch_invariance(a, m, precision):
    """moe-bench --verify at concurrency 16: every request's tokens alone equal
    its tokens in the batch (fails the benchmark otherwise)."""
    log(f"ours: moe-bench --verify --concurrency 16 on {m.name} {precision} ...")
    out = run([os.path.join(a.bin, "moe-bench"), m.plan(precision), "--concurrency", "16",
               "--requests", "16", "--prompt-len", "16:64", "--output-len", "8:16",
               "--ignore-eos", "--verify", "--threads", str(a.threads), "--json", "-"],
              "moe-bench --verify").stdout
    level = json.loads(out)["levels"][0]
    log(f"ours: {level['completed']} requests, each equal to its run alone")
    return level


def routing_spread(a, m, precision, work):
    """How our plan's routers spread a 512-token prompt of random ids: per
    MoE layer, the experts that got a token and the busiest expert's share
    of the picks. Random weights that made every token alike sent them all
    to the same few experts (moe-plan synth before 2026-12-05), a workload
    unlike a trained model's and unlike llama.cpp's GGUF here (make-gguf.py
    keeps each token's RMS): the benchmark refuses to compare such runs."""
    profile = os.path.join(work, f"routing-{m.name}-{precision}.json")
    if os.path.exists(profile):
        os.remove(profile)  # moe-run adds to a profile that exists
    rng = random.Random(5)
    ids = ",".join(str(rng.randrange(m.config["vocab_size"])) for _ in range(FIRST_TOKEN_PROMPT))
    run([os.path.join(a.bin, "moe-run"), m.plan(precision), "--prompt-tokens", ids,
         "--max-new-tokens", "1", "--ignore-eos", "--threads", str(a.threads),
         "--routing-profile", profile], "moe-run --routing-profile")
    layers = json.load(open(profile))["layers"]
    used = min(sum(1 for c in layer["counts"] if c > 0) for layer in layers)
    busiest = max(max(layer["counts"]) / sum(layer["counts"]) for layer in layers)
    experts = len(layers[0]["counts"])
    log(f"ours: routing of a {FIRST_TOKEN_PROMPT}-token prompt on {m.name} {precision}: at "
        f"least {used} of {experts} experts a layer, the busiest taking {busiest:.1%} of a "
        f"layer's picks ({1 / experts:.1%} if uniform)")
    if used < experts // 2:
        fail(f"routing collapsed on {m.name} {precision}: only {used} of {experts} experts in some "
            f"layer, so its prefill and batched runs are not like llama.cpp's; re-synthesise "
            f"the plan (moe-plan synth keeps tokens apart since 2026-12-05)")
    return {"min_experts_used": used, "experts": experts, "busiest_share": busiest}


def ratio_of(kind, got):
    if kind == "first":  # time over time: how many times faster ours starts
        return got["llama.cpp"]["process_seconds"] / got["ours"]["process_seconds"]
    return got["ours"]["tokens_per_second"] / got["llama.cpp"]["tokens_per_second"]


def fraction(value):
    """A roofline fraction, or why it is not one."""
    return f"{value:.2f}" if value <= 1.0 else f"n/a ({value:.2f}: bandwidth measured low)"


def table(results, cpu, threads, layers):
    """The figures as text: every round's ratio, then the median."""
    lines = [f"bench-real-size: {cpu}, {threads} threads, {layers} layers, "
             f"llama.cpp {LLAMACPP_VERSION} (-march=native: {llamacpp_isa()})"]
    for key, res in results.items():
        lines.append(f"\n{key} (ours {res['plan_bytes'] / 2**30:.2f} GiB, GGUF "
                     f"{res['gguf_bytes'] / 2**30:.2f} GiB)")
        lines.append(f"{'figure':34} {'rounds: ours / llama.cpp':32} {'median':>7}")
        for fkey, label, kind in res["figures"]:
            per = [rd["figures"][fkey] for rd in res["rounds"]]
            ratios = [g["ratio"] for g in per]
            med, _, _ = median_min_max(ratios)
            extra = ""
            if kind == "decode1":
                ours_f = statistics.median(g["ours"]["roofline_fraction"] for g in per)
                theirs_f = statistics.median(g["llama.cpp"]["roofline_fraction"] for g in per)
                extra = f"  roofline ours {fraction(ours_f)}, llama.cpp {fraction(theirs_f)}"
            lines.append(f"{label:34} {' '.join(f'{x:.2f}' for x in ratios):32} {med:7.2f}"
                         f"{extra}")
        # Peak RSS of the fresh processes that ran a prompt (moe-roofline's
        # also holds its STREAM arrays): against the weights and the KV cache.
        per = [rd["figures"]["first_token"] for rd in res["rounds"]]
        ours_rss = max(g["ours"]["peak_rss_mib"] for g in per) * 2**20
        theirs_rss = max(g["llama.cpp"]["peak_rss_mib"] for g in per) * 2**20
        kv = res["plan"]["kv_bytes_per_token"] * (FIRST_TOKEN_PROMPT + 1)
        lines.append(f"peak RSS, first token: ours {ours_rss / 2**20:.0f} MiB = "
                     f"{ours_rss / (res['plan_bytes'] + kv):.2f} x (plan files + KV of the "
                     f"prompt); llama.cpp {theirs_rss / 2**20:.0f} MiB = "
                     f"{theirs_rss / res['gguf_bytes']:.2f} x its GGUF")
        lines.append("page faults, first token (minor/major): ours " +
                     ", ".join(f"{g['ours']['page_faults']['minor']}/"
                               f"{g['ours']['page_faults']['major']}" for g in per) +
                     "; llama.cpp " +
                     ", ".join(f"{g['llama.cpp']['page_faults']['minor']}/"
                               f"{g['llama.cpp']['page_faults']['major']}" for g in per))
        triads = [t for rd in res["rounds"] for t in rd["triad_gbps"]]
        lines.append(f"triad: {min(triads):.1f}-{max(triads):.1f} GB/s over {len(triads)} runs")
    return lines


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("bin", help="our build's bin directory (build/bin)")
    ap.add_argument("--models", default="qwen3-30b-a3b,deepseek-v2-lite",
                    help=f"comma-separated, of {', '.join(MODELS)}")
    # Our int8-activation kernels by default: Q4_0 and Q8_0 multiply int8
    # activations too, and w4a8/w8a8 store the same weights as int4/int8.
    ap.add_argument("--pairs", default="w4a8:q4_0,w8a8:q8_0",
                    help="ours:llama.cpp precision pairs (ours: int4, w4a8, int8, w8a8; "
                    "llama.cpp: q4_0, q8_0)")
    ap.add_argument("--layers", type=int, default=12, help="layers of each model (default 12)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--prefill", default="512,2048", help="prefill lengths")
    ap.add_argument("--contexts", default="512,2048,4096", help="decode-1 context lengths")
    ap.add_argument("--batches", default="16,64", help="batched decode sizes")
    ap.add_argument("--steps", type=int, default=16, help="decode steps timed")
    ap.add_argument("--seed", type=int, default=0, help="seed of the GGUFs' random weights")
    ap.add_argument("--work", default=os.path.join(LLAMA_DIR, "real-size"),
                    help="models, plans, logs (default build-llamacpp/real-size)")
    ap.add_argument("--json", help="raw numbers (default WORK/bench-real-size.json)")
    a = ap.parse_args()
    if a.rounds < 1 or a.threads < 1 or a.steps < 1 or a.layers < 1:
        fail("--rounds, --threads, --steps and --layers must be at least 1")
    a.prefill = int_list(a.prefill, "--prefill")
    a.contexts = int_list(a.contexts, "--contexts")
    a.batches = int_list(a.batches, "--batches")
    if max(a.prefill) > 2048:
        fail("--prefill: at most 2048 (the plans' --max-batch-tokens)")
    names = [n for n in a.models.split(",") if n]
    for n in names:
        if n not in MODELS:
            fail(f"--models: unknown model '{n}' (known: {', '.join(MODELS)})")
    pairs = []
    for p in a.pairs.split(","):
        ours, _, theirs = p.partition(":")
        if ours not in OUR_ELEMENT_BYTES or theirs not in GGUF_ELEMENT_BYTES:
            fail(f"--pairs: '{p}' is not ours:theirs with ours one of "
                 f"{', '.join(OUR_ELEMENT_BYTES)} and theirs q4_0 or q8_0")
        pairs.append((ours, theirs))
    for tool in ("moe-compile", "moe-plan", "moe-roofline", "moe-bench", "moe-run"):
        if not os.access(os.path.join(a.bin, tool), os.X_OK):
            fail(f"{a.bin}/{tool} not found (make build)")
    work = os.path.abspath(a.work)
    os.makedirs(work, exist_ok=True)
    json_path = a.json or os.path.join(work, "bench-real-size.json")
    max_context = max(max(a.contexts), FIRST_TOKEN_PROMPT) + a.steps + 64

    cpu = cpu_model()
    log(f"bench-real-size: {cpu}, {os.cpu_count()} cores, {a.threads} threads, {a.rounds} "
        f"rounds, {a.layers} layers; work {work}")
    models = [Model(n, a.layers, work) for n in names]
    shapes = {}
    for m in models:
        m.write_config()
        for precision, _ in pairs:
            shapes[(m.name, precision)] = compile_shape(a.bin, m, precision, max_context)
    resources = check_resources(models, pairs, shapes, work, max_context)
    build = install_llamacpp(LLAMACPP_VERSION)
    compiler = run([os.path.join(a.bin, "moe-compile"), "--version"], "moe-compile").stdout.strip()
    for m in models:
        for precision, gguf_type in pairs:
            make_plan(a.bin, m, precision, max_context, compiler)
            make_gguf(m, gguf_type, a.seed)

    r = Runner(a, os.path.join(build, "bin"), a.bin, work)
    verified, routing = {}, {}
    for m in models:
        for precision, _ in pairs:
            verified[f"{m.name} {precision}"] = verify_batch_invariance(a, m, precision)
            routing[f"{m.name} {precision}"] = routing_spread(a, m, precision, work)
    results = {}
    for m in models:
        for precision, gguf_type in pairs:
            key = f"{m.name} {precision} vs {gguf_type}"
            figures = figures_of(r, m, precision, gguf_type, a)
            inventory = gguf_bytes(m.gguf(gguf_type), {**m.config, "num_key_value_heads": 0})
            inventory["kv_per_position"] = llama_kv_per_position(m.config)
            rounds = []
            for n in range(a.rounds):
                order = ("llama.cpp", "ours") if n % 2 == 0 else ("ours", "llama.cpp")
                log(f"{key}: round {n + 1} of {a.rounds} ({order[0]} first) ...")
                got_round, triads = {}, []
                for fkey, label, llama_fn, ours_fn, kind in figures:
                    got = {}
                    for who in order:
                        fn = llama_fn if who == "llama.cpp" else ours_fn
                        if fn is None:  # distinct sequences: paired with the identical run
                            continue
                        load = loadavg()
                        got[who] = fn()
                        got[who]["loadavg_before"] = load
                        if "triad_gbps" in got[who]:
                            triads.append(got[who]["triad_gbps"])
                    if kind == "distinct":
                        got["llama.cpp"] = got_round[fkey.replace("_distinct", "")]["llama.cpp"]
                    got["ratio"] = ratio_of(kind, got)
                    if kind == "decode1":
                        context = int(fkey.split("ctx")[1]) + a.steps / 2
                        theirs = (inventory["dense"] + inventory["embedding_row"] +
                                  inventory["experts"] *
                                  m.config["num_experts_per_tok"] / experts_of(m.config) +
                                  inventory["kv_per_position"] * context)
                        triad = got["ours"]["triad_gbps"] * 1e9
                        got["llama.cpp"]["bytes_per_token"] = theirs
                        got["llama.cpp"]["roofline_fraction"] = \
                            got["llama.cpp"]["tokens_per_second"] * theirs / triad
                    got_round[fkey] = got
                    tail = ""
                    if kind == "decode1":
                        tail = (f"; roofline ours {fraction(got['ours']['roofline_fraction'])}, "
                                f"llama.cpp {fraction(got['llama.cpp']['roofline_fraction'])}")
                    if kind == "first":
                        log(f"  {label}: llama.cpp {got['llama.cpp']['process_seconds']:.2f} s, "
                            f"ours {got['ours']['process_seconds']:.2f} s, llama.cpp / ours "
                            f"{got['ratio']:.2f}")
                    else:
                        log(f"  {label}: llama.cpp {got['llama.cpp']['tokens_per_second']:.1f} "
                            f"tok/s, ours {got['ours']['tokens_per_second']:.1f} tok/s, ours / "
                            f"llama.cpp {got['ratio']:.2f}{tail}")
                log(f"  triad this round: {min(triads):.1f}-{max(triads):.1f} GB/s "
                    f"({len(triads)} measurements)")
                rounds.append({"order": list(order), "figures": got_round,
                               "triad_gbps": triads})
            results[key] = {"rounds": rounds, "gguf_inventory": inventory,
                            "figures": [(f[0], f[1], f[4]) for f in figures],
                            "plan": {k: v for k, v in shapes[(m.name, precision)].items()
                                     if k != "show"},
                            "plan_bytes": directory_bytes(m.plan(precision)),
                            "gguf_bytes": os.path.getsize(m.gguf(gguf_type))}

    lines = table(results, cpu, a.threads, a.layers)
    print("\n".join(lines))
    json.dump({"cpu": cpu, "threads": a.threads, "layers": a.layers, "rounds": a.rounds,
               "llamacpp_version": LLAMACPP_VERSION, "llamacpp_isa": llamacpp_isa(),
               "resources": resources, "batch_invariance": verified, "routing": routing,
               "results": results,
               "table": lines},
              open(json_path, "w"), indent=1)
    log(f"raw numbers: {json_path}")


if __name__ == "__main__":
    main()
