#!/usr/bin/env python3
"""moe-serve under mpirun equals the single-rank server (issue 49).

  serve-ranks.py BIN_DIR "MPIRUN" GOLDENS KJV_EXAMPLE WORK RANKS

For the five golden model types (given a tokenizer.json of their first 128
byte values, and a chat template) and the trained example (its byte-level
tokenizer.json, make-text-checkpoint.py), a single-rank server and servers
of the --ep N, --tp N and --ep N --tp M (M > 1 dividing N) plans under
mpirun -np N answer the
same 16 concurrent requests: completions and chats, half streamed, greedy
and sampled with seeds, on a KV pool too small for all of them at once
(preemption) with prefix caching (the completions share a 3-block prefix).
Every text and finish reason must be the single-rank server's; /metrics
shows each rank's KV blocks, expert rows and collective bytes, the rows
adding up to the job's routing counts. Then a
client leaves in the middle of a stream: its request is cancelled on every
rank (the KV blocks come back) and the next answer is still one rank's.
Prints one line per plan.
"""
import importlib.util
import os
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_common import Server  # noqa: E402

MODELS = ["mixtral", "qwen2_moe", "qwen3_moe", "deepseek_v2", "deepseek_v3"]
FLAGS = ["--kv-blocks", "12", "--prefix-caching"]
PREFIX = "In the beginning God created the heaven and the earth. And the earth "
TEMPLATE = ("{% for m in messages %}{{ m['role'] | upper }}: {{ m['content'] }}\n{% endfor %}"
            "{% if add_generation_prompt %}ASSISTANT:{% endif %}")


def text_module():
    here = os.path.dirname(os.path.abspath(__file__))
    spec = importlib.util.spec_from_file_location("mtc", os.path.join(here,
                                                                     "make-text-checkpoint.py"))
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    return m


def golden_text_checkpoint(golden, out):
    """The golden checkpoint with a byte-level tokenizer.json whose ids are
    the byte values 0..127 (its vocabulary), and a chat template."""
    text_module().with_byte_tokenizer(golden, out, 128, ["config.json", "model.safetensors"],
                                      TEMPLATE)


def requests(name):
    """16 requests: completions and chats, every other one streamed."""
    out = []
    for i in range(16):
        body = {"model": name, "max_tokens": 6 + 3 * i, "seed": 100 + i,
                "temperature": 0.0 if i % 3 == 0 else 0.9, "stream": i % 2 == 1}
        if i % 4 < 2:
            body["prompt"] = PREFIX + f"{i} said: "
        else:
            body["messages"] = [{"role": "user", "content": f"Tell me {i} things"}]
        if i % 5 == 0:
            body["ignore_eos"] = True
        out.append(body)
    return out


def answer(server, body):
    path = "/v1/chat/completions" if "messages" in body else "/v1/completions"
    if body["stream"]:
        events = server.stream(path, body)
        text, reason = "", None
        for e in events:
            if e == "[DONE]":
                continue
            assert "error" not in e, e
            c = e["choices"][0]
            text += c.get("text") or (c.get("delta") or {}).get("content") or ""
            reason = c.get("finish_reason") or reason
        return text, reason
    status, reply = server.post(path, body)
    assert status == 200, (status, reply)
    c = reply["choices"][0]
    return c.get("text", (c.get("message") or {}).get("content")), c["finish_reason"]


def answers(server, name):
    """The answers to the 16 requests, sent at once."""
    bodies = requests(name)
    got = [None] * len(bodies)
    errors = []

    def one(i):
        try:
            got[i] = answer(server, bodies[i])
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(f"request {i}: {e!r}")

    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(bodies))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise SystemExit("; ".join(errors) + "\n" + server.stderr())
    return got


