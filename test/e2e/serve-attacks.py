#!/usr/bin/env python3
"""moe-serve attacked as a hostile client or an unlucky operator would:
    serve-attacks.py BIN-DIR PLAN-DIR WORK-DIR [CASE ...]

After every case the server must still be alive, answer a good request
with the right text (moe-run's, in process) within 2 s, show its KV blocks
back at 0 in /metrics, and hold its resident memory within 50 MB of where
it started. The cases:
  slowloris    200 connections dripping one header byte a second
  chunked      a 100 MB chunked body (the body limit is 1 MiB)
  headers      1,000,000 header lines
  deep         JSON 100,000 deep in every field that takes arrays or objects
  pipelining   three requests in one packet, answered in order
  halfclose    a request whose client shuts its side down, answered
  http10       HTTP/1.0, answered in HTTP/1.0 without chunks, streamed too
  leaving      64 non-streamed requests whose clients leave: all cancelled
  port         a second server on the same port: refused, the first unhurt
Each prints one line; any failure raises."""
import json
import os
import socket
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import serve_common  # noqa: E402
from serve_common import KEY  # noqa: E402

BIN, PLAN, WORK = sys.argv[1:4]
MIB = 1 << 20
# Under ASan (make test-asan) freed memory waits in a quarantine of 256 MB
# before reuse, which the RSS bound would count: the server gets 8 MB.
if "ASAN_OPTIONS" in os.environ:
    os.environ["ASAN_OPTIONS"] += ":quarantine_size_mb=8"
GOOD = {"model": "kjv", "prompt": "And God said", "max_tokens": 12, "temperature": 0}
want = serve_common.moe_run(BIN, PLAN, GOOD["prompt"], GOOD["max_tokens"])["text"]
server = serve_common.Server(BIN, PLAN, os.path.join(WORK, "server"), "--header-timeout", "5")


def raw_request(path, body, version="1.1", extra=""):
    data = json.dumps(body)
    return (f"POST {path} HTTP/{version}\r\nHost: x\r\nAuthorization: Bearer {KEY}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\n{extra}\r\n"
            + data).encode()


def connect(port=None):
    s = socket.create_connection(("127.0.0.1", port or server.port), timeout=10)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


def read_until_closed(s, limit=1 << 24):
    out = b""
    while len(out) < limit:
        try:
            b = s.recv(65536)
        except (ConnectionResetError, socket.timeout):
            break
        if not b:
            break
        out += b
    return out


def responses(data):
    """Splits HTTP/1.1 responses with Content-Length; (status, body) each.
    Interim 1xx responses (a server's 100 Continue) are skipped, as clients
    do, wherever they come."""
    out = []
    while data:
        head, _, rest = data.partition(b"\r\n\r\n")
        lines = head.decode().split("\r\n")
        status = int(lines[0].split()[1])
        if 100 <= status < 200:
            data = rest
            continue
        length = next(int(l.split(":")[1]) for l in lines if l.lower().startswith("content-length"))
        out.append((status, rest[:length]))
        data = rest[length:]
    return out


def good_request(s=None):
    """A good request answered right, within 2 s."""
    t0 = time.time()
    status, r = (s or server).post("/v1/completions", GOOD, timeout=2)
    took = time.time() - t0
    assert status == 200, (status, r)
    assert r["choices"][0]["text"] == want, (r["choices"][0]["text"], want)
    assert took < 2, took
    return took


server.post("/v1/completions", GOOD)  # warm: the first request sizes the buffers
rss0 = server.metric("process_resident_memory_bytes")


def healthy(case, detail, s=None, base=None):
    s, base = s or server, base or rss0
    took = good_request(s)
    kv = s.wait_metric("moe_kv_blocks_used", 0)
    rss = s.metric("process_resident_memory_bytes")
    assert s.proc.poll() is None, "the server died"
    assert kv == 0, (case, "KV blocks still used", kv)
    assert rss - base < 50 * MIB, (case, "resident memory grew", (rss - base) / MIB)
    print(f"{case}: {detail}; then a good request in {took * 1e3:.0f} ms, KV 0, "
          f"RSS {(rss - base) / MIB:+.1f} MB")


