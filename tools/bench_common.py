"""What the benchmark scripts share (standard library only)."""
import subprocess
import sys

# As test/lit.cfg.py's %mpirun: oversubscribed loopback ranks that yield
# when idle (this machine has fewer cores than ranks).
MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe", "--mca",
          "btl_vader_single_copy_mechanism", "none", "--mca", "mpi_yield_when_idle", "1"]


def cpu_model():
    """This machine's CPU, as /proc/cpuinfo names it (for every figure)."""
    return next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo")
                 if l.startswith("model name")), "?")


def run(*cmd):
    """A command's standard output; exits with its error when it fails."""
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"{' '.join(cmd)} exited {r.returncode}: {r.stderr.strip()}")
    return r.stdout
