"""llama.cpp for our benchmarks: its build, its GGUFs' bytes, and one measurement of
each figure by llama.cpp and by us (bench-vs-llamacpp.py, bench-real-size.py).

llama.cpp is llama-cpp-python's source distribution (pip download; nothing of it is
committed), its vendored llama.cpp built natively into build-llamacpp/ (ignored).
"""
import collections
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tarfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
LLAMACPP_VERSION = "0.3.16"  # llama-cpp-python sdist; vendors llama.cpp commit 4227c9b
LLAMA_DIR = os.path.join(ROOT, "build-llamacpp")
CMAKE_FLAGS = ["-DCMAKE_BUILD_TYPE=Release", "-DGGML_NATIVE=ON", "-DLLAMA_CURL=OFF",
               "-DLLAMA_BUILD_TESTS=OFF", "-DLLAMA_BUILD_EXAMPLES=OFF",
               "-DLLAMA_BUILD_SERVER=OFF", "-DBUILD_SHARED_LIBS=OFF"]
TARGETS = ["llama-bench", "llama-batched-bench"]

TIMEOUT = 1800  # seconds, any one command


# The calling tool's name, the prefix of its errors.
PROGRAM = os.path.basename(sys.argv[0]).removesuffix(".py")


def fail(message):
    sys.exit(f"{PROGRAM}: error: {message}")


def log(message):
    print(message, flush=True)


class Ran(collections.namedtuple("Ran", "stdout stderr seconds peak_rss_mib faults")):
    """A finished command: its output, wall time, peak resident memory and page
    faults ({"minor": n, "major": n}, from wait4)."""


def run(cmd, what, env=None, cwd=None, log_file=None):
    """Runs cmd (a Ran). On failure one line: what failed and its last error line."""
    t0 = time.monotonic()
    try:
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env=env, cwd=cwd)
    except FileNotFoundError:
        fail(f"{what}: {cmd[0]} not found")
    # Read both pipes on threads and reap the child with wait4, whose
    # rusage is this child's alone (its peak RSS).
    outputs = [[], []]
    readers = [threading.Thread(target=lambda f, into: into.append(f.read()), args=(f, into))
               for f, into in ((p.stdout, outputs[0]), (p.stderr, outputs[1]))]
    for t in readers:
        t.start()
    timer = threading.Timer(TIMEOUT, p.kill)
    timer.start()
    _, status, usage = os.wait4(p.pid, 0)
    timed_out = not timer.is_alive()
    timer.cancel()
    for t in readers:
        t.join()
    p.returncode = os.waitstatus_to_exitcode(status)
    if timed_out:
        fail(f"{what}: no result after {TIMEOUT} s ({' '.join(cmd)})")
    r = subprocess.CompletedProcess(cmd, p.returncode, "".join(outputs[0]), "".join(outputs[1]))
    rss_mib = usage.ru_maxrss / 1024
    faults = {"minor": usage.ru_minflt, "major": usage.ru_majflt}
    if log_file:
        with open(log_file, "a") as f:
            f.write(f"$ {' '.join(cmd)}\n{r.stdout}{r.stderr}\n")
    if r.returncode != 0:
        lines = [l for l in (r.stderr + r.stdout).splitlines() if l.strip()]
        last = lines[-1].strip() if lines else "no output"
        more = f" (full output: {log_file})" if log_file else ""
        fail(f"{what} exited {r.returncode}: {last}{more}")
    return Ran(r.stdout, r.stderr, time.monotonic() - t0, rss_mib, faults)


def loadavg():
    return float(open("/proc/loadavg").read().split()[0])


# ---- stage 1: llama.cpp ------------------------------------------------------------------


def llama_src(version):
    return os.path.join(LLAMA_DIR, "src", f"llama_cpp_python-{version}", "vendor", "llama.cpp")


