"""A real vLLM OpenAI-compatible server on a `macaronic export vllm` directory, as a child process:
start it (the export's launch-vllm.sh with the adapters as --lora-modules), wait until
/v1/models answers, stop it. What `macaronic bench vllm` and tests/vllm use.

The interpreter: $MACARONIC_VLLM_PYTHON, else the repository's .venv-vllm (`scripts/setup --vllm`),
else this Python when it can import vllm. A vLLM that cannot start raises `VllmError` with the tail
of its log: callers fail, they do not skip. Knows nothing about the harness or the measurements.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[3]


class VllmError(RuntimeError):
    pass


def vllm_python() -> str:
    if os.environ.get("MACARONIC_VLLM_PYTHON"):
        return os.environ["MACARONIC_VLLM_PYTHON"]
    for root in (REPO, Path.cwd()):
        if (root / ".venv-vllm" / "bin" / "python").is_file():
            return str(root / ".venv-vllm" / "bin" / "python")
    return sys.executable


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def export(out: Path, *args: str) -> Path:
    """`macaronic export vllm --out OUT ARGS...` in a child process (the shipped adapters by default)."""
    r = subprocess.run([sys.executable, "-m", "macaronic.cli", "export", "vllm", "--out", str(out), *args],
                       capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        raise VllmError(f"macaronic export vllm failed:\n{r.stderr[-2000:]}")
    return out


class VllmServer:
    """`with VllmServer(export_dir) as v: v.url` — one vLLM process on a free loopback port.

    `threads` binds vLLM's CPU build to cores 0..threads-1 with none reserved (its default on a
    2-core box is 1 core for compute and 1 reserved); `extra` goes to vLLM's command line."""

    def __init__(self, export_dir: Path, *, port: int | None = None, threads: int | None = None,
                 extra: tuple[str, ...] = (), env: dict | None = None, log: Path | None = None,
                 timeout: float = 900.0):
        self.export_dir = Path(export_dir)
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = Path(log) if log else self.export_dir / "vllm.log"
        self.args = ["--port", str(self.port), *extra]
        self.env = {**os.environ, "MACARONIC_VLLM_PYTHON": vllm_python(), **(env or {})}
        if threads:
            self.env.setdefault("VLLM_CPU_OMP_THREADS_BIND", "0" if threads == 1 else f"0-{threads - 1}")
            self.env.setdefault("VLLM_CPU_NUM_OF_RESERVED_CPU", "0")
        self.timeout = timeout
        self.proc: subprocess.Popen | None = None
        self.startup_s: float | None = None

    def start(self) -> "VllmServer":
        script = self.export_dir / "launch-vllm.sh"
        if not script.is_file():
            raise VllmError(f"{script} is missing: run `macaronic export vllm --out {self.export_dir}` first")
        t0 = time.monotonic()
        self._log = open(self.log_path, "w")
        # its own session, so stop() ends vLLM's engine and worker processes with it, by group id
        self.proc = subprocess.Popen([str(script), *self.args], stdout=self._log, stderr=subprocess.STDOUT,
                                     env=self.env, start_new_session=True)
        while time.monotonic() - t0 < self.timeout:
            if self.proc.poll() is not None:
                self.stop()
                raise VllmError(f"vLLM exited with status {self.proc.returncode} while starting:\n{self.log_tail()}")
            try:
                if httpx.get(self.url + "/v1/models", timeout=5).status_code == 200:
                    self.startup_s = round(time.monotonic() - t0, 1)
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(1.0)
        self.stop()
        raise VllmError(f"vLLM did not answer /v1/models within {self.timeout:.0f} s:\n{self.log_tail()}")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=30)
            except ProcessLookupError:
                pass
        if getattr(self, "_log", None):
            self._log.close()
            self._log = None

    def log_tail(self, chars: int = 4000) -> str:
        try:
            lines = [ln for ln in self.log_path.read_text(errors="replace").splitlines()
                     if not ln.startswith("WARNING: Location")]  # pip-index noise some setups print
        except OSError:
            return "(no log)"
        tail = "\n".join(lines)[-chars:]
        # vLLM's worker logs the root cause first and the engine's own traceback after it, which fills the
        # tail: name the first error line too (cut short: some list every parameter of the model)
        first = next((ln for ln in lines if re.search(r"(^|\] )[A-Z]\w*(Error|Exception): ", ln)), None)
        return tail if first is None or first in tail else f"first error: {first[:600]}\n...\n{tail}"

    def version(self) -> str:
        return httpx.get(self.url + "/version", timeout=10).json().get("version", "?")

    def requests_done(self) -> float:
        """vLLM's own count of finished requests (its Prometheus /metrics)."""
        text = httpx.get(self.url + "/metrics", timeout=10).text
        return sum(float(ln.rsplit(" ", 1)[1]) for ln in text.splitlines()
                   if ln.startswith("vllm:request_success_total"))

    def __enter__(self) -> "VllmServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
