"""`macaronic llamacpp build|where`: llama.cpp's server, built from the pinned llama-cpp-python source
(the building is macaronic/llamacpp.py)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from macaronic.llamacpp import SDIST, VERSION, LlamaCppError, build, server_binary


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(
        prog="macaronic llamacpp",
        description=f"Build llama.cpp's server (with Activated LoRA) from the llama.cpp that llama-cpp-python "
                    f"{VERSION}'s source distribution vendors (downloaded from the package index, sha256 pinned), "
                    "into $MACARONIC_HOME/tools (cmake and a C++ compiler; about 6 minutes of 2 idle cores, once). "
                    "`macaronic bench --only alora,agreement` uses it.")
    p.add_argument("command", choices=("build", "where"), help="build it (if not built), or print where it is")
    p.add_argument("--jobs", type=int, default=None, help="parallel compile jobs (default: all cores)")
    p.add_argument("--sdist", type=Path, default=None, help=f"a downloaded {SDIST} (default: pip downloads it)")
    a = p.parse_args(argv)
    try:
        path = build(jobs=a.jobs, sdist=a.sdist) if a.command == "build" else server_binary()
    except LlamaCppError as e:
        print(f"macaronic llamacpp: {e}", file=sys.stderr)
        return 1
    if path is None:
        print("not built: macaronic llamacpp build", file=sys.stderr)
        return 1
    print(path)
    return 0
