"""Run untrusted Python (model-written code plus its tests) in a separate, limited process.

Limits: wall-clock timeout, CPU seconds and address space (RLIMIT_AS), no stdin, an empty
environment, a fresh temporary working directory, and no network: the child runs in its own
network namespace when `unshare --net` works here (root, Linux), and in every case the socket
module is disabled before the code runs. Not a security boundary against a determined attacker
(use a container for that); enough to keep a model's mistakes from hurting the evaluator.
"""

from __future__ import annotations

import functools
import os
import resource
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass

PRELUDE = """\
import socket as _s
def _no_net(*a, **k):
    raise OSError("network disabled in the sandbox")
_s.socket = _no_net; _s.create_connection = _no_net; _s.getaddrinfo = _no_net
del _s, _no_net
"""


@dataclass(frozen=True)
class SandboxResult:
    passed: bool
    status: str  # passed | failed | timeout | error
    detail: str = ""


@functools.lru_cache(maxsize=1)
def _unshare() -> list[str]:
    exe = shutil.which("unshare")
    if exe is None:
        return []
    try:
        ok = subprocess.run([exe, "--net", "true"], capture_output=True, timeout=5).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        ok = False
    return [exe, "--net"] if ok else []


def _limits(cpu_s: int, memory_mb: int):
    def apply():
        resource.setrlimit(resource.RLIMIT_CPU, (cpu_s, cpu_s))
        resource.setrlimit(resource.RLIMIT_AS, (memory_mb << 20, memory_mb << 20))
        resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, 1 << 20))
        os.setsid()
    return apply


def run_python(code: str, timeout_s: float = 10.0, memory_mb: int = 1024) -> SandboxResult:
    """Exit status 0 = passed. The code's own asserts decide failure."""
    with tempfile.TemporaryDirectory(prefix="macaronic-sandbox-") as tmp:
        script = os.path.join(tmp, "main.py")
        with open(script, "w") as f:
            f.write(PRELUDE + code)
        cmd = _unshare() + [sys.executable, "-I", "-S", script]
        try:
            p = subprocess.run(cmd, cwd=tmp, env={"PATH": "/usr/bin:/bin"}, stdin=subprocess.DEVNULL,
                               capture_output=True, timeout=timeout_s,
                               preexec_fn=_limits(int(timeout_s) + 1, memory_mb))
        except subprocess.TimeoutExpired:
            return SandboxResult(False, "timeout", f"over {timeout_s}s")
        if p.returncode == 0:
            return SandboxResult(True, "passed")
        err = p.stderr.decode(errors="replace").strip().splitlines()
        return SandboxResult(False, "failed", err[-1][:300] if err else f"exit {p.returncode}")