def leave_mid_stream(server, name):
    """A streamed request whose client leaves after its first event: it is
    cancelled (counted as disconnected), the KV blocks in use go back to
    what they were, and the next request is answered."""
    left = 'moe_requests_total{outcome="disconnected"}'
    before = server.metrics().get(left, 0)
    idle, busy, freed = server.leave_stream({"model": name, "prompt": "And", "max_tokens": 150,
                                             "stream": True, "temperature": 0.9, "seed": 1,
                                             "ignore_eos": True}, events=1)
    if freed != idle:
        raise SystemExit(f"{name}: KV blocks {idle} before, {busy} mid-stream, {freed} after the "
                         f"client left")
    for _ in range(50):
        if server.metrics().get(left, 0) == before + 1:
            break
        time.sleep(0.05)
    else:
        raise SystemExit(f"{name}: the request whose client left was not counted as "
                         f"disconnected (it finished first?)")
    return answer(server, {"model": name, "prompt": "And", "max_tokens": 20, "seed": 3,
                           "temperature": 0.9, "stream": False})


def rank_metrics(server, n, label, spread=()):
    """/metrics has each rank's KV blocks, expert rows, collective bytes and
    time, picks replaced by rank 0's, and requests running and waiting
    (none, once all are answered); the ranks' expert rows add up to
    the job's routing counts (summed over the ranks), and every rank
    exchanged bytes and spent time in collectives; `spread` (ranks holding
    different tokens, the first of each data group counting its group's
    tokens' picks): each of those ranks ran requests. Waits for the ranks'
    next report (once a second), which follows the last request."""
    time.sleep(1.2)
    for _ in range(50):
        m = server.metrics()
        rows = [m.get(f'moe_rank_expert_rows_total{{rank="{r}"}}') for r in range(n)]
        routed = sum(v for k, v in m.items() if k.startswith("moe_expert_tokens_total{"))
        sent = [m.get(f'moe_rank_collective_bytes_total{{rank="{r}"}}') for r in range(n)]
        kv = [m.get(f'moe_rank_kv_blocks_used{{rank="{r}"}}') for r in range(n)]
        waited = [m.get(f'moe_rank_collective_seconds_total{{rank="{r}"}}') for r in range(n)]
        replaced = [m.get(f'moe_rank_picks_replaced_total{{rank="{r}"}}') for r in range(n)]
        # Every request has finished: no rank's engine holds one.
        held = [m.get(f'moe_rank_requests_{s}{{rank="{r}"}}') for s in ("running", "waiting")
                for r in range(n)]
        if (None not in rows + sent + kv + waited + replaced + held and not any(held) and
                sum(rows) == routed and routed > 0):
            break
        time.sleep(0.1)
    else:
        raise SystemExit(f"{label}: /metrics per rank: expert rows {rows}, routed {routed}, "
                         f"collective bytes {sent}, KV blocks {kv}, collective seconds "
                         f"{waited}, picks replaced {replaced}, requests running and waiting "
                         f"{held}")
    if min(sent) <= 0 or min(waited) <= 0:
        raise SystemExit(f"{label}: a rank sent no collective bytes or spent no time in "
                         f"collectives: {sent} bytes, {waited} s")
    if any(rows[r] <= 0 for r in spread):
        raise SystemExit(f"{label}: a data group ran no request: the expert rows its first rank "
                         f"counted, of ranks {list(spread)}: {rows}")
    return int(routed)


def stop(server, several):
    """SIGTERM: one rank ends at once; under mpirun the job ends non-zero
    (the ranks cannot drain without each other, moe-serve.cpp)."""
    server.proc.terminate()
    code = server.proc.wait(timeout=60)
    if not several and code != 0:
        raise SystemExit(f"the server exited {code}\n" + server.stderr())


