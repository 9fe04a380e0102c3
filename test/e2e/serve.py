#!/usr/bin/env python3
"""End-to-end checks of moe-serve with a real HTTP client (http.client):
    serve.py BIN-DIR PLAN-DIR WORK-DIR

PLAN-DIR is a plan of test/e2e/make-text-checkpoint.py's checkpoint (the
trained example with a tokenizer.json and a chat template). The checks:
  outputs    concurrent streaming and non-streaming completions and chats
             equal moe-run's in-process generations for the same seeds
  errors     malformed bodies, wrong types, long prompts, unknown models,
             missing or wrong API keys, too many connections, big bodies:
             the documented status and an error body, and the server serves
  overload   a fixed burst at twice what the queue holds: every accepted
             request completes, the rest get 429 or 503, none is lost
  disconnect a client gone mid-stream frees its KV blocks (/metrics)
  timeout    a request past --request-timeout is cancelled (504)
  sigterm    SIGTERM drains: a running request is cancelled after --grace,
             reported, and the server exits 0
Each prints one line; any failure raises."""
import http.client
import importlib.util
import json
import os
import signal
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import serve_common  # noqa: E402
from serve_common import KEY  # noqa: E402

BIN, PLAN, WORK = sys.argv[1], sys.argv[2], sys.argv[3]
spec = importlib.util.spec_from_file_location(
    "ckpt", os.path.join(os.path.dirname(os.path.abspath(__file__)), "make-text-checkpoint.py"))
ckpt = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ckpt)


def Server(*flags):
    return serve_common.Server(BIN, PLAN, WORK, *flags)


def moe_run(prompt, n, temperature, seed, stop=None):
    return serve_common.moe_run(BIN, PLAN, prompt, n, temperature, seed, stop)


