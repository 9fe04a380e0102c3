#!/usr/bin/env python3
"""moe-bench --url against moe-bench in process: serve-bench.py BIN PLAN WORK

Runs one closed-loop workload (greedy, so that the tokens are the seeds'
alone) in process and through a moe-serve on the same plan, prints
moe-bench's --url report, and checks that both report the same requests,
generated tokens and finish reasons, that the KV pool reported is the
server's, and that every latency summary (TTFT, TPOT, ITL, E2EL: mean,
median, p90, p99) equals one recomputed here from the per-request figures
with vLLM's formulas. Then how requests that were not completed are told
apart, each with what the server said: 429 (an open loop far past what the
server sustains), 503 (more clients than --max-connections), 400 (bad
requests; the messages compared with the server's own answers), and,
from a stub server, a non-JSON 502 and 503, an error mid-stream and a
dropped connection. Last, a server of another model and every flag that
only sets up the in-process engine are refused by name."""
import http.client
import http.server
import json
import math
import os
import signal
import statistics
import subprocess
import sys
import threading
import time

BIN, PLAN, WORK = sys.argv[1:4]
BENCH = os.path.join(BIN, "moe-bench")
WORKLOAD = os.path.join(os.path.dirname(os.path.abspath(__file__)), "Inputs",
                        "kjv-workload.jsonl")
os.makedirs(WORK, exist_ok=True)
flags = ["--concurrency", "4", "--requests", "16", "--prompt-len", "8:24", "--output-len", "8:24",
         "--seed", "5", "--per-request"]
SERVER_KV_BLOCKS = 40  # not moe-bench's default pool for these lengths


def bench(*args):
    """moe-bench's exit status, standard output and standard error."""
    r = subprocess.run([BENCH, *args], capture_output=True, text=True)
    return r.returncode, r.stdout, r.stderr


def start_server(name, *args):
    port_file = os.path.join(WORK, name + ".port")
    if os.path.exists(port_file):
        os.remove(port_file)
    # Given as PLAN/, the server still answers to the directory's name.
    server = subprocess.Popen([os.path.join(BIN, "moe-serve"), PLAN + "/", "--port", "0",
                               "--port-file", port_file, *args], stderr=subprocess.DEVNULL)
    for _ in range(600):
        if os.path.exists(port_file) and open(port_file).read().strip():
            return server, int(open(port_file).read())  # moe-bench waits for /health
        time.sleep(0.05)
    server.kill()
    sys.exit(f"serve-bench.py: moe-serve {' '.join(args)} did not start")


def stop_server(server):
    server.send_signal(signal.SIGTERM)
    assert server.wait(timeout=60) == 0


def quantile(sorted_values, p):
    """numpy's default percentile (linear between ranks), as vLLM reports."""
    if len(sorted_values) < 2:
        return sorted_values[0] if sorted_values else 0.0
    return statistics.quantiles(sorted_values, n=100, method="inclusive")[p - 1]


def summary(values):
    v = sorted(values)
    return {"mean": statistics.fmean(v) if v else 0.0,
            "median": statistics.median(v) if v else 0.0,
            "p90": quantile(v, 90), "p99": quantile(v, 99)}


def check_latencies(level, streamed):
    """The level's summaries against ones recomputed from its requests."""
    per = level["per_request"]
    assert len(per) == level["completed"], (len(per), level["completed"])
    assert sum(r["output_tokens"] for r in per) == level["generated_tokens"]
    tpot = []
    for r in per:
        n = r["output_tokens"]
        assert 0 <= r["ttft_ms"] <= r["e2el_ms"] <= 1e3 * level["seconds"], r
        # Every token timed in process; over HTTP, every chunk with text.
        assert len(r["itl_ms"]) + 1 <= n if streamed else len(r["itl_ms"]) + 1 == n, r
        assert sum(r["itl_ms"]) <= r["e2el_ms"] - r["ttft_ms"] + 1e-6, r
        if n > 1:
            tpot.append((r["e2el_ms"] - r["ttft_ms"]) / (n - 1))
            assert math.isclose(r["tpot_ms"], tpot[-1], rel_tol=1e-9), (r, tpot[-1])
        else:
            assert r["tpot_ms"] is None, r
    want = {"ttft_ms": summary(r["ttft_ms"] for r in per),
            "tpot_ms": summary(tpot),
            "itl_ms": summary(x for r in per for x in r["itl_ms"]),
            "e2el_ms": summary(r["e2el_ms"] for r in per)}
    for key, stats in want.items():
        for name, value in stats.items():
            got = level[key][name]
            assert math.isclose(got, value, rel_tol=1e-9, abs_tol=1e-9), (key, name, got, value)


