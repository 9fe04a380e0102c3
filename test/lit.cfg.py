# lit configuration of the moe project: dialect, pass and importer tests
# (test/lit) and end-to-end parity with Hugging Face goldens (test/e2e).
import os
import lit.formats

config.name = "moe"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".mlir", ".test"]
config.excludes = ["Inputs", "regressions", "goldens", "unit", "lit.cfg.py", "lit.site.cfg.py", "kv-dtype.test.py"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.moe_obj_root, "test")

config.environment["PATH"] = os.pathsep.join(
    [config.moe_tools_dir, config.llvm_tools_dir, config.environment.get("PATH", "")])
config.substitutions.append(
    ("%mkckpt", f"{config.python_executable} {config.moe_src_root}/tools/make-tiny-checkpoint.py"))
config.substitutions.append(("%python", config.python_executable))
config.substitutions.append(("%src", config.moe_src_root))
config.substitutions.append(("%goldens", os.path.join(config.moe_src_root, "test/e2e/goldens")))
config.substitutions.append(
    ("%compare-golden", f"{config.python_executable} {config.moe_src_root}/test/e2e/compare-golden.py"))
config.substitutions.append(
    ("%corrupt-plan", f"{config.python_executable} {config.moe_src_root}/test/e2e/corrupt-plan.py"))
config.substitutions.append(("%moe_lib", os.path.join(config.moe_obj_root, "lib")))
config.substitutions.append(("%moe_build", config.moe_obj_root))
config.substitutions.append(("%cmake", config.cmake_command))
# A job of N ranks: %mpirun -np N program (test/CMakeLists.txt, MOE_MPIRUN).
config.substitutions.append(("%mpirun", config.mpirun))
# The sanitizer build (make test-asan) runs every test, but `%if !asan %{
# ... %}` leaves out the few RUN lines that only repeat, many times slower,
# a numerical check the optimized build makes.
asan = "-fsanitize=address" in config.moe_cxx_flags
if asan:
    config.available_features.add("asan")
# The backends this build has: feature "cuda" when it has the CUDA backend
# (MOE_CUDA), "gpu" when that backend can also run here.
import json, subprocess
try:
    _devices = json.loads(subprocess.run(
        [os.path.join(config.moe_tools_dir, "moe-run"), "--list-devices", "--json", "-"],
        capture_output=True, text=True, timeout=60).stdout)
except (OSError, ValueError, subprocess.TimeoutExpired):
    _devices = []
for _d in _devices:
    if _d["name"] == "cuda":
        config.available_features.add("cuda")
        if not _d["unavailable"]:
            config.available_features.add("gpu")
# The multi-rank scripts (overlap, expert-, tensor- and data-parallel) check
# every model family at %e2e_ranks ranks; their 4-rank lines have the check
# prefix NP4. Under ASan only 2 ranks: each MPI job there spends about 1 s
# starting and 1 s in the ranks' leak checks (Open MPI's suppressed leaks),
# and 4 ranks on CI's 2 cores took 64% of those scripts' time, running the
# same code on other splits; the optimized build runs both.
config.substitutions.append(("%e2e_ranks", "2" if asan else "2,4"))
config.substitutions.append(("%e2e_rank_checks", "CHECK" if asan else "CHECK,NP4"))
# The largest of them, for checks that run one job (serve-rank-faults).
config.substitutions.append(("%e2e_most_ranks", "2" if asan else "4"))
# Two "nodes" on loopback (an Open MPI hostfile of 127.0.0.1 and
# 127.0.0.2, launched by tools/fake-node-rsh.sh in UTS namespaces of their
# own): %two_nodes -np 8 runs ranks 0-3 on one and 4-7 on the other. Needs
# unshare (CAP_SYS_ADMIN: root outside a restricted container); feature
# "two-nodes" when it works, else the tests that need it are UNSUPPORTED.
_hostfile = os.path.join(config.moe_obj_root, "test", "two-nodes.hostfile")
try:
    with open(_hostfile, "w") as f:
        f.write("127.0.0.1 slots=4\n127.0.0.2 slots=4\n")
    if subprocess.run(["unshare", "--uts", "true"], capture_output=True, timeout=30).returncode == 0:
        config.available_features.add("two-nodes")
except (OSError, subprocess.TimeoutExpired):
    pass
config.substitutions.append(
    ("%two_nodes", config.mpirun + " --hostfile " + _hostfile + " --mca plm_rsh_agent " +
     os.path.join(config.moe_src_root, "tools", "fake-node-rsh.sh") +
     " --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo"))
# serving.test's continuous batching load: 256 requests on the plan's 256 KV
# blocks; under ASan 64 on 64 (the same pressure), as each of the two runs'
# --verify reruns every request alone, 115 s a run there at 256.
config.substitutions.append(("%serving_load", "--concurrency 64 --requests 64 --kv-blocks 64"
                             if asan else "--concurrency 256 --requests 256"))
# A program built against the installed runtime uses the build's flags (the
# sanitizers' in build-asan/).
config.substitutions.append(("%cxxflags", config.moe_cxx_flags))
config.substitutions.append(("%ldflags", config.moe_exe_linker_flags))
config.substitutions.append(("%check-bpb", f"{config.python_executable} {config.moe_src_root}/test/e2e/check-bpb.py"))
config.substitutions.append(("%check-profile", f"{config.python_executable} {config.moe_src_root}/test/e2e/check-profile.py"))

# lm-evaluation-harness, when tools/setup-lmeval.sh installed it (make
# check-lm-eval): test/e2e/lm-eval.test is UNSUPPORTED without it.
_lm_eval = os.path.join(config.moe_src_root, ".venv-lmeval", "bin", "lm_eval")
if os.access(_lm_eval, os.X_OK):
    config.available_features.add("lm-eval")
    config.substitutions.append(("%lm_eval", _lm_eval))

# %unprivileged runs a command as nobody when the tests run as root, so that
# a file with mode 000 is really unreadable to it (root reads any file).
if os.geteuid() == 0:
    config.substitutions.append(
        ("%unprivileged", "setpriv --reuid=65534 --regid=65534 --clear-groups"))
else:
    config.substitutions.append(("%unprivileged", ""))
