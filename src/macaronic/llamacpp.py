"""llama.cpp's own server as a peer and an export target, with Activated LoRA.

llama.cpp's server applies an adapter whose GGUF carries `adapter.alora.invocation_tokens` from the
last occurrence of those tokens in the prompt on, and keeps the cache before that point when the
next request asks for another such adapter (its `lora_should_clear_cache`): the same exact-switch
idea as our `turn` adapters. This module builds that server and writes our adapters in its format.

    build()            (`macaronic llamacpp build`) llama-server compiled from the llama.cpp that llama-cpp-python's source
                       distribution vendors (PyPI, pinned by version and sha256, so the build needs
                       the package registry only), into $MACARONIC_HOME/tools/llama.cpp-<version>/
                       (cmake and a C++ compiler; about 15 minutes of 2 cores, once)
    convert_adapter()  a PEFT LoRA directory -> a llama.cpp LoRA GGUF, by the vendored
                       convert_lora_to_gguf.py; a `turn` adapter keeps its invocation tokens (the
                       user header, `engine.llm.user_marker_ids`), so llama.cpp runs it as aLoRA
    Server             one llama-server process on loopback: start, wait for /health, /completion
                       on token ids with per-request adapter scales, stop

One difference in rules, stated where it shows: llama.cpp activates from the *last* invocation
sequence in the prompt; our turn rule skips a tool result that the template renders as a user
message (Qwen2.5's `<|im_start|>user\\n<tool_response>`), so inside a tool episode on such a template
the two start the adapter at different tokens. Plain turns start at the same token.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import socket
import subprocess
import sys
import tarfile
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

VERSION = "0.3.36"  # llama-cpp-python, whose sdist vendors llama.cpp (server with aLoRA: PR #15327)
SDIST = f"llama_cpp_python-{VERSION}.tar.gz"
SDIST_SHA256 = "832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e"
CMAKE_FLAGS = ("-DCMAKE_BUILD_TYPE=Release", "-DLLAMA_OPENSSL=OFF", "-DLLAMA_BUILD_TESTS=OFF",
               "-DLLAMA_BUILD_EXAMPLES=OFF", "-DLLAMA_BUILD_TOOLS=ON", "-DLLAMA_BUILD_SERVER=ON",
               "-DBUILD_SHARED_LIBS=OFF")


class LlamaCppError(RuntimeError):
    pass


def tools_dir() -> Path:
    from macaronic.engine.config import home

    return home() / "tools" / f"llama.cpp-{VERSION}"


def server_binary(root: Path | None = None) -> Path | None:
    """The built llama-server, or None before `build()`."""
    p = (root or tools_dir()) / "llama-server"
    return p if p.is_file() and os.access(p, os.X_OK) else None


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def fetch_source(root: Path, sdist: Path | None = None, log=print) -> Path:
    """root/src = the vendored llama.cpp of the pinned sdist (downloaded by pip unless `sdist` is given)."""
    src = root / "src"
    if (src / "CMakeLists.txt").is_file() and (src / "convert_lora_to_gguf.py").is_file():
        return src
    with tempfile.TemporaryDirectory() as tmp:
        if sdist is None:
            log(f"llama.cpp: downloading llama-cpp-python=={VERSION} (source) from the package index ...")
            r = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
                                f"llama-cpp-python=={VERSION}", "-d", tmp], capture_output=True, text=True)
            sdist = Path(tmp) / SDIST
            if r.returncode != 0 or not sdist.is_file():
                raise LlamaCppError(f"pip could not download llama-cpp-python=={VERSION}: "
                                    f"{(r.stderr or r.stdout).strip()[-400:]}")
        got = _sha256(sdist)
        if got != SDIST_SHA256:
            raise LlamaCppError(f"{sdist}: sha256 {got} is not the pinned {SDIST_SHA256}")
        prefix = f"llama_cpp_python-{VERSION}/vendor/llama.cpp/"
        part = root / "src.part"
        shutil.rmtree(part, ignore_errors=True)
        with tarfile.open(sdist) as tf:
            members = []
            for m in tf.getmembers():
                if m.name.startswith(prefix) and len(m.name) > len(prefix):
                    m.name = m.name[len(prefix):]
                    members.append(m)
            tf.extractall(part, members=members, filter="data")
        shutil.rmtree(src, ignore_errors=True)
        part.rename(src)
    return src


def _cmake() -> str | None:
    """cmake on PATH, else the one the `cmake` package put beside this interpreter (the test extra's)."""
    found = shutil.which("cmake")
    if found:
        return found
    local = Path(sys.executable).parent / "cmake"
    return str(local) if local.is_file() and os.access(local, os.X_OK) else None


def build(root: Path | None = None, jobs: int | None = None, sdist: Path | None = None, log=print) -> Path:
    """llama-server, built once from the pinned source; returns its path."""
    root = root or tools_dir()
    done = server_binary(root)
    if done:
        return done
    cmake = _cmake()
    if cmake is None or not (shutil.which("c++") or shutil.which("g++")):
        raise LlamaCppError("building llama-server needs cmake (on PATH, or the `cmake` package beside this "
                            "Python: pip install 'cmake<4') and a C++ compiler (apt-get install g++)")
    root.mkdir(parents=True, exist_ok=True)
    src = fetch_source(root, sdist, log)
    bdir = root / "build"
    jobs = jobs or os.cpu_count() or 2
    log(f"llama.cpp: building llama-server with {jobs} jobs (once; about 15 minutes on 2 cores) ...")
    for cmd in ([cmake, "-S", str(src), "-B", str(bdir), *CMAKE_FLAGS],
                [cmake, "--build", str(bdir), "--target", "llama-server", "-j", str(jobs)]):
        with open(root / "build.log", "a") as lf:
            r = subprocess.run(cmd, stdout=lf, stderr=subprocess.STDOUT)
        if r.returncode != 0:
            tail = (root / "build.log").read_text(errors="replace")[-1500:]
            raise LlamaCppError(f"{' '.join(cmd[:3])} failed (log: {root / 'build.log'}):\n{tail}")
    out = bdir / "bin" / "llama-server"
    if not out.is_file():
        raise LlamaCppError(f"the build finished without {out}")
    shutil.copy2(out, root / "llama-server.part")
    (root / "llama-server.part").rename(root / "llama-server")
    return root / "llama-server"


def convert_adapter(peft_dir: Path, base_dir: Path, out: Path, invocation_tokens: list[int] | None = None,
                    root: Path | None = None) -> Path:
    """A PEFT LoRA directory as a llama.cpp LoRA GGUF (f32). `invocation_tokens` (or the adapter's own
    `alora_invocation_tokens`) make it an Activated LoRA there; `base_dir` is the Hugging Face
    directory of the base (its config.json is all the converter reads)."""
    src = fetch_source(root or tools_dir())
    cfg = json.loads((Path(peft_dir) / "adapter_config.json").read_text())
    if invocation_tokens is not None:
        cfg["alora_invocation_tokens"] = [int(t) for t in invocation_tokens]
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp) / "adapter"
        d.mkdir()
        (d / "adapter_config.json").write_text(json.dumps(cfg))
        os.symlink(Path(peft_dir).resolve() / "adapter_model.safetensors", d / "adapter_model.safetensors")
        hf = Path(tmp) / "base"  # the converter reads config.json alone, and needs `architectures` there
        hf.mkdir()
        bcfg = json.loads((Path(base_dir) / "config.json").read_text())
        if not bcfg.get("architectures"):
            from macaronic.export import ARCHITECTURES

            if bcfg.get("model_type") not in ARCHITECTURES:
                raise LlamaCppError(f"{base_dir}: unknown model_type {bcfg.get('model_type')!r}")
            bcfg["architectures"] = [ARCHITECTURES[bcfg["model_type"]]]
        (hf / "config.json").write_text(json.dumps(bcfg))
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(src / "gguf-py"), str(src)])}
        env.pop("NO_LOCAL_GGUF", None)
        r = subprocess.run([sys.executable, str(src / "convert_lora_to_gguf.py"), "--base", str(hf),
                            "--outfile", str(out), "--outtype", "f32", str(d)],
                           capture_output=True, text=True, env=env)
    if r.returncode != 0 or not out.is_file():
        raise LlamaCppError(f"convert_lora_to_gguf.py failed on {peft_dir}:\n{(r.stderr or r.stdout)[-1500:]}")
    return out


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """One llama-server on loopback, one slot. Adapters load at start with scale 0
    (`--lora-init-without-apply`); each request names the scales it wants."""

    def __init__(self, gguf: Path, loras=(), threads: int = 2, ctx: int = 8192, binary: Path | None = None,
                 log: Path | None = None, extra: tuple[str, ...] = ()):
        binary = binary or server_binary()
        if binary is None:
            raise LlamaCppError("llama-server is not built: `macaronic llamacpp build`")
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        cmd = [str(binary), "-m", str(gguf), "--host", "127.0.0.1", "--port", str(self.port), "-c", str(ctx),
               "-t", str(threads), "-tb", str(threads), "-np", "1", "--no-webui", "--slots",
               "--slot-save-path", tempfile.gettempdir(), *extra]  # enables the slot actions (erase)
        for p in loras:
            cmd += ["--lora", str(p)]
        if loras:
            cmd.append("--lora-init-without-apply")
        self.log = log or Path(tempfile.gettempdir()) / f"llama-server-{self.port}.log"
        self._logf = open(self.log, "w")
        self.proc = subprocess.Popen(cmd, stdout=self._logf, stderr=subprocess.STDOUT)
        self.n_loras = len(loras)
        self._wait()

    def _wait(self, timeout: float = 180.0) -> None:
        t0 = time.time()
        while time.time() - t0 < timeout:
            if self.proc.poll() is not None:
                tail = self._tail()
                self._logf.close()
                raise LlamaCppError(f"llama-server exited ({self.proc.returncode}):\n{tail}")
            try:
                with urllib.request.urlopen(self.url + "/health", timeout=2) as r:
                    if r.status == 200:
                        return
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.2)
        tail = self._tail()
        self.close()
        raise LlamaCppError(f"llama-server did not become healthy in {timeout:.0f} s:\n{tail}")

    def _tail(self) -> str:
        self._logf.flush()
        return self.log.read_text(errors="replace")[-1500:]

    def post(self, path: str, body: dict | None) -> dict:
        """POST `body` as JSON to `path`; the reply parsed, or LlamaCppError with the server's status and message."""
        data = json.dumps(body or {}).encode()
        req = urllib.request.Request(self.url + path, data=data, headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=600) as r:
                return json.loads(r.read())
        except urllib.error.HTTPError as e:
            raise LlamaCppError(f"llama-server {path}: {e.code} {e.read()[:400]!r}") from None

    def complete(self, tokens: list[int], lora: int | None = None, n_predict: int = 1) -> dict:
        """Greedy /completion on token ids with adapter `lora` (its index in `loras`) at scale 1 and
        the others at 0. Adds `wall_ms` (the request's time here, first token included)."""
        body = {"prompt": list(tokens), "n_predict": n_predict, "temperature": 0.0, "cache_prompt": True,
                "lora": [{"id": i, "scale": 1.0 if i == lora else 0.0} for i in range(self.n_loras)]}
        t0 = time.perf_counter()
        out = self.post("/completion", body)
        out["wall_ms"] = (time.perf_counter() - t0) * 1000
        return out

    def erase(self) -> None:
        """Empty the slot's cache."""
        self.post("/slots/0?action=erase", None)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._logf.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
