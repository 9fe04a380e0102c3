#!/usr/bin/env python3
"""moe-serve's sampling API against in-process references:
    serve-api.py BIN-DIR WORK-DIR PLAN-DIR...

For each plan (a random-weight checkpoint with a tokenizer.json):
  logprobs  every logprob moe-serve reports (prompt tokens echoed, generated
            tokens, their top alternatives; completions and chat) equals
            log_softmax of the logits `moe-run --dump-logits` wrote for the
            same tokens, to 1e-5
  n         n = 4 with a seed gives moe-run's generations with seeds
            seed + 0..3, streamed or not
  sampling  penalties, min_p, top_k, stop_token_ids, min_tokens and
            include_stop_str_in_output give what moe-run gives with the same
            flags
Prints one line per plan and check; any failure raises."""
import json
import math
import os
import struct
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import serve_common  # noqa: E402

BIN, WORK, PLANS = sys.argv[1], sys.argv[2], sys.argv[3:]
TOL = 1e-5
# A chat template of our own (--chat-template): the random checkpoints have none.
TEMPLATE = ("{% for m in messages %}<{{ m['role'] }}>{{ m['content'] }}{% endfor %}"
            "{% if add_generation_prompt %}<assistant>{% endif %}")


def log_softmax(row):
    top = max(row)
    lse = top + math.log(sum(math.exp(v - top) for v in row))
    return [v - lse for v in row]


