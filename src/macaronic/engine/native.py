"""The engine's native kernels (csrc/*.cpp): built once with the system C++ compiler, loaded lazily.

`ops()` returns `torch.ops.macaronic` when the library is built (or builds it on first use into
`$MACARONIC_NATIVE_CACHE`, default `$MACARONIC_HOME/native/`, keyed by the sources' hash and
torch's version) and the CPU can run it: an x86-64 CPU with AVX-512 BF16 runs the kernels as written,
one with AVX2 + FMA + F16C their fp32 twins (csrc/avx2.h; `ops().wide_supported()` says which);
otherwise None, with one warning saying why, and the callers keep their pure-PyTorch path.
`scripts/setup` builds it (`python -m macaronic.engine.native`); importing the package never does.
`MACARONIC_NATIVE=0` turns it off; `CXX` picks the compiler. Knows nothing about models.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from pathlib import Path

import torch

SOURCES = tuple(Path(__file__).with_name("csrc") / f for f in ("int4.cpp", "lora.cpp", "decode.cpp", "pool.cpp", "ggml.cpp"))
HEADERS = tuple(Path(__file__).with_name("csrc") / f for f in ("pool.h", "avx2.h", "ggml_q8.h"))
# The kernels thread with their own pool (csrc/pool.h), not OpenMP: built without -fopenmp,
# at::parallel_for would run serially, and with it libgomp's per-thread teams wake slowly.
FLAGS = ("-O3", "-std=c++20", "-fPIC", "-w")
_lock = threading.Lock()
_state: dict = {}  # "ops": the loaded namespace or None, once decided


class NativeBuildError(RuntimeError):
    pass


def library_path(cache: Path | None = None) -> Path:
    """Where the library for these sources, flags and this torch lives."""
    if cache is None:
        from macaronic.engine.config import home

        cache = Path(os.environ.get("MACARONIC_NATIVE_CACHE") or home() / "native")
    h = hashlib.sha256()
    for src in SOURCES + HEADERS:
        h.update(src.read_bytes())
    h.update(" ".join(FLAGS).encode())
    h.update(torch.__version__.encode())
    return cache / f"macaronic_native-{h.hexdigest()[:16]}.so"


def build(dest: Path, cxx: str | None = None) -> float:
    """Compile the sources (in parallel, one compiler per file) and link them into `dest`, atomically:
    a concurrent build never sees half a file. Returns the seconds it took; raises NativeBuildError
    with the compiler's output."""
    tdir = Path(torch.__file__).parent
    cc = cxx or os.environ.get("CXX") or "g++"
    flags = [*FLAGS, f"-D_GLIBCXX_USE_CXX11_ABI={int(torch._C._GLIBCXX_USE_CXX11_ABI)}",
             f"-I{tdir / 'include'}", f"-I{tdir / 'include' / 'torch' / 'csrc' / 'api' / 'include'}"]
    dest.parent.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(dir=dest.parent) as tmp:
        objs = [Path(tmp) / (src.stem + ".o") for src in SOURCES]
        steps = [[cc, *flags, "-c", str(src), "-o", str(obj)] for src, obj in zip(SOURCES, objs)]
        _run_all(steps)
        out = Path(tmp) / dest.name
        _run_all([[cc, "-shared", *map(str, objs), f"-L{tdir / 'lib'}", "-lc10", "-ltorch_cpu",
                   f"-Wl,-rpath,{tdir / 'lib'}", "-o", str(out)]])
        os.replace(out, dest)
    return time.perf_counter() - t0


def _run_all(cmds: list[list[str]]) -> None:
    try:
        procs = [subprocess.Popen(c, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for c in cmds]
    except OSError as e:
        raise NativeBuildError(f"cannot run the compiler {cmds[0][0]!r}: {e}") from None
    for c, p in zip(cmds, procs):
        log = p.communicate()[0]
        if p.returncode != 0:
            raise NativeBuildError(f"{c[0]} failed ({p.returncode}):\n{log[-2000:]}")


def _cpu_flags() -> set[str]:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags"):
                return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


# The kernels come in two instruction sets (csrc/avx2.h): AVX-512 with BF16, and AVX2 + FMA + F16C twins
# for the x86-64 CPUs without it. Either set is enough; the library picks once per process.
NEEDS_WIDE = frozenset({"avx512f", "avx512bw", "avx512vl", "avx512_bf16"})
NEEDS = frozenset({"avx2", "fma", "f16c"})


def cpu_can_run() -> bool:
    """Could the native kernels run on this CPU (Linux, x86-64 with AVX2 + FMA + F16C, or AVX-512 BF16)?"""
    flags = _cpu_flags()
    return sys.platform == "linux" and (NEEDS <= flags or NEEDS_WIDE <= flags)


def cpu_bf16() -> bool:
    """Does this CPU compute bf16 natively (AVX512-BF16 or AMX)? Where the flags cannot be read (not
    Linux), assume it does."""
    flags = _cpu_flags()
    return not flags or bool({"avx512_bf16", "amx_bf16"} & flags)


def load(cache: Path | None = None, cxx: str | None = None):
    """Build if needed and load; returns torch.ops.macaronic, or raises NativeBuildError."""
    if os.environ.get("MACARONIC_NATIVE", "1") == "0":
        raise NativeBuildError("MACARONIC_NATIVE=0")
    if not cpu_can_run():
        raise NativeBuildError(f"the native kernels need Linux on an x86-64 CPU with {sorted(NEEDS)} "
                               f"(or {sorted(NEEDS_WIDE)})")
    path = library_path(cache)
    if not path.exists():
        build(path, cxx)
    if not hasattr(torch.ops.macaronic, "int4_linear"):
        torch.ops.load_library(str(path))
    ops = torch.ops.macaronic
    if not ops.int4_supported():
        raise NativeBuildError("the CPU lacks both AVX2 + FMA + F16C and AVX-512 BF16")
    return ops


def ops():
    """torch.ops.macaronic, or None (with one warning) when the native kernels cannot run here."""
    with _lock:
        if "ops" not in _state:
            try:
                _state["ops"] = load()
            except Exception as e:  # a failed build or load must never stop the engine
                _state["ops"] = None
                if os.environ.get("MACARONIC_NATIVE", "1") != "0":
                    warnings.warn(f"macaronic: native kernels unavailable, using the PyTorch path ({e})",
                                  RuntimeWarning, stacklevel=2)
        return _state["ops"]


def main() -> int:
    """`python -m macaronic.engine.native`: build (if missing) and load the library, say where."""
    path = library_path()
    seconds = None if path.exists() else build(path)
    o = load()
    print(f"native kernels: {path}" + (f" (built in {seconds:.1f} s)" if seconds is not None else " (already built)")
          + (", AVX-512 BF16" if o.wide_supported() else ", AVX2 twins"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
