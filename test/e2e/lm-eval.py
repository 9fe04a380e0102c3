#!/usr/bin/env python3
"""lm-evaluation-harness against moe-serve:
    lm-eval.py BIN-DIR PLAN-DIR WORK-DIR LM_EVAL

PLAN-DIR is a plan of test/e2e/make-text-checkpoint.py's checkpoint (the
trained example with a byte-level tokenizer.json: token = byte + 3). Two
tasks built here from local files: a multiple-choice cloze (log-likelihood
requests: echo + logprobs) and a greedy completion until a newline
(generate_until). LM_EVAL (lm_eval's command) runs them with model
local-completions against the server, its remote tokenizer, and
--log_samples. Then every request's log-likelihood must equal the one
computed here from `moe-run --dump-logits` (log_softmax in double) to 1e-5,
its is-greedy flag too, and every generation must equal moe-run's greedy
text cut at the same stop string."""
import glob
import json
import math
import os
import struct
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import serve_common  # noqa: E402

BIN, PLAN, WORK, LM_EVAL = sys.argv[1:5]
VOCAB = 259
CLOZE = [
    ("In the beginning God created the", [" heaven", " sea", " cattle"], 0),
    ("And God said, Let there be", [" light", " darkness", " water"], 0),
    ("The LORD is my", [" shepherd", " bread", " river"], 0),
    ("And the earth was without form, and", [" void", " full", " green"], 0),
    ("Blessed are the", [" meek", " proud", " stones"], 0),
    ("For God so loved the", [" world", " fish", " gold"], 0),
]
GENERATE = ["And Moses said unto the LORD,", "In the beginning", "Thou shalt not",
            "And it came to pass, when"]


def ids(text):
    """The checkpoint's tokenizer without special tokens: byte + 3."""
    return [b + 3 for b in text.encode()]


def write_tasks(root):
    os.makedirs(root, exist_ok=True)
    with open(os.path.join(root, "cloze.jsonl"), "w") as f:
        for context, choices, answer in CLOZE:
            f.write(json.dumps({"context": context, "choices": choices, "answer": answer}) + "\n")
    with open(os.path.join(root, "gen.jsonl"), "w") as f:
        for p in GENERATE:
            f.write(json.dumps({"prompt": p, "answer": ""}) + "\n")
    task(root, "kjv_cloze", "cloze.jsonl", "multiple_choice", """doc_to_text: "{{context}}"
doc_to_choice: "{{choices}}"
doc_to_target: answer
target_delimiter: ""
metric_list:
  - metric: acc
""")
    task(root, "kjv_gen", "gen.jsonl", "generate_until", """doc_to_text: "{{prompt}}"
doc_to_target: answer
generation_kwargs:
  until: [","]
  max_gen_toks: 24
  do_sample: false
metric_list:
  - metric: exact_match
""")


def task(root, name, data, output_type, rest):
    """An lm-eval task of a local JSON-lines file."""
    with open(os.path.join(root, name + ".yaml"), "w") as f:
        f.write(f"task: {name}\ndataset_path: json\ndataset_kwargs:\n  data_files:\n"
                f"    test: {root}/{data}\ntest_split: test\noutput_type: {output_type}\n" + rest)


def reference(tokens, continuation):
    """Log-likelihood of the last `continuation` tokens and whether each is
    the argmax, from moe-run's logits."""
    path = os.path.join(WORK, "logits.bin")
    serve_common.moe_run(BIN, PLAN, tokens, 1, extra=["--dump-logits", path])
    data = open(path, "rb").read()
    total, greedy = 0.0, True
    for i in range(len(tokens) - continuation, len(tokens)):
        row = struct.unpack_from(f"<{VOCAB}f", data, (i - 1) * VOCAB * 4)
        top = max(row)
        lse = top + math.log(sum(math.exp(v - top) for v in row))
        total += row[tokens[i]] - lse
        greedy = greedy and row[tokens[i]] == top
    return total, greedy


tasks = os.path.join(WORK, "tasks")
write_tasks(tasks)
server = serve_common.Server(BIN, PLAN, os.path.join(WORK, "server"), key=False)
out = os.path.join(WORK, "out")
url = f"http://127.0.0.1:{server.port}/v1/completions"
env = dict(os.environ, HF_DATASETS_OFFLINE="1", HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
run = subprocess.run([LM_EVAL, "--model", "local-completions", "--model_args",
                      f"model=kjv,base_url={url},tokenizer_backend=remote,tokenized_requests=True,"
                      "num_concurrent=2,max_retries=1,max_length=1024",
                      "--tasks", "kjv_cloze,kjv_gen", "--include_path", tasks, "--log_samples",
                      "--output_path", out, "--seed", "0"],
                     capture_output=True, text=True, env=env)
if run.returncode != 0:
    raise SystemExit("lm_eval failed:\n" + run.stdout[-3000:] + run.stderr[-3000:])
server.stop()

samples = {}
for path in glob.glob(os.path.join(out, "**", "samples_*.jsonl"), recursive=True):
    task = "cloze" if "kjv_cloze" in path else "gen"
    samples[task] = [json.loads(line) for line in open(path)]
assert len(samples.get("cloze", [])) == len(CLOZE), samples.keys()
assert len(samples.get("gen", [])) == len(GENERATE), samples.keys()

checked, worst = 0, 0.0
for s in samples["cloze"]:
    args = s["arguments"]  # {"gen_args_0": {"arg_0": context, "arg_1": continuation}, ...}
    pairs = [(a["arg_0"], a["arg_1"]) for a in args.values()] if isinstance(args, dict) \
        else [tuple(a) for a in args]
    for (context, continuation), resp in zip(pairs, s["resps"]):
        ll, greedy = float(resp[0][0]), str(resp[0][1]) == "True"  # logged as strings
        tokens = ids(context + continuation)
        want, want_greedy = reference(tokens, len(tokens) - len(ids(context)))
        assert abs(ll - want) <= 1e-5, (context, continuation, ll, want)
        assert greedy == want_greedy, (context, continuation, greedy, want_greedy)
        worst = max(worst, abs(ll - want))
        checked += 1
gen = 0
for s in samples["gen"]:
    prompt = s["doc"]["prompt"]
    text = s["resps"][0][0]
    want = serve_common.moe_run(BIN, PLAN, ids(prompt), 24)
    want_text = bytes(t - 3 for t in want["generated_tokens"] if t >= 3).decode("utf-8", "replace")
    want_text = want_text.split(",")[0]
    assert text == want_text, (prompt, text, want_text)
    gen += 1
print(f"lm-eval: {checked} log-likelihood requests equal moe-run's to 1e-5 (worst "
      f"{worst:.1e}), with their is-greedy flags; {gen} greedy generations equal moe-run's")
