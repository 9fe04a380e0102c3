#!/usr/bin/env python3
"""The production layout, EP 8 / TP 4, on two nodes (issue 49; standard
library only; the tools on PATH).

  production-layout.py "TWO_NODES" GOLDENS WORK

TWO_NODES launches a job over two nodes of 4 ranks (an Open MPI hostfile
and its options). For the DeepSeek-V3 and Qwen3-MoE goldens: the plan of
`moe-compile --ep 8 --tp 4 --ranks-per-node 4` runs on 8 ranks, ranks 0-3
on one node and 4-7 on the other (each tensor-parallel group inside a
node), and gives the single-rank plan's greedy tokens with every logit
within 1e-5. Each rank's weight bytes equal their closed form, worked out
here from the single-rank plan's tensors by name: attention and dense
MLP weights / 4 (key-value projections / min(4, key-value heads): ranks
share a head), the rank's block of each layer's stacked experts (floor(S
(r + 1) / 8) - floor(S r / 8) of S), everything else whole. The bytes each
rank hands the collectives equal theirs: per token, 4 bytes x hidden x (one
row per attention layer and per dense MLP layer, top-k + shared rows per
MoE layer). DeepSeek-V3's plan is also served (mpirun moe-serve on the
two nodes): serve-ranks.test's 16 concurrent requests get the single-rank
server's text. Prints one line per model; exits 1 on the first failure.
"""
import importlib.util
import json
import os
import re
import shlex
import shutil
import sys

from plan_checks import fail, greedy, run, same_greedy_run

PROMPT = "1,7,3,9,11,2"
STEPS = 4
TOLERANCE = 1e-5
RANKS, TP, PER_NODE = 8, 4, 4


def weight_closed_form(plan, config, rank):
    """Rank `rank`'s weight bytes in EP 8 / TP 4, from the one-rank plan."""
    kv_heads = config.get("num_key_value_heads") or config["num_attention_heads"]
    total = 0
    for t in plan["tensors"]:
        if t["storage"] != "Weight" or t["name"].endswith(".scales"):
            continue
        name, size = t["name"], t["size"]
        if ".experts." in name:
            stacked = t["shape"][0]
            held = stacked * (rank + 1) // RANKS - stacked * rank // RANKS
            total += size * held // stacked
        elif re.search(r"\.(k_proj|v_proj)\.", name):
            total += size // min(TP, kv_heads)
        elif re.search(r"\.o_proj\.bias$", name):
            total += size if rank % TP == 0 else 0
        elif re.search(r"\.(q_proj|q_b_proj|kv_b_proj|o_proj)\.|\.mlp\.(gate|up|down)_proj\.",
                       name):
            total += size // TP
        else:  # embeddings, LM head, norms, routers, MLA's latent projections
            total += size
    return total


def collective_closed_form(plan, config, tokens):
    """The bytes each rank hands the collectives for `tokens` tokens."""
    programs = plan["programs"][0]["instructions"]
    moe_layers = sum(1 for i in programs if i["op"] == "Router")
    layers = config["num_hidden_layers"]
    picks = config["num_experts_per_tok"] + config.get("n_shared_experts", 0)
    rows = layers + (layers - moe_layers) + moe_layers * picks
    return tokens * 4 * config["hidden_size"] * rows


