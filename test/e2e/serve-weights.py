#!/usr/bin/env python3
"""moe-serve checks the weights as they are paged in:
    serve-weights.py BIN-DIR PLAN-DIR WORK-DIR

  good     the plan as compiled: /health turns 200 once its weights are
           verified, and the log says so
  flipped  one byte flipped in the first tensor, in the middle of the
           largest and in the last byte of the last: /health never says ok,
           it says "corrupt" and names the tensor (found here from the
           plan's own tensor table), requests are refused 503, the log
           names it too
  opt-out  --no-verify-weights serves the flipped plan (checked at install
           time, its user says)
Prints one line per check; any failure raises."""
import json
import os
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import serve_common  # noqa: E402

BIN, PLAN, WORK = sys.argv[1:4]
REQUEST = {"model": "kjv", "prompt": "And God said", "max_tokens": 4, "temperature": 0}


def weights(plan):
    """The plan's weight tensors of file 0: (offset, size, name), by offset."""
    doc = json.loads(subprocess.run([os.path.join(BIN, "moe-plan"), "json", plan], check=True,
                                    capture_output=True, text=True).stdout)
    out = [(t["offset"], t["size"], t["name"]) for t in doc["tensors"]
           if t.get("storage") == "Weight" and t.get("weight_file", 0) == 0]
    return sorted(out)


def flipped(at, name):
    plan = os.path.join(WORK, name)
    shutil.rmtree(plan, ignore_errors=True)
    shutil.copytree(PLAN, plan)
    path = os.path.join(plan, "weights-0.bin")
    with open(path, "r+b") as f:
        f.seek(at)
        b = f.read(1)
        f.seek(at)
        f.write(bytes([b[0] ^ 0x40]))
    return plan


def check_good():
    t0 = time.time()
    s = serve_common.Server(BIN, PLAN, os.path.join(WORK, "good"))
    took = time.time() - t0
    status, r = s.post("/v1/completions", REQUEST)
    assert status == 200, r
    assert "weights verified" in s.stderr(), s.stderr()
    s.stop()
    print(f"good: healthy once verified ({took:.1f} s from start), answers")


def check_flipped():
    tensors = weights(PLAN)
    largest = max(tensors, key=lambda t: t[1])
    spots = [(tensors[0][0], tensors[0][2]),
             (largest[0] + largest[1] // 2, largest[2]),
             (tensors[-1][0] + tensors[-1][1] - 1, tensors[-1][2])]
    for i, (at, tensor) in enumerate(spots):
        plan = flipped(at, f"flipped-{i}")
        s = serve_common.Server(BIN, plan, os.path.join(WORK, f"run-{i}"), wait_ready=False)
        deadline = time.time() + 60
        while True:
            status, body = s.request("GET", "/health", key=None)
            assert status != 200, ("healthy with a flipped byte", at, body)
            health = json.loads(body)
            if health["status"] == "corrupt" or time.time() > deadline:
                break
            time.sleep(0.02)
        assert health["status"] == "corrupt", health
        assert f"weight '{tensor}'" in health["error"], (tensor, health)
        status, r = s.post("/v1/completions", REQUEST)
        assert status == 503 and r["error"]["code"] == "not_ready", (status, r)
        assert f"'{tensor}'" in r["error"]["message"], r
        if i == 0:  # moe-bench --url names it too, before sending anything
            bench = subprocess.run([os.path.join(BIN, "moe-bench"), PLAN, "--url",
                                    f"http://127.0.0.1:{s.port}", "--model-name", "kjv",
                                    "--api-key-file", os.path.join(WORK, f"run-{i}", "keys")],
                                   capture_output=True, text=True)
            assert bench.returncode != 0 and "corrupt" in bench.stderr and tensor in bench.stderr, \
                bench.stderr
        s.stop()
        assert f"checksum mismatch in weight '{tensor}'" in s.stderr(), s.stderr()
    print(f"flipped: {len(spots)} flips (first tensor, middle of the largest, last byte): "
          f"503 corrupt naming the tensor, requests refused 503, never healthy; moe-bench "
          f"--url refuses to run against it")
    return plan


def check_opt_out(plan):
    s = serve_common.Server(BIN, plan, os.path.join(WORK, "opt-out"), "--no-verify-weights")
    status, r = s.post("/v1/completions", REQUEST)
    assert status == 200, r
    s.stop()
    print("opt-out: --no-verify-weights serves without the check")


check_good()
check_opt_out(check_flipped())