def case_slowloris():
    socks, stop = [], threading.Event()
    for _ in range(200):
        s = connect()
        s.sendall(b"POST /v1/completions HTTP/1.1\r\n")
        socks.append(s)

    def drip():
        while not stop.is_set():
            for s in socks:
                try:
                    s.sendall(b"X")
                except OSError:
                    pass
            stop.wait(1)

    t = threading.Thread(target=drip)
    t.start()
    took = good_request()  # while they drip
    stop.wait(6)  # past --header-timeout 5: every one is closed
    stop.set()
    t.join()
    closed = 0
    for s in socks:
        s.settimeout(2)
        try:
            closed += s.recv(1) == b""
        except (ConnectionResetError, socket.timeout):
            closed += 1
        s.close()
    assert closed == 200, closed
    healthy("slowloris", f"200 dripping connections: a good request in {took * 1e3:.0f} ms "
                         f"meanwhile, all 200 closed at the header time")


def flood(head, piece, times):
    """Sends `head`, then `piece` up to `times` times (the server may stop
    reading); the answer it gave."""
    s = connect()
    s.sendall(head)
    try:
        for _ in range(times):
            s.sendall(piece)
    except (BrokenPipeError, ConnectionResetError):
        pass
    s.settimeout(5)
    answer = read_until_closed(s)
    s.close()
    return answer