def check_outputs():
    s = Server("--max-connections", "16")
    cases = [("In the beginning God", 40, 0.0, 0, None),
             ("And the LORD said unto Moses,", 48, 0.8, 7, None),
             ("Blessed are the", 32, 1.0, 11, None),
             ("And it came to pass", 60, 0.7, 3, ["the people", "LORD"])]
    chats = [([{"role": "system", "content": "Speak as the prophets."},
               {"role": "user", "content": "Who made heaven and earth?"}], 40, 0.6, 5),
             ([{"role": "user", "content": "Tell of Noah."}], 32, 0.0, 0)]
    want = {}
    for i, (p, n, t, seed, stop) in enumerate(cases):
        want[("cmpl", i)] = moe_run(p, n, t, seed, stop)
    for i, (msgs, n, t, seed) in enumerate(chats):
        # moe-run's prompt gets the tokenizer's </s> like the template's bos.
        want[("chat", i)] = moe_run(ckpt.render(msgs), n, t, seed)
    got, errors = {}, []

    def run(kind, i, streaming):
        try:
            if kind == "cmpl":
                p, n, t, seed, stop = cases[i]
                body = {"model": "kjv", "prompt": p, "max_tokens": n, "temperature": t,
                        "seed": seed}
                if stop:
                    body["stop"] = stop
                path = "/v1/completions"
            else:
                msgs, n, t, seed = chats[i]
                body = {"model": "kjv", "messages": msgs, "max_tokens": n, "temperature": t,
                        "seed": seed}
                path = "/v1/chat/completions"
            if streaming:
                body["stream"] = True
                body["stream_options"] = {"include_usage": True}
                events = s.stream(path, body)
                assert events[-1] == "[DONE]", events[-3:]
                usage = events[-2]["usage"]
                chunks = [e for e in events[:-2]]
                if kind == "cmpl":
                    text = "".join(e["choices"][0]["text"] for e in chunks)
                else:
                    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
                    text = "".join(e["choices"][0]["delta"].get("content", "") for e in chunks)
                reason = chunks[-1]["choices"][0]["finish_reason"]
                got[(kind, i, streaming)] = (text, reason, usage["completion_tokens"])
            else:
                status, r = s.post(path, body)
                assert status == 200, (status, r)
                c = r["choices"][0]
                text = c["text"] if kind == "cmpl" else c["message"]["content"]
                got[(kind, i, streaming)] = (text, c["finish_reason"],
                                             r["usage"]["completion_tokens"])
        except Exception as e:  # reported below, with the case
            errors.append((kind, i, streaming, repr(e)))

    threads = [threading.Thread(target=run, args=(k, i, st))
               for k, i in want for st in (False, True)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    for (kind, i, streaming), (text, reason, tokens) in got.items():
        w = want[(kind, i)]
        assert text == w["text"], (kind, i, streaming, text, w["text"])
        assert tokens == len(w["generated_tokens"]), (kind, i, streaming, tokens, w)
        expect = "length" if w["finish_reason"] == "length" else "stop"
        assert reason == expect, (kind, i, streaming, reason, w["finish_reason"])
    stops = sum(1 for w in want.values() if w["finish_reason"] == "stop")
    s.stop()
    print(f"outputs: {len(got)} responses ({len(got) // 2} streamed) equal moe-run's; "
          f"{stops} ended at a stop string")


def check_errors():
    s = Server("--max-connections", "2", "--max-body", "0.01", "--max-prompt-tokens", "64")
    good = {"model": "kjv", "prompt": "And God said", "max_tokens": 4, "temperature": 0}
    cases = [
        ("malformed JSON", dict(raw="{\"model\": "), 400, "not valid JSON"),
        ("not an object", dict(raw="[1, 2]"), 400, "must be a JSON object"),
        ("wrong type", dict(body={**good, "max_tokens": "four"}), 400, "\"max_tokens\" must be an integer"),
        ("out of range", dict(body={**good, "temperature": 9}), 400, "\"temperature\" must lie in"),
        ("unknown field", dict(body={**good, "frobnicate": 1}), 400, "unknown field \"frobnicate\""),
        ("unsupported", dict(body={**good, "logit_bias": {"5": 3}}), 400, "\"logit_bias\" is not supported"),
        ("a schema", dict(body={**good, "response_format": {"type": "json_object"}}), 400,
         "\"response_format\" other than"),
        ("n too large", dict(body={**good, "n": 65}), 400, "\"n\" must lie in [1, 64]"),
        ("long prompt", dict(body={**good, "prompt": "x" * 100}), 400, "at most 64"),
        ("past the context", dict(body={**good, "max_tokens": 100000}), 400, "exceed the model's context"),
        ("unknown model", dict(body={**good, "model": "gpt-9"}), 404, "does not exist"),
        ("no key", dict(body=good, key=None), 401, "API key"),
        ("wrong key", dict(body=good, key="sk-test-0123456780"), 401, "API key"),
        ("big body", dict(body={**good, "prompt": "y" * 20000}), 413, "exceeds"),
    ]
    for name, kw, status, text in cases:
        got, body = s.request("POST", "/v1/completions", **kw)
        assert got == status, (name, got, body)
        err = json.loads(body)["error"]
        assert text in err["message"], (name, err)
        ok, r = s.post("/v1/completions", good)  # still serving
        assert ok == 200 and r["choices"][0]["text"], (name, ok, r)
    status, body = s.request("GET", "/v1/nothing")
    assert status == 404 and "no route" in json.loads(body)["error"]["message"], (status, body)
    # Too many connections: two long streams hold both slots; a third is 503.
    holders = []
    for _ in range(2):
        c = http.client.HTTPConnection("127.0.0.1", s.port, timeout=60)
        c.request("POST", "/v1/completions", body=json.dumps(
            {**good, "max_tokens": 200, "stream": True, "prompt": "And"}),
            headers={"Authorization": "Bearer " + KEY, "Content-Type": "application/json"})
        r = c.getresponse()
        r.read1(16)  # the first event: the request holds its slot
        holders.append((c, r))
    got, body = s.request("POST", "/v1/completions", body=good)
    assert got == 503 and "max-connections" in json.loads(body)["error"]["message"], (got, body)
    for c, r in holders:
        r.read()
        c.close()
    ok, r = s.post("/v1/completions", good)
    assert ok == 200, (ok, r)
    status, models = s.request("GET", "/v1/models")
    assert status == 200 and json.loads(models)["data"][0]["id"] == "kjv", models
    status, model = s.request("GET", "/v1/models/kjv")
    assert status == 200 and json.loads(model)["id"] == "kjv", model
    status, model = s.request("GET", "/v1/models/gpt-9")
    assert status == 404 and json.loads(model)["error"]["code"] == "model_not_found", model
    status, body = s.request("POST", "/v1/models", body={})
    assert status == 405 and json.loads(body)["error"]["code"] == "method_not_allowed", body
    status, health = s.request("GET", "/health", key=None)
    assert status == 200 and json.loads(health)["status"] == "ok", health
    s.stop()
    print(f"errors: {len(cases) + 4} bad requests answered with their status and an error "
          f"body; the server kept serving")


def check_overload():
    # Twice --max-connections at once, on a KV pool for 4 running requests
    # and a queue of 4: the rest is refused (503 beyond the connections, 429
    # beyond the queue), and every accepted request completes in full.
    s = Server("--max-waiting", "4", "--max-connections", "12", "--kv-blocks", "8")
    results, lock = [], threading.Lock()
    start = threading.Barrier(24)

    def one(i):
        start.wait()
        status, r = s.post("/v1/completions", {"model": "kjv", "prompt": "And", "max_tokens": 24,
                                               "temperature": 0.5, "seed": i, "ignore_eos": True})
        with lock:
            results.append((status, r))

    threads = [threading.Thread(target=one, args=(i,)) for i in range(24)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    statuses = [st for st, _ in results]
    ok = [r for st, r in results if st == 200]
    assert len(results) == 24 and set(statuses) <= {200, 429, 503} and ok and len(ok) < 24, statuses
    for r in ok:
        assert r["usage"]["completion_tokens"] == 24 and r["choices"][0]["finish_reason"] == "length", r
    for st, r in results:
        if st != 200:
            assert r["error"]["code"] in ("queue_full", "too_many_connections"), r
    assert s.metric("moe_kv_blocks_used") == 0
    s.stop()
    print(f"overload: 24 sent at once, {len(ok)} completed in full, {statuses.count(429)} "
          f"refused 429 (queue full), {statuses.count(503)} refused 503 (connections), none lost")


def check_disconnect():
    s = Server()
    idle, busy, freed = s.leave_stream({"model": "kjv", "prompt": "And God", "max_tokens": 200,
                                        "stream": True, "temperature": 0.9, "seed": 1,
                                        "ignore_eos": True})
    assert busy > idle and freed == idle, (idle, busy, freed)
    time.sleep(0.2)
    status, text = s.request("GET", "/metrics", key=None)
    assert 'moe_requests_total{outcome="disconnected"} 1' in text, text
    s.stop()
    print(f"disconnect: KV blocks {idle:.0f} idle, {busy:.0f} mid-stream, {freed:.0f} after the "
          f"client left")


def check_timeout():
    # 10 ms is far less than 200 tokens take: the request is cancelled and
    # answered 504 (a stream ends with the error event), its blocks freed.
    s = Server("--request-timeout", "0.01")
    body = {"model": "kjv", "prompt": "And", "max_tokens": 200, "ignore_eos": True,
            "temperature": 0.9, "seed": 3}
    status, r = s.post("/v1/completions", body)
    assert status == 504 and r["error"]["code"] == "timeout", (status, r)
    events = s.stream("/v1/completions", {**body, "stream": True})
    assert events[-1] == "[DONE]" and events[-2]["error"]["code"] == "timeout", events[-3:]
    for _ in range(100):
        if s.metric("moe_kv_blocks_used") == 0:
            break
        time.sleep(0.05)
    assert s.metric("moe_kv_blocks_used") == 0
    s.stop()
    print("timeout: past --request-timeout a request is cancelled: 504, or an error event "
          "in a stream")


def check_sigterm():
    # No grace: the 240-token request cannot have finished when the drain
    # looks. (0.05 s was a race: a Zen 5 core generates the tiny model's 240
    # tokens in about that time, and the drain then cancelled nothing.)
    s = Server("--grace", "0")
    c = http.client.HTTPConnection("127.0.0.1", s.port, timeout=60)
    c.request("POST", "/v1/completions", body=json.dumps(
        {"model": "kjv", "prompt": "And", "max_tokens": 240, "stream": True, "ignore_eos": True,
         "temperature": 0.9, "seed": 2}),
        headers={"Authorization": "Bearer " + KEY, "Content-Type": "application/json"})
    r = c.getresponse()
    r.read1(16)  # it runs
    s.proc.send_signal(signal.SIGTERM)
    rest = r.read().decode()
    code = s.proc.wait(timeout=60)
    log = s.stderr()
    assert code == 0, (code, log)
    assert "SIGTERM: no new requests" in log and "1 request(s) cancelled: ids 0" in log, log
    assert rest.rstrip().endswith("data: [DONE]") and '"code":"cancelled"' in rest, rest[-300:]
    print("sigterm: the running request was cancelled after the grace period and reported; "
          "exit 0")


for check in sys.argv[4:] or ["outputs", "errors", "overload", "disconnect", "timeout", "sigterm"]:
    globals()["check_" + check]()
