"""Run untrusted Python in a child process: temp dir, time and memory limits, no network,
no file access outside the temp dir and the Python installation, no subprocesses.

Layers, each cheap: `resource` limits (CPU seconds, address space, file size, no core files)
set in the child before exec; a wall-clock timeout that kills the child's process group; an
audit hook installed before the user code runs (audit hooks cannot be removed) that refuses
sockets, process creation and `open` outside the allowed roots; an isolated interpreter (`-I`)
with an empty environment. It is a guard against model mistakes (loops, stray writes, calls
home), not a security boundary against a determined attacker. Knows nothing about tasks.
"""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import sys
import sysconfig
import tempfile
from dataclasses import dataclass
from pathlib import Path

PRELUDE = r'''
import sys, os
def _guard():
    roots = tuple(os.path.realpath(p) for p in __ROOTS__)
    work = os.path.realpath(os.getcwd())
    banned = ("socket.", "subprocess.", "os.system", "os.exec", "os.posix_spawn", "os.spawn",
              "os.fork", "os.forkpty", "pty.", "ctypes.", "shutil.rmtree", "os.kill", "signal.")
    def hook(event, args):
        if event.startswith(banned) and event not in ("socket.__new__",):
            raise PermissionError(f"sandbox: {event} is not allowed")
        if event == "socket.__new__":
            raise PermissionError("sandbox: network is not allowed")
        if event in ("open", "os.remove", "os.rename", "os.mkdir", "os.rmdir", "os.chmod", "os.symlink",
                     "os.link", "os.truncate", "os.chdir", "shutil.copyfile", "os.listdir", "os.scandir"):
            target = args[0] if args else None
            if isinstance(target, int) or target is None:
                return
            try:
                p = os.path.realpath(os.fsdecode(target))
            except Exception:
                raise PermissionError("sandbox: odd path")
            writing = event not in ("open", "os.listdir", "os.scandir") or (len(args) > 1 and isinstance(args[1], str) and any(c in args[1] for c in "wax+"))
            if p == work or p.startswith(work + os.sep):
                return
            if not writing and event in ("open", "os.listdir", "os.scandir") and any(p == r or p.startswith(r + os.sep) for r in roots):
                return
            raise PermissionError(f"sandbox: access to {p} is not allowed")
    sys.addaudithook(hook)
_guard(); del _guard
'''


@dataclass(frozen=True)
class RunResult:
    returncode: int | None
    stdout: str
    stderr: str
    timed_out: bool

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.timed_out


def _allowed_roots() -> list[str]:
    paths = {sys.prefix, sys.base_prefix, sysconfig.get_paths()["stdlib"], sysconfig.get_paths()["platstdlib"]}
    return sorted(str(Path(p).resolve()) for p in paths if p)


def _limits(cpu_s: int, mem_mb: int):
    def apply():
        os.setsid()
        resource.setrlimit(resource.RLIMIT_CPU, (cpu_s, cpu_s + 1))
        resource.setrlimit(resource.RLIMIT_AS, (mem_mb << 20, mem_mb << 20))
        resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, 1 << 20))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    return apply


def run_python(code: str, timeout_s: float = 5.0, mem_mb: int = 512, cpu_s: int | None = None,
               max_output: int = 20_000) -> RunResult:
    """Run `code` in a sandboxed child interpreter; output is truncated to max_output chars."""
    with tempfile.TemporaryDirectory(prefix="macaronic-sandbox-") as tmp:
        script = Path(tmp) / "main.py"
        script.write_text(PRELUDE.replace("__ROOTS__", repr(_allowed_roots())) + "\n" + code)
        proc = subprocess.Popen(
            [sys.executable, "-I", "-S", "-B", str(script)], cwd=tmp, env={"PATH": "/usr/bin:/bin"},
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            preexec_fn=_limits(cpu_s or max(1, int(timeout_s) + 1), mem_mb),
        )
        try:
            out, err = proc.communicate(timeout=timeout_s)
            return RunResult(proc.returncode, out[:max_output], err[:max_output], False)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            out, err = proc.communicate()
            return RunResult(None, out[:max_output], err[:max_output], True)