def install_llamacpp(version):
    """Downloads the llama-cpp-python sdist, builds its vendored llama.cpp. Idempotent."""
    src, build = llama_src(version), os.path.join(LLAMA_DIR, "build")
    stamp = os.path.join(LLAMA_DIR, "installed.json")
    want = {"version": version, "cmake_flags": CMAKE_FLAGS, "targets": TARGETS}
    bins = [os.path.join(build, "bin", t) for t in TARGETS]
    if os.path.exists(stamp) and all(os.access(b, os.X_OK) for b in bins):
        try:
            if json.load(open(stamp)) == want:
                log(f"llama.cpp: llama-cpp-python {version} already built in {build}")
                return build
        except ValueError:
            pass
    os.makedirs(LLAMA_DIR, exist_ok=True)
    sdist_dir = os.path.join(LLAMA_DIR, "sdist")
    sdist = os.path.join(sdist_dir, f"llama_cpp_python-{version}.tar.gz")
    if not os.path.exists(sdist):
        log(f"llama.cpp: pip download llama-cpp-python=={version} (source distribution) ...")
        run([sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
             f"llama-cpp-python=={version}", "-d", sdist_dir], "pip download llama-cpp-python")
        if not os.path.exists(sdist):
            fail(f"pip download left no {sdist}")
    if not os.path.exists(os.path.join(src, "CMakeLists.txt")):
        log(f"llama.cpp: extracting vendor/llama.cpp from {os.path.basename(sdist)} ...")
        prefix = f"llama_cpp_python-{version}/vendor/llama.cpp/"
        with tarfile.open(sdist) as tar:
            members = [m for m in tar.getmembers() if m.name.startswith(prefix)]
            if not members:
                fail(f"{sdist} has no {prefix}")
            tar.extractall(os.path.join(LLAMA_DIR, "src"), members=members, filter="data")
    generator = ["-G", "Ninja"] if shutil.which("ninja") else []
    build_log = os.path.join(LLAMA_DIR, "build.log")
    log(f"llama.cpp: cmake {' '.join(CMAKE_FLAGS)} (log: {build_log}) ...")
    t0 = time.monotonic()
    run(["cmake", "-S", src, "-B", build] + generator + CMAKE_FLAGS, "cmake (llama.cpp)",
        log_file=build_log)
    log(f"llama.cpp: building {' '.join(TARGETS)} with 2 jobs (a few minutes) ...")
    run(["cmake", "--build", build, "-j", "2", "--target"] + TARGETS, "building llama.cpp",
        log_file=build_log)
    for b in bins:
        if not os.access(b, os.X_OK):
            fail(f"the llama.cpp build left no {b}")
    json.dump(want, open(stamp, "w"), indent=1)
    log(f"llama.cpp: built in {time.monotonic() - t0:.0f} s")
    return build


def llamacpp_isa():
    """What -march=native enables on this machine: the ISA of llama.cpp's build."""
    try:
        out = subprocess.run(["cc", "-march=native", "-dM", "-E", "-x", "c", "/dev/null"],
                             capture_output=True, text=True).stdout
    except FileNotFoundError:
        return "?"
    names = sorted({l.split()[1].strip("_") for l in out.splitlines()
                    if l.startswith("#define __") and any(
                        k in l.split()[1] for k in ("AVX", "AMX", "FMA__", "F16C"))})
    return " ".join(names)


def import_gguf_py(path=None):
    """llama.cpp's gguf-py package (GGUFWriter, GGUFReader), from `path` or the
    vendored copy of LLAMACPP_VERSION, before any other installed one."""
    path = path or os.path.join(llama_src(LLAMACPP_VERSION), "gguf-py")
    if not os.path.isfile(os.path.join(path, "gguf", "__init__.py")):
        fail(f"no llama.cpp gguf-py at {path}: run make bench-vs-llamacpp or make "
             "bench-real-size once to fetch llama.cpp")
    if path not in sys.path:
        sys.path.insert(0, path)
    try:
        import gguf
    except ImportError as e:
        fail(f"cannot import gguf from {path}: {e}")
    return gguf