def dumped_rows(plan, prompt, n, vocab, work):
    """moe-run's logits: one row per prompt token, then one per decode step."""
    path = os.path.join(work, "logits.bin")
    run = serve_common.moe_run(BIN, plan, prompt, n, extra=["--dump-logits", path])
    data = open(path, "rb").read()
    rows = [list(struct.unpack_from(f"<{vocab}f", data, i * vocab * 4))
            for i in range(len(data) // (vocab * 4))]
    assert len(rows) == len(prompt) + n - 1, (len(rows), len(prompt), n)
    return run, rows


def close(a, b):
    return abs(a - b) <= TOL * max(1.0, abs(b))


def check_logprobs(server, plan, vocab, work):
    prompt = [(7 * i + 11) % (vocab - 10) + 5 for i in range(12)]
    n, k = 6, 5
    run, rows = dumped_rows(plan, prompt, n, vocab, work)
    tokens = prompt + run["generated_tokens"]
    want = [log_softmax(r) for r in rows]  # want[i] scores tokens[i + 1]
    status, r = server.post("/v1/completions", {
        "model": server.name, "prompt": prompt, "max_tokens": n, "temperature": 0,
        "logprobs": k, "echo": True, "ignore_eos": True})
    assert status == 200, r
    lp = r["choices"][0]["logprobs"]
    assert lp["token_logprobs"][0] is None and lp["top_logprobs"][0] is None, lp
    assert len(lp["token_logprobs"]) == len(tokens), (len(lp["token_logprobs"]), len(tokens))
    checked = 0
    for i in range(1, len(tokens)):
        ref = want[i - 1]
        got = lp["token_logprobs"][i]
        assert close(got, ref[tokens[i]]), (i, got, ref[tokens[i]])
        best = sorted(range(vocab), key=lambda t: (-ref[t], t))[:k]
        tops = sorted(lp["top_logprobs"][i].values(), reverse=True)
        # k alternatives, and the token itself when it is not one of them.
        assert len(tops) == k + (tokens[i] not in best), (i, tops)
        for a, t in zip(tops, sorted([ref[t] for t in set(best) | {tokens[i]}], reverse=True)):
            assert close(a, t), (i, a, t)
        checked += 1 + len(tops)
    # Scoring only (max_tokens 0): the prompt's logprobs and nothing else.
    status, score = server.post("/v1/completions", {
        "model": server.name, "prompt": prompt, "max_tokens": 0, "logprobs": 0, "echo": True})
    assert status == 200, score
    only = score["choices"][0]["logprobs"]["token_logprobs"]
    assert only[1:] == lp["token_logprobs"][1:len(prompt)] and len(only) == len(prompt), only
    assert score["usage"]["completion_tokens"] == 0, score
    # The same generated tokens' logprobs in chat's form.
    status, c = server.post("/v1/chat/completions", {
        "model": server.name, "messages": [{"role": "user", "content": "the LORD said"}],
        "max_tokens": 4, "temperature": 0, "logprobs": True, "top_logprobs": 3,
        "ignore_eos": True})
    assert status == 200, c
    content = c["choices"][0]["logprobs"]["content"]
    assert len(content) == 4 and all(len(e["top_logprobs"]) == 3 for e in content), content
    assert all(e["top_logprobs"][0]["logprob"] >= e["logprob"] - TOL for e in content), content
    assert all(bytes(e["bytes"]).decode("utf-8", "replace") == e["token"] or
               "\ufffd" in e["token"] for e in content), content
    return f"{checked} logprobs (12 prompt and {n} generated tokens, top {k}) equal log_softmax " \
           f"of moe-run's logits"


def check_n(server, plan):
    prompt, seed = "In the beginning", 41
    status, r = server.post("/v1/completions", {
        "model": server.name, "prompt": prompt, "max_tokens": 10, "temperature": 0.9,
        "seed": seed, "n": 4})
    assert status == 200, r
    events = server.stream("/v1/completions", {
        "model": server.name, "prompt": prompt, "max_tokens": 10, "temperature": 0.9,
        "seed": seed, "n": 4, "stream": True})
    streamed = ["".join(e["choices"][0]["text"] for e in events[:-1]
                        if e["choices"] and e["choices"][0]["index"] == i) for i in range(4)]
    choices = sorted(r["choices"], key=lambda c: c["index"])
    for i in range(4):
        want = serve_common.moe_run(BIN, plan, prompt, 10, 0.9, seed + i)["text"]
        assert choices[i]["text"] == want, (i, choices[i]["text"], want)
        assert streamed[i] == want, (i, streamed[i], want)
    distinct = len({c["text"] for c in choices})
    return f"n = 4: the 4 choices ({distinct} distinct), streamed or not, equal moe-run with " \
           f"seeds {seed}..{seed + 3}"


def check_sampling(server, plan, vocab):
    prompt = "And the earth was"
    cases = [
        ({"presence_penalty": 1.5, "frequency_penalty": 0.7, "temperature": 0.8, "seed": 5},
         ["--presence-penalty", "1.5", "--frequency-penalty", "0.7"]),
        ({"repetition_penalty": 1.3, "temperature": 0, "seed": 0},
         ["--repetition-penalty", "1.3"]),
        ({"min_p": 0.2, "top_k": 7, "temperature": 1.2, "seed": 9},
         ["--min-p", "0.2", "--top-k", "7"]),
        ({"min_tokens": 6, "temperature": 0, "seed": 0}, ["--min-tokens", "6"]),
    ]
    for body, flags in cases:
        status, r = server.post("/v1/completions", {"model": server.name, "prompt": prompt,
                                                    "max_tokens": 12, **body})
        assert status == 200, (body, r)
        want = serve_common.moe_run(BIN, plan, prompt, 12, body["temperature"], body["seed"],
                                    extra=flags)
        assert r["choices"][0]["text"] == want["text"], (body, r["choices"][0]["text"], want)
    # A stop token id: the token that ends the answer is left out of its
    # text, unless include_stop_str_in_output.
    greedy = serve_common.moe_run(BIN, plan, prompt, 12)
    stop_id = greedy["generated_tokens"][3]
    for keep in (False, True):
        status, r = server.post("/v1/completions", {
            "model": server.name, "prompt": prompt, "max_tokens": 12, "temperature": 0,
            "stop_token_ids": [stop_id], "include_stop_str_in_output": keep})
        want = serve_common.moe_run(BIN, plan, prompt, 12, extra=[
            "--stop-token-ids", str(stop_id)] + (["--include-stop-str"] if keep else []))
        assert status == 200 and r["choices"][0]["finish_reason"] == "stop", r
        assert r["usage"]["completion_tokens"] == len(want["generated_tokens"]), (r, want)
    return f"{len(cases) + 2} requests with penalties, min_p, top_k, min_tokens and stop token " \
           f"ids equal moe-run with the same flags"


template = os.path.join(WORK, "template.jinja")
os.makedirs(WORK, exist_ok=True)
open(template, "w").write(TEMPLATE)
for plan in PLANS:
    name = os.path.basename(plan.rstrip("/"))
    work = os.path.join(WORK, name)
    show = subprocess.run([os.path.join(BIN, "moe-plan"), "json", plan], check=True,
                          capture_output=True, text=True).stdout
    vocab = json.loads(show)["config"]["vocab_size"]
    server = serve_common.Server(BIN, plan, work, "--chat-template", template, name=name,
                                 key=False)
    for check in ("logprobs", "n", "sampling"):
        fn = globals()["check_" + check]
        args = {"logprobs": (server, plan, vocab, work), "n": (server, plan),
                "sampling": (server, plan, vocab)}[check]
        print(f"{name} {check}: {fn(*args)}")
    server.stop()