def post(port, body):
    """The server's status and error message for one completions request."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    c.request("POST", "/v1/completions", json.dumps(body), {"Content-Type": "application/json"})
    r = c.getresponse()
    answer = json.loads(r.read())
    c.close()
    return r.status, answer["error"]["message"]


# In process, then the same workload over HTTP.
inproc = os.path.join(WORK, "inproc.json")
rc, _, err = bench(PLAN, *flags, "--json", inproc)
assert rc == 0, err
server, port = start_server("main", "--max-waiting", "4", "--kv-blocks", str(SERVER_KV_BLOCKS))
url = f"http://127.0.0.1:{port}"
try:
    http_json = os.path.join(WORK, "http.json")
    rc, report, err = bench(PLAN, *flags, "--url", url, "--json", http_json)
    assert rc == 0, err
    sys.stdout.write(report)
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    c.request("GET", "/metrics")
    METRICS = c.getresponse().read().decode()  # for the stub below
    c.close()

    # Far past what the server sustains (Poisson arrivals at 5000 req/s on a
    # queue of 4): moe-bench fails if a request is lost; each is completed
    # or refused 429, which is load, not an invalid request.
    over = os.path.join(WORK, "over.json")
    rc, _, err = bench(PLAN, "--rate", "5000", "--requests", "64", "--prompt-len", "8:24",
                       "--output-len", "8:24", "--url", url, "--json", over)
    assert rc == 0, err
    o = json.load(open(over))["levels"][0]
    assert o["completed"] + o["refused_busy"] == 64, o
    assert o["refused_busy"] > 0 and o["invalid"] == o["failed"] == o["refused_unavailable"] == 0, o
    assert "refused as busy; the first, request" in err and ": HTTP 429: " in err, err
    print(f"overload over HTTP: {o['completed']} completed, {o['refused_busy']} refused 429, "
          f"none lost")

    # Bad requests: moe-bench shows what the server answered them. Given as
    # PLAN/, moe-bench names the directory's model too.
    bad = os.path.join(WORK, "bad.json")
    rc, _, err = bench(PLAN + "/", "--workload", WORKLOAD, "--concurrency", "4", "--url", url,
                       "--json", bad)
    b = json.load(open(bad))["levels"][0]
    assert rc == 1 and b["completed"] == 4 and b["invalid"] == 2 and b["failed"] == 0, (b, err)
    # The workload's request 3 has a 300-token prompt, request 4 token 9999.
    for request, body in [(3, {"model": "plan", "prompt": [1] * 300, "max_tokens": 16}),
                          (4, {"model": "plan", "prompt": [1, 9999], "max_tokens": 4})]:
        status, message = post(port, body)
        line = f"moe-bench: request {request} invalid: HTTP {status}: {message}\n"
        assert status == 400 and line in err, (line, err)
    print("invalid over HTTP: 2 answered 400, shown with the server's messages; exit 1")
finally:
    stop_server(server)

a = json.load(open(inproc))
h = json.load(open(http_json))
assert h["kv_blocks"] == SERVER_KV_BLOCKS and h["levels"][0]["kv_blocks"] == SERVER_KV_BLOCKS, h
assert a["kv_blocks"] != SERVER_KV_BLOCKS and f"of {SERVER_KV_BLOCKS} blocks" in report, report
print(f"KV pool: the server's {SERVER_KV_BLOCKS} blocks (in process {a['kv_blocks']})")
a, b = a["levels"][0], h["levels"][0]
for key in ["requests", "completed", "generated_tokens", "finish_reasons"]:
    assert a[key] == b[key], (key, a[key], b[key])
assert [r["output_tokens"] for r in a["per_request"]] == \
    [r["output_tokens"] for r in b["per_request"]]
# Steps may group tokens otherwise (arrivals differ), not compute others.
computed = [x["prefill_tokens"] + x["decode_tokens"] for x in (a, b)]
assert computed[0] == computed[1], computed
print(f"same generated tokens in process and over HTTP: {b['completed']} requests")
check_latencies(a, streamed=False)
check_latencies(b, streamed=True)
print(f"latencies: TTFT, TPOT, ITL, E2EL mean, median, p90, p99 as recomputed from "
      f"{a['completed']} requests, in process and over HTTP")

# One connection: the requests beyond it are refused 503 (unavailable),
# again load. The server is named otherwise: the plan directory's name is
# refused by name, and --model-name picks its name.
server, port = start_server("one", "--max-connections", "1", "--model-name", "served")
url = f"http://127.0.0.1:{port}"
try:
    rc, _, err = bench(PLAN, "--url", url, "--requests", "1")
    assert rc == 1 and err.count("\n") == 1 and "serves model 'served', not 'plan'" in err and \
        "--model-name served" in err, err
    print("another model: refused by name, with the flag that picks it")
    one = os.path.join(WORK, "one.json")
    rc, _, err = bench(PLAN, "--model-name", "served", "--concurrency", "4", "--requests", "16",
                       "--prompt-len", "8:24", "--output-len", "30:40", "--url", url,
                       "--json", one)
    c = json.load(open(one))["levels"][0]
    assert rc == 0 and c["completed"] + c["refused_unavailable"] == 16, (c, err)
    assert c["refused_unavailable"] > 0 and c["invalid"] == c["failed"] == 0, c
    assert "refused as unavailable; the first, request" in err and \
        ": HTTP 503: the server is at its --max-connections of 1" in err, err
    print(f"one connection over HTTP: {c['completed']} completed, {c['refused_unavailable']} "
          f"refused 503 with the server's message, none lost")
finally:
    stop_server(server)

# Every flag that only sets up or observes the in-process engine.
in_process_only = [["--block-size", "8"], ["--kv-blocks", "8"], ["--budget", "8"],
                   ["--max-waiting", "4"], ["--kv-dtype", "int8"], ["--memory-limit", "100"],
                   ["--host-pool", "1"], ["--prefix-caching"], ["--threads", "1"],
                   ["--device", "cpu"], ["--verify"], ["--compare-to", PLAN],
                   ["--outputs", os.path.join(WORK, "out.jsonl")],
                   ["--trace", os.path.join(WORK, "trace.json")], ["--emulate-link", "1:1"]]
for flag in in_process_only:
    rc, _, err = bench(PLAN, "--url", url, *flag)
    assert rc == 1 and err.startswith(f"moe-bench: error: --url: {flag[0]} ") and \
        err.count("\n") == 1, (flag, err)
print(f"in-process flags: {len(in_process_only)} refused by name with --url")


# A server that answers otherwise than moe-serve does (its /metrics the
# real server's): by request, a 502 HTML page (longer than moe-bench shows),
# a 503 in plain text, a stream that ends with an error event, and a
# connection closed without an answer.
HTML = "<html><head><title>502 Bad Gateway</title></head><body>" + "x" * 300 + "</body></html>"
TEXT = "upstream connect error\nor disconnect"


class Stub(http.server.BaseHTTPRequestHandler):
    answered = 0
    metrics = METRICS
    lock = threading.Lock()

    def log_message(self, *args):
        pass

    def send(self, status, kind, body):
        data = body.encode()
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        if self.path == "/v1/models":
            self.send(200, "application/json", json.dumps({"data": [{"id": "plan"}]}))
        else:
            self.send(200, "text/plain", Stub.metrics)

    def do_POST(self):
        self.rfile.read(int(self.headers["Content-Length"]))
        with Stub.lock:
            n, Stub.answered = Stub.answered, Stub.answered + 1
        if n == 0:
            self.send(502, "text/html", HTML)
        elif n == 1:
            self.send(503, "text/plain", TEXT)
        elif n == 2:
            error = {"error": {"message": "the engine stopped: boom", "type": "x"}}
            self.send(200, "text/event-stream",
                      'data: {"choices": [{"text": "a"}]}\n\n' + f"data: {json.dumps(error)}\n\n"
                      "data: [DONE]\n\n")
        else:
            self.close_connection = True  # no answer at all


stub = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Stub)
threading.Thread(target=stub.serve_forever, daemon=True).start()
stub_json = os.path.join(WORK, "stub.json")
rc, _, err = bench(PLAN, "--url", f"http://127.0.0.1:{stub.server_address[1]}",
                   "--concurrency", "1", "--requests", "4", "--prompt-len", "4", "--output-len",
                   "4", "--json", stub_json)
s = json.load(open(stub_json))
assert s["kv_blocks"] == SERVER_KV_BLOCKS, s
s = s["levels"][0]
assert rc == 1 and s["completed"] == 0 and s["refused_unavailable"] == 1 and s["failed"] == 3, \
    (s, err)
one_line = TEXT.replace("\n", " ")
for line in [f"moe-bench: request 0 failed: HTTP 502: {HTML[:200]}...\n",
             f"moe-bench: 1 refused as unavailable; the first, request 1: HTTP 503: {one_line}\n",
             "moe-bench: request 2 failed: the stream ended with an error: the engine stopped: "
             "boom\n"]:
    assert line in err, (line, err)
assert "moe-bench: request 3 failed: no answer: " in err, err
print("other answers: a 502 page shown by its first 200 bytes, a 503 in text refused as "
      "unavailable, an error event and a dropped connection failed; exit 1")

# Metrics that count no expert's tokens: another plan's server, not a fault
# of the plan.
Stub.metrics = f"moe_kv_blocks_total {SERVER_KV_BLOCKS}\n"
rc, _, err = bench(PLAN, "--url", f"http://127.0.0.1:{stub.server_address[1]}",
                   "--concurrency", "1", "--requests", "1", "--prompt-len", "4", "--output-len",
                   "4")
stub.shutdown()
assert rc == 1 and err.endswith("is it serving another plan?\n"), err
print("a server of other MoE layers: the server is blamed, not the plan")