def gguf_bytes(path, config, kv_elem_bytes=2):
    """Bytes a decode token reads from this GGUF (moe-roofline's rule): dense tensors whole,
    one row of the token embedding (the whole table too when it is tied to the LM head),
    top_k / num_experts of the expert stacks, and per context position the KV rows
    (llama.cpp's default f16)."""
    reader = import_gguf_py().GGUFReader(path)
    dense = experts = embd = 0
    for t in reader.tensors:
        if "_exps" in t.name:
            experts += int(t.n_bytes)
        elif t.name == "token_embd.weight":
            embd = int(t.n_bytes)
        else:
            dense += int(t.n_bytes)
    head_dim = config.get("head_dim", config["hidden_size"] // config["num_attention_heads"])
    kv = config["num_hidden_layers"] * 2 * config["num_key_value_heads"] * head_dim * kv_elem_bytes
    if not any(t.name == "output.weight" for t in reader.tensors):
        dense += embd  # tied: the LM head reads the table
    return {"dense": dense, "experts": experts, "embedding_row": embd // config["vocab_size"],
            "kv_per_position": kv, "file": os.path.getsize(path)}


def expert_fraction(config, batch, identical):
    k, e = config["num_experts_per_tok"], config["num_experts"]
    return k / e if identical else 1 - (1 - k / e) ** batch


def step_bytes(b, config, batch, identical, context):
    """Bytes one decode step of `batch` sequences reads (GGUF inventory b)."""
    return (b["dense"] + batch * b["embedding_row"] +
            b["experts"] * expert_fraction(config, batch, identical) +
            batch * b["kv_per_position"] * context)


# ---- stage 5: one measurement each ---------------------------------------------------------


def process(ran):
    """What every measurement reports of the process that made it."""
    return {"process_seconds": ran.seconds, "peak_rss_mib": ran.peak_rss_mib,
            "page_faults": ran.faults}


class Runner:
    def __init__(self, a, llama_bin, ours_bin, work):
        self.a, self.llama_bin, self.bin, self.work = a, llama_bin, ours_bin, work
        self.log_file = os.path.join(work, "commands.log")  # every command and its output
        open(self.log_file, "w").close()
        self.t = str(a.threads)

    def _llama_bench(self, gguf, args):
        ran = run([os.path.join(self.llama_bin, "llama-bench"), "-m", gguf,
                   "-t", self.t, "-o", "json"] + args, "llama-bench",
                  log_file=self.log_file)
        try:
            rows = json.loads(ran.stdout)
        except ValueError:
            fail(f"llama-bench printed no JSON (see {self.log_file})")
        return rows[0], process(ran)

    def llama_prefill(self, gguf, tokens):
        row, proc = self._llama_bench(gguf, ["-p", str(tokens), "-n", "0", "-r", "2"])
        return {"tokens_per_second": max(row["samples_ts"]), "samples_ts": row["samples_ts"],
                "build_commit": row.get("build_commit"), **proc}

    def llama_decode1(self, gguf, context, steps):
        row, proc = self._llama_bench(gguf, ["-p", "0", "-n", str(steps), "-d", str(context),
                                             "-r", "2"])
        return {"tokens_per_second": max(row["samples_ts"]), "samples_ts": row["samples_ts"],
                **proc}

    def llama_first_prefill(self, gguf, tokens):
        row, proc = self._llama_bench(gguf, ["-p", str(tokens), "-n", "0", "-r", "1",
                                             "--no-warmup"])
        return {"tokens_per_second": row["samples_ts"][0],
                "seconds": row["samples_ns"][0] / 1e9, **proc}

    def llama_batched(self, gguf, batch, prompt, steps):
        ctx = max(4096, batch * (prompt + steps))
        ran = run([os.path.join(self.llama_bin, "llama-batched-bench"), "-m", gguf,
                   "-t", self.t, "-c", str(ctx), "-b", "2048", "-ub", "512",
                   "-npp", str(prompt), "-ntg", str(steps), "-npl", str(batch),
                   "--output-format", "jsonl"], "llama-batched-bench",
                  log_file=self.log_file)
        rows = [json.loads(l) for l in (ran.stdout + ran.stderr).splitlines()
                if l.startswith('{"n_kv_max"')]
        if not rows:
            fail(f"llama-batched-bench -npl {batch} printed no result (see {self.log_file})")
        r = rows[0]
        return {"tokens_per_second": r["speed_tg"], "raw": r, **process(ran)}

    def _roofline(self, plan, args):
        ran = run([os.path.join(self.bin, "moe-roofline"), plan, "--threads",
                   self.t, "--json", "-"] + args, "moe-roofline",
                  log_file=self.log_file)
        return json.loads(ran.stdout), process(ran)

    def ours_prefill(self, plan, tokens):
        d, proc = self._roofline(plan, ["--only", "prefill", "--prefill-tokens", str(tokens),
                                        "--repeats", "1"])
        p = d["plan"]
        return {"tokens_per_second": p["prefill_tokens"] / p["prefill_seconds"],
                "seconds": p["prefill_seconds"], "triad_gbps": d["triad_gbps"],
                "matmul_peak_gflops": d["matmul_peak_gflops"],
                "peak_fraction": p["prefill_peak_fraction"], "kernel_isa": d["kernel_isa"],
                **proc}

    def ours_decode1(self, plan, context, steps):
        d, proc = self._roofline(plan, ["--only", "decode1", "--prompt-len", str(context),
                                        "--decode-steps", str(steps), "--repeats", "2"])
        p = d["plan"]
        return {"tokens_per_second": p["decode1_tokens_per_second"],
                "bytes_per_token": p["bytes_per_token"], "triad_gbps": d["triad_gbps"],
                "roofline_fraction": p["roofline_fraction"], "kernel_isa": d["kernel_isa"],
                **proc}

    def ours_batched(self, plan, batch, prompt, steps):
        d, proc = self._roofline(plan, ["--only", "decode-batch", "--batch", str(batch),
                                        "--prompt-len", str(prompt), "--decode-steps", str(steps),
                                        "--repeats", "1"])
        p = d["plan"]
        return {"tokens_per_second": p["decode_batch_tokens_per_second"],
                "bytes_per_token_batch1": p["bytes_per_token"],
                "bytes_per_step": p["decode_batch_step_bytes"],
                "bound_tokens_per_second": p["decode_batch_bound_tokens_per_second"],
                "bound": p["decode_batch_bound"],
                "roofline_fraction": p["decode_batch_bound_fraction"],
                "triad_gbps": d["triad_gbps"], "kernel_isa": d["kernel_isa"],
                **proc}

    def ours_batched_identical(self, plan, batch, prompt, steps):
        workload = os.path.join(self.work, f"identical-{batch}.jsonl")
        with open(workload, "w") as f:
            for _ in range(batch):
                f.write(json.dumps({"prompt_tokens": [0] * prompt, "output_len": steps + 1}) + "\n")
        # KV blocks (16 tokens) for every sequence at once: no preemption.
        blocks = batch * ((prompt + steps + 1 + 15) // 16 + 1)
        ran = run([os.path.join(self.bin, "moe-bench"), plan, "--concurrency",
                   str(batch), "--workload", workload, "--ignore-eos", "--threads",
                   self.t, "--kv-blocks", str(blocks), "--json", "-"], "moe-bench",
                  log_file=self.log_file)
        level = json.loads(ran.stdout)["levels"][0]
        if level["completed"] != batch:
            fail(f"moe-bench completed {level['completed']} of {batch} requests")
        return {"tokens_per_second": level["decode_tokens"] / level["decode_seconds"],
                "decode_tokens": level["decode_tokens"], "decode_seconds": level["decode_seconds"],
                **process(ran)}

    def ours_first_prefill(self, plan, vocab, tokens):
        rng = random.Random(5)
        ids = ",".join(str(rng.randrange(vocab)) for _ in range(tokens))
        ran = run([os.path.join(self.bin, "moe-run"), plan, "--prompt-tokens", ids,
                   "--max-new-tokens", "1", "--ignore-eos", "--threads", self.t,
                   "--json", "-"], "moe-run", log_file=self.log_file)
        ms = json.loads(ran.stdout)["time_to_first_token_ms"]
        return {"tokens_per_second": tokens / (ms / 1e3), "seconds": ms / 1e3,
                **process(ran)}


def median_min_max(values):
    return statistics.median(values), min(values), max(values)