def case_chunked():
    answer = flood(f"POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {KEY}\r\n"
                   f"Transfer-Encoding: chunked\r\n\r\n".encode(),
                   b"%x\r\n" % 65536 + b"a" * 65536 + b"\r\n", 100 * MIB // 65536)
    assert answer.startswith(b"HTTP/1.1 413"), answer[:200]
    healthy("chunked", "a 100 MB chunked body: 413 at the 1 MiB limit")


def case_headers():
    answer = flood(b"GET /health HTTP/1.1\r\nHost: x\r\n", b"X-Filler: 0123456789\r\n" * 10000,
                   100)
    assert answer.startswith(b"HTTP/1.1 431"), answer[:200]
    healthy("headers", "1,000,000 header lines: 431 at the 16 KiB limit")


def nest(depth, leaf=1, obj=False):
    return ('{"a":' * depth + json.dumps(leaf) + "}" * depth) if obj \
        else ("[" * depth + json.dumps(leaf) + "]" * depth)


def case_deep():
    deep, fields = 100000, 0
    chat = {"model": "kjv", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}
    bodies = []
    for obj in (False, True):
        d = nest(deep, obj=obj)
        for key in ("prompt", "stop", "stop_token_ids", "stream_options", "logit_bias",
                    "response_format", "metadata", "seed"):
            bodies.append(("/v1/completions", json.dumps(GOOD)[:-1] + f', "{key}": {d}}}'))
        for key in ("messages", "tools", "chat_template_kwargs", "tool_choice", "metadata"):
            bodies.append(("/v1/chat/completions", json.dumps(chat)[:-1] + f', "{key}": {d}}}'))
        # A message's own keys and content parts.
        bodies.append(("/v1/chat/completions", json.dumps(
            {**chat, "messages": "@"}).replace('"@"', f'[{{"role": "user", "content": {d}}}]')))
        bodies.append(("/v1/chat/completions", json.dumps(
            {**chat, "messages": "@"}).replace('"@"', f'[{{"role": "user", "content": "x", '
                                                      f'"extra": {d}}}]')))
        bodies.append(("/tokenize", f'{{"prompt": {d}}}'))
        bodies.append(("/detokenize", f'{{"tokens": {d}}}'))
        bodies.append(("/v1/completions", d))  # the body itself
    for path, body in bodies:
        status, text = server.request("POST", path, raw=body)
        assert status == 400 and "nests more than" in text, (path, status, text[:300])
        fields += 1
    healthy("deep", f"{fields} bodies nesting {deep} deep (arrays and objects): 400 each")


def case_pipelining():
    s = connect()
    s.sendall(raw_request("/v1/completions", GOOD) + b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n"
              + raw_request("/v1/completions", {**GOOD, "max_tokens": 3}, extra="Connection: close\r\n"))
    got = responses(read_until_closed(s))
    s.close()
    assert [st for st, _ in got] == [200, 200, 200], got
    assert json.loads(got[0][1])["choices"][0]["text"] == want
    assert json.loads(got[1][1])["status"] == "ok"
    assert json.loads(got[2][1])["usage"]["completion_tokens"] == 3
    healthy("pipelining", "three requests in one packet: three answers in order")


def case_halfclose():
    s = connect()
    s.sendall(raw_request("/v1/completions", GOOD) + raw_request("/v1/completions", GOOD))
    s.shutdown(socket.SHUT_WR)
    data = read_until_closed(s)
    s.close()
    got = responses(data)  # with the 100 Continue probes that may come between
    assert [st for st, _ in got] == [200, 200], got
    assert all(json.loads(b)["choices"][0]["text"] == want for _, b in got)
    healthy("halfclose", "two requests, then the client's FIN: both answered")


def case_http10():
    s = connect()
    s.sendall(raw_request("/v1/completions", GOOD, version="1.0"))
    data = read_until_closed(s)
    s.close()
    assert data.startswith(b"HTTP/1.0 200"), data[:100]
    assert json.loads(data.split(b"\r\n\r\n", 1)[1])["choices"][0]["text"] == want
    s = connect()
    s.sendall(raw_request("/v1/completions", {**GOOD, "stream": True}, version="1.0"))
    data = read_until_closed(s)
    s.close()
    head, body = data.split(b"\r\n\r\n", 1)
    assert head.startswith(b"HTTP/1.0 200") and b"chunked" not in head.lower(), head
    events = [json.loads(e[6:]) for e in body.decode().split("\n\n")
              if e.startswith("data: {")]
    assert "".join(e["choices"][0]["text"] for e in events) == want, events
    assert body.decode().rstrip().endswith("data: [DONE]")
    healthy("http10", "HTTP/1.0 answered in HTTP/1.0, streamed to the close without chunks")


def case_leaving():
    # A server of its own whose steps take two tokens: the 64 requests of
    # 240 tokens would run for seconds more when their clients leave (the
    # oldest two decode at a time: a few finish first).
    slow = serve_common.Server(BIN, PLAN, os.path.join(WORK, "slow"), "--budget", "2")
    slow.post("/v1/completions", GOOD)
    base = slow.metric("process_resident_memory_bytes")
    body = {**GOOD, "prompt": "And", "max_tokens": 240, "ignore_eos": True,
            "temperature": 0.8, "seed": 1}
    socks = []
    for _ in range(64):
        s = connect(slow.port)
        s.sendall(raw_request("/v1/completions", body))
        socks.append(s)
    # They run: wait until the server has read every request (a loaded
    # sanitizer build may take more than a moment), or a client's close
    # would end a connection that never became a request.
    deadline = time.time() + 30
    while time.time() < deadline:
        m = slow.metrics()
        known = (m["moe_queue_length"] + m["moe_running_sequences"] + m["moe_swapped_sequences"] +
                 m.get('moe_requests_total{outcome="completed"}', 1) - 1)
        if known >= 64:
            break
        time.sleep(0.05)
    busy = slow.metric("moe_kv_blocks_used")
    for s in socks:
        s.close()
    t0 = time.time()
    kv = slow.wait_metric("moe_kv_blocks_used", 0, seconds=20)
    freed = time.time() - t0
    # Every request ended, cancelled or finished (a slow build may still be
    # reading some when the pool is empty).
    deadline = time.time() + 30
    while True:
        m = slow.metrics()
        cancelled = m["moe_engine_cancelled_total"]
        done = m['moe_requests_total{outcome="completed"}'] - 1  # the warm-up's
        if cancelled + done >= 64 or time.time() > deadline:
            break
        time.sleep(0.05)
    assert busy > 0 and kv == 0, (busy, kv)
    assert cancelled + done == 64 and cancelled >= 32, (cancelled, done)
    healthy("leaving", f"64 non-streamed requests whose clients left: {busy:.0f} KV blocks "
                       f"freed in {freed:.1f} s, {cancelled:.0f} cancelled, the {done:.0f} "
                       f"that finished first answered to no one", slow, base)
    slow.stop()


def case_port():
    second = subprocess.run([os.path.join(BIN, "moe-serve"), PLAN, "--port", str(server.port)],
                            capture_output=True, text=True, timeout=120)
    assert second.returncode != 0, second
    assert "in use" in second.stderr, second.stderr
    healthy("port", "a second server on the same port refused: "
                    + second.stderr.strip().splitlines()[-1][:60] + "...")


for case in sys.argv[4:] or ["slowloris", "chunked", "headers", "deep", "pipelining",
                             "halfclose", "http10", "leaving", "port"]:
    globals()["case_" + case]()
server.stop()
