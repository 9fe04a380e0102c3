"""What the moe-serve end-to-end checks share: a server started on a free
port with an API key, a client for it (http.client), and moe-run's
in-process generations to compare with."""
import http.client
import json
import os
import signal
import socket
import subprocess
import time

KEY = "sk-test-0123456789"


class Server:
    """moe-serve on PLAN, listening on a free port, with the key KEY (under
    `launcher`, e.g. mpirun -np N, when given)."""

    def __init__(self, bin_dir, plan, work, *flags, name="kjv", key=True, wait_ready=True,
                 launcher=()):
        os.makedirs(work, exist_ok=True)
        self.bin_dir, self.plan, self.name = bin_dir, plan, name
        self.port_file = os.path.join(work, "port")
        if os.path.exists(self.port_file):
            os.remove(self.port_file)
        args = [*launcher, os.path.join(bin_dir, "moe-serve"), plan, "--port", "0", "--port-file",
                self.port_file, "--model-name", name, *flags]
        self.key = KEY if key else None
        if key:
            keys = os.path.join(work, "keys")
            with open(keys, "w") as f:
                f.write("# test keys\n" + KEY + "\n")
            os.chmod(keys, 0o600)
            args += ["--api-key-file", keys]
        self.log = open(os.path.join(work, "server.log"), "w+")
        self.proc = subprocess.Popen(args, stderr=self.log, stdout=self.log)
        for _ in range(1200):
            if os.path.exists(self.port_file) and open(self.port_file).read().strip():
                self.port = int(open(self.port_file).read())
                break
            if self.proc.poll() is not None:
                raise SystemExit("moe-serve exited: " + self.stderr())
            time.sleep(0.05)
        else:
            raise SystemExit("moe-serve did not start: " + self.stderr())
        if wait_ready:
            self.wait_healthy()

    def wait_healthy(self, seconds=60):
        """Waits for /health to say ok (the weights verified)."""
        deadline = time.time() + seconds
        while time.time() < deadline:
            status, body = self.request("GET", "/health", key=None)
            if status == 200:
                return
            time.sleep(0.02)
        raise SystemExit("moe-serve never became healthy: " + body + "\n" + self.stderr())

    def stderr(self):
        self.log.flush()
        self.log.seek(0)
        return self.log.read()

    def request(self, method, path, body=None, key="default", raw=None, headers=None,
                timeout=120):
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        h = dict(headers or {})
        key = self.key if key == "default" else key
        if key:
            h["Authorization"] = "Bearer " + key
        data = raw if raw is not None else (json.dumps(body) if body is not None else None)
        if data is not None:
            h["Content-Type"] = "application/json"
        c.request(method, path, body=data, headers=h)
        r = c.getresponse()
        text = r.read().decode()
        c.close()
        return r.status, text

    def post(self, path, body, **kw):
        status, text = self.request("POST", path, body, **kw)
        return status, json.loads(text) if text else None

    def stream(self, path, body):
        """The SSE events of a streaming request, parsed."""
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=120)
        h = {"Content-Type": "application/json"}
        if self.key:
            h["Authorization"] = "Bearer " + self.key
        c.request("POST", path, body=json.dumps(body), headers=h)
        r = c.getresponse()
        assert r.status == 200, (r.status, r.read())
        assert r.getheader("Content-Type").startswith("text/event-stream")
        events = []
        for line in r.read().decode().split("\n\n"):
            if line.startswith("data: "):
                events.append(line[6:] if line[6:] == "[DONE]" else json.loads(line[6:]))
        c.close()
        return events

    def metrics(self):
        status, text = self.request("GET", "/metrics", key=None)
        assert status == 200, status
        values = {}
        for line in text.splitlines():
            if line and not line.startswith("#"):
                name, value = line.rsplit(" ", 1)
                values[name] = float(value)
        return values

    def metric(self, name):
        values = self.metrics()
        assert name in values, name + " not in /metrics"
        return values[name]

    def wait_metric(self, name, value, seconds=10):
        """Waits for a gauge to reach `value`; its last reading."""
        deadline = time.time() + seconds
        while True:
            got = self.metric(name)
            if got == value or time.time() > deadline:
                return got
            time.sleep(0.05)

    def leave_stream(self, body, events=3):
        """POSTs a streamed completion on a raw socket and closes it after
        `events` server-sent events (a client that goes away); the KV
        blocks in use then, and once they are back to the count before
        (waiting up to 10 s): (before, during, after)."""
        before = self.metric("moe_kv_blocks_used")
        sock = socket.create_connection(("127.0.0.1", self.port))
        data = json.dumps(body)
        sock.sendall((f"POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "
                      f"{self.key}\r\nContent-Type: application/json\r\nContent-Length: "
                      f"{len(data)}\r\n\r\n" + data).encode())
        seen = b""
        while seen.count(b"data: ") < events:
            chunk = sock.recv(4096)
            if not chunk:
                raise SystemExit("the server closed the stream early: " + seen.decode())
            seen += chunk
        during = self.metric("moe_kv_blocks_used")
        sock.close()
        for _ in range(200):
            if self.metric("moe_kv_blocks_used") == before:
                break
            time.sleep(0.05)
        return before, during, self.metric("moe_kv_blocks_used")

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        code = self.proc.wait(timeout=60)
        assert code == 0, (code, self.stderr())


def moe_run(bin_dir, plan, prompt, n, temperature=0.0, seed=0, stop=None, extra=()):
    """The in-process generation: moe-run on the same plan (--json)."""
    cmd = [os.path.join(bin_dir, "moe-run"), plan, "--max-new-tokens", str(n),
           "--temperature", str(temperature), "--seed", str(seed), "--json", "-", *extra]
    cmd += ["--prompt-tokens", ",".join(map(str, prompt))] if isinstance(prompt, list) \
        else ["--prompt", prompt]
    for s in stop or []:
        cmd += ["--stop", s]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out)
