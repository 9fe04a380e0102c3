#!/usr/bin/env python3
"""make demo's serving line: serve-demo.py BIN-DIR PLAN-DIR PROMPT

Starts moe-serve on the plan (a free loopback port), sends one streaming
/v1/completions request with Python's http.client, prints the text as the
events arrive, then stops the server with SIGTERM."""
import http.client
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

bin_dir, plan, prompt = sys.argv[1:4]
with tempfile.TemporaryDirectory() as tmp:
    port_file = os.path.join(tmp, "port")
    server = subprocess.Popen([os.path.join(bin_dir, "moe-serve"), plan, "--port", "0",
                               "--port-file", port_file, "--model-name", "kjv-moe"])
    try:
        while not (os.path.exists(port_file) and open(port_file).read().strip()):
            if server.poll() is not None:
                sys.exit("moe-serve exited with status %d" % server.returncode)
            time.sleep(0.05)
        port = int(open(port_file).read())
        # Healthy once the weights are verified (milliseconds for this model).
        while True:
            h = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
            h.request("GET", "/health")
            if h.getresponse().status == 200:
                break
            time.sleep(0.01)
        body = {"model": "kjv-moe", "prompt": prompt, "max_tokens": 120, "temperature": 0.7,
                "seed": 3, "stream": True, "stream_options": {"include_usage": True}}
        print(f"POST http://127.0.0.1:{port}/v1/completions (stream):\n{prompt}", end="",
              flush=True)
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        c.request("POST", "/v1/completions", json.dumps(body),
                  {"Content-Type": "application/json"})
        r = c.getresponse()
        if r.status != 200:
            sys.exit(f"\nHTTP {r.status}: {r.read().decode()}")
        t0, chunks, usage = time.time(), 0, None
        for line in r:
            line = line.decode().strip()
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            event = json.loads(line[6:])
            if event.get("usage"):
                usage = event["usage"]
            for choice in event["choices"]:
                print(choice["text"], end="", flush=True)
                chunks += 1
        print(f"\n[{chunks} events, {usage['completion_tokens']} tokens in "
              f"{time.time() - t0:.2f} s]")
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=60)
