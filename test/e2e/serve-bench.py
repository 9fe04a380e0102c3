#!/usr/bin/env python3
"""moe-bench --url against moe-bench in process: serve-bench.py BIN PLAN WORK

Runs one closed-loop workload (greedy, so that the tokens are the seeds'
alone) in process and through a moe-serve on the same plan, prints
moe-bench's --url report, and checks that both report the same requests,
generated tokens and finish reasons."""
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
                           port_file], stderr=subprocess.DEVNULL)
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