def main():
    bin_dir, mpirun, goldens, kjv, work = sys.argv[1:6]
    ranks = [int(r) for r in sys.argv[6].split(",")]
    os.makedirs(work, exist_ok=True)
    compile_ = os.path.join(bin_dir, "moe-compile")
    checkpoints = []
    for m in MODELS:
        golden_text_checkpoint(os.path.join(goldens, m), os.path.join(work, m, "ckpt"))
        checkpoints.append((m, os.path.join(work, m, "ckpt")))
    subprocess.run([sys.executable, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                 "make-text-checkpoint.py"),
                    os.path.join(work, "kjv-moe", "ckpt")], check=True)
    checkpoints.append(("kjv-moe", os.path.join(work, "kjv-moe", "ckpt")))
    for name, ckpt in checkpoints:
        base = os.path.join(work, name)
        alone = os.path.join(base, "alone")
        # The trained example's plans hold 150 tokens more for the client
        # that leaves mid-stream (the goldens' 128 tokens run out first).
        context = "256" if name == "kjv-moe" else "128"
        leaves = name == "kjv-moe"
        subprocess.run([compile_, ckpt, "-o", alone, "--max-context", context], check=True,
                       capture_output=True)
        server = Server(bin_dir, alone, os.path.join(base, "serve-alone"), *FLAGS, name=name)
        want = answers(server, name)
        after = leave_mid_stream(server, name) if leaves else None
        stop(server, False)
        for n in ranks:
            # Tensor-parallel groups of every size dividing n (--ep 4 --tp 2:
            # attention split inside {0, 1} and {2, 3}, experts over all 4).
            layouts = [(f"ep {n}", ["--ep", str(n)]), (f"tp {n}", ["--tp", str(n)])] + [
                (f"ep {n} + tp {m}", ["--ep", str(n), "--tp", str(m)])
                for m in range(n, 1, -1) if n % m == 0] + [
                (f"ep {n} + dp-attention", ["--ep", str(n), "--dp-attention"])]
            # Two-batch overlap (4 ranks or more; the optimized build's
            # 4-rank run) of each layout's collectives: the all-reduces of
            # experts, of tensor-parallel groups of half the ranks and of
            # every rank, and the row exchange of data-parallel attention.
            if n >= 4:
                m = n // 2
                two = ["--overlap", "two-batch"]
                layouts += [(f"ep {n} + two-batch", ["--ep", str(n), *two]),
                            (f"ep {n} + tp {m} + two-batch", ["--ep", str(n), "--tp", str(m), *two]),
                            (f"tp {n} + two-batch", ["--tp", str(n), *two]),
                            (f"ep {n} + dp-attention + two-batch",
                             ["--ep", str(n), "--dp-attention", *two])]
                # Data-parallel groups of half the ranks, each attending
                # (tensor-parallel inside) for the requests rank 0 gives it.
                dp = ["--ep", str(n), "--tp", str(m), "--dp-attention"]
                layouts += [(f"ep {n} + tp {m} + dp-attention", dp),
                            (f"ep {n} + tp {m} + dp-attention + two-batch", [*dp, *two])]
            for label, flags in layouts:
                plan = os.path.join(base, label.replace(" ", "").replace("+", "-"))
                subprocess.run([compile_, ckpt, "-o", plan, "--max-context", context, *flags],
                               check=True, capture_output=True)
                server = Server(bin_dir, plan, os.path.join(base, "serve-" + os.path.basename(plan)),
                                *FLAGS, name=name, launcher=mpirun.split() + ["-np", str(n)])
                got = answers(server, name)
                # Each data group's first rank counts its group's picks.
                size = int(flags[flags.index("--tp") + 1]) if "--tp" in flags else 1
                spread = range(0, n, size) if "dp-attention" in label else ()
                routed = rank_metrics(server, n, f"{name} {label}", spread)
                got_after = leave_mid_stream(server, name) if leaves else None
                stop(server, True)
                if got_after != after:
                    raise SystemExit(f"{name} {label}: after a client left: {got_after!r} != "
                                     f"{after!r}")
                diff = [i for i in range(len(want)) if got[i] != want[i]]
                if diff:
                    i = diff[0]
                    raise SystemExit(f"{name} {label}: {len(diff)} of 16 answers differ from "
                                     f"one rank's; request {i}: {got[i]!r} != {want[i]!r}")
                tokens = sum(len(t) for t, _ in got)
                print(f"{name} {label}: 16 answers (8 streamed, 8 chats) equal one rank's "
                      f"({tokens} characters); /metrics per rank ({routed} expert rows)" +
                      ("; a client left mid-stream: blocks freed, next answer equal"
                       if leaves else ""))


if __name__ == "__main__":
    main()