def serve_ranks():
    """test/e2e/serve-ranks.py's requests and server helpers."""
    spec = importlib.util.spec_from_file_location(
        "serve_ranks", os.path.join(os.path.dirname(os.path.abspath(__file__)), "serve-ranks.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def served(two_nodes, goldens, work, name):
    """`name`'s golden, with a byte-level tokenizer, served by one rank and
    by mpirun moe-serve of its EP 8 / TP 4 plan on the two nodes: the 16
    concurrent requests of serve-ranks.test get the same text."""
    sr = serve_ranks()
    bin_dir = os.path.dirname(shutil.which("moe-serve"))
    ckpt = os.path.join(work, name + "-text")
    sr.golden_text_checkpoint(os.path.join(goldens, name), ckpt)
    answers = []
    for label, flags, launcher in (
            ("one", [], []),
            ("ep8tp4", ["--ep", str(RANKS), "--tp", str(TP), "--ranks-per-node", str(PER_NODE)],
             two_nodes + ["--mca", "odls_base_sigkill_timeout", "5", "-np", str(RANKS)])):
        plan = os.path.join(work, f"{name}-served-{label}")
        run("moe-compile", ckpt, "-o", plan, "--max-context", "128", *flags)
        server = sr.Server(bin_dir, plan, plan + ".serve", *sr.FLAGS, name=name,
                           launcher=launcher)
        answers.append(sr.answers(server, name))
        sr.stop(server, bool(launcher))
    want, got = answers
    diff = [i for i in range(len(want)) if got[i] != want[i]]
    if diff:
        fail(f"{name} served on two nodes: {len(diff)} of {len(want)} answers differ from one "
             f"rank's; request {diff[0]}: {got[diff[0]]!r} != {want[diff[0]]!r}")
    return len(want)


def main():
    two_nodes = shlex.split(sys.argv[1])
    goldens, work = sys.argv[2:4]
    # Where the ranks run: 0-3 on one node, 4-7 on the other.
    placed = run(*two_nodes, "-np", str(RANKS), "sh", "-c",
                 'echo "$OMPI_COMM_WORLD_RANK $(hostname)"')
    node = dict(line.split() for line in placed.split("\n") if line.strip())
    nodes = [node[str(r)] for r in range(RANKS)]
    if len(set(nodes)) != 2 or any(nodes[r] != nodes[r // PER_NODE * PER_NODE]
                                   for r in range(RANKS)):
        fail(f"the ranks' nodes are {nodes}; expected two nodes of {PER_NODE} in rank order")
    for name in ("deepseek_v3", "qwen3_moe"):
        ckpt = os.path.join(goldens, name)
        config = json.load(open(os.path.join(ckpt, "config.json")))
        alone = os.path.join(work, name + "-1")
        layout = os.path.join(work, name + "-ep8tp4")
        run("moe-compile", ckpt, "-o", alone, "--max-context", "64")
        run("moe-compile", ckpt, "-o", layout, "--max-context", "64", "--ep", str(RANKS),
            "--tp", str(TP), "--ranks-per-node", str(PER_NODE))
        one = json.loads(run("moe-plan", "json", alone))
        split = json.loads(run("moe-plan", "json", layout))
        want = greedy(alone, PROMPT, STEPS)
        got = greedy(layout, PROMPT, STEPS, two_nodes + ["-np", str(RANKS)])
        err = same_greedy_run(name, got, want, TOLERANCE)
        report = got[2]
        for r in range(RANKS):
            have = split["programs"][r]["weight_bytes"]
            closed = weight_closed_form(one, config, r)
            if have != closed:
                fail(f"{name}: rank {r} holds {have} weight bytes; the closed form is {closed}")
        sent = [int(b) for b in re.findall(r"^rank \d+: .*\((\d+) bytes\)", report, re.M)]
        closed = collective_closed_form(one, config, len(PROMPT.split(",")) + STEPS - 1)
        if len(sent) != RANKS or any(b != closed for b in sent):
            fail(f"{name}: the ranks handed the collectives {sent} bytes; the closed form is "
                 f"{closed} each")
        whole = one["programs"][0]["weight_bytes"]
        print(f"{name} ep {RANKS} + tp {TP} on two nodes: same tokens; logits within {err:.1g}; "
              f"weights per rank {min(p['weight_bytes'] for p in split['programs']) / whole:.2f}-"
              f"{max(p['weight_bytes'] for p in split['programs']) / whole:.2f} of one rank's, "
              f"as the closed form; {closed} collective bytes per rank, as the closed form")
    n = served(two_nodes, goldens, work, "deepseek_v3")
    print(f"deepseek_v3 ep {RANKS} + tp {TP} served on two nodes: {n} concurrent answers equal "
          f"one rank's")


if __name__ == "__main__":
    main()
