#!/usr/bin/env python3
"""moe-bench --url against moe-bench in process: serve-bench.py BIN PLAN WORK

Runs one closed-loop workload (greedy, so that the tokens are the seeds'
alone) in process and through a moe-serve on the same plan, prints
moe-bench's --url report, and checks that both report the same requests,
generated tokens and finish reasons. Then an open loop far past what the
server sustains: every request is completed or refused, none lost."""
import json
import os
import signal
import subprocess
import sys
import time

BIN, PLAN, WORK = sys.argv[1:4]
os.makedirs(WORK, exist_ok=True)
flags = ["--concurrency", "4", "--requests", "16", "--prompt-len", "8:24", "--output-len", "8:24",
         "--seed", "5"]
inproc = os.path.join(WORK, "inproc.json")
subprocess.run([os.path.join(BIN, "moe-bench"), PLAN, *flags, "--json", inproc], check=True,
               stdout=subprocess.DEVNULL)
port_file = os.path.join(WORK, "port")
if os.path.exists(port_file):
    os.remove(port_file)
server = subprocess.Popen([os.path.join(BIN, "moe-serve"), PLAN, "--port", "0", "--port-file",
                           port_file, "--max-waiting", "4"], stderr=subprocess.DEVNULL)
try:
    for _ in range(600):
        if os.path.exists(port_file) and open(port_file).read().strip():
            break
        time.sleep(0.05)
    url = "http://127.0.0.1:" + open(port_file).read().strip()
    http = os.path.join(WORK, "http.json")
    report = subprocess.run([os.path.join(BIN, "moe-bench"), PLAN, *flags, "--url", url,
                             "--json", http], check=True, capture_output=True, text=True)
    sys.stdout.write(report.stderr if not report.stdout else report.stdout)
    # Far past what the server sustains (Poisson arrivals at 5000 req/s on a
    # queue of 4): moe-bench fails if a request is lost; each is completed
    # or refused 429.
    over = os.path.join(WORK, "over.json")
    subprocess.run([os.path.join(BIN, "moe-bench"), PLAN, "--rate", "5000", "--requests", "64",
                    "--prompt-len", "8:24", "--output-len", "8:24", "--url", url, "--json", over],
                   check=True, capture_output=True)
    o = json.load(open(over))["levels"][0]
    assert o["completed"] + o["rejected_queue_full"] == 64 and o["rejected_invalid"] == 0, o
    print(f"overload over HTTP: {o['completed']} completed, {o['rejected_queue_full']} refused "
          f"429, none lost")
finally:
    server.send_signal(signal.SIGTERM)
    assert server.wait(timeout=60) == 0
a = json.load(open(inproc))["levels"][0]
b = json.load(open(http))["levels"][0]
for key in ["requests", "completed", "generated_tokens", "finish_reasons"]:
    assert a[key] == b[key], (key, a[key], b[key])
# Steps may group tokens otherwise (arrivals differ), not compute others.
computed = [x["prefill_tokens"] + x["decode_tokens"] for x in (a, b)]
assert computed[0] == computed[1], computed
print(f"same generated tokens in process and over HTTP: {b['completed']} requests")
