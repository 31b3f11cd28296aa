"""`macaronic genui`: validate GenUI output files (`macaronic genui probe`: see genui/probe.py).

Each file holds a `{text_response, a2ui}` object or a bare A2UI v0.8 message list (near-miss
JSON is repaired first). Prints one JSON line per file; exits 0 only if every file is valid.
Knows argparse and printing; everything else lives in `output.py`.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="macaronic genui", description="Validate A2UI v0.8 GenUI output.")
    sub = p.add_subparsers(dest="command", required=True)
    v = sub.add_parser("validate", help="validate files holding A2UI messages or {text_response, a2ui}",
                       description="Print one JSON line per file: {file, valid, errors, repaired}.")
    v.add_argument("files", nargs="+", metavar="FILE", help="JSON file ('-' reads stdin)")
    v.add_argument("--warnings", action="store_true", help="include integrity warnings in the output")
    sub.add_parser("probe", help="the genui specialist on hand-written requests (validity, coverage)", add_help=False)
    return p


def validate_file(name: str, with_warnings: bool = False) -> dict:
    from macaronic.genui.output import MAX_BYTES, parse_genui_output

    try:
        if name == "-":
            data = sys.stdin.buffer.read(MAX_BYTES + 1)
        else:
            with open(Path(name), "rb") as f:
                data = f.read(MAX_BYTES + 1)  # never read a huge file whole: the cap decides
    except OSError as e:
        return {"file": name, "valid": False, "errors": [{"path": "", "message": f"cannot read: {e.strerror}"}],
                "repaired": []}
    if len(data) > MAX_BYTES:
        size = Path(name).stat().st_size if name != "-" else f"more than {MAX_BYTES}"
        return {"file": name, "valid": False, "repaired": [],
                "errors": [{"path": "", "message": f"file is {size} bytes; the cap is {MAX_BYTES} bytes"}]}
    parsed = parse_genui_output(data, require_envelope=False)
    out = {"file": name, "valid": parsed.valid, "errors": parsed.validation.errors, "repaired": parsed.repairs}
    if with_warnings:
        out["warnings"] = parsed.validation.warnings
    return out


def main(argv: list[str]) -> int:
    if argv[:1] == ["probe"]:
        from macaronic.genui.probe import main as probe_main

        return probe_main(argv[1:])
    args = parser().parse_args(argv)
    ok = True
    for name in args.files:
        report = validate_file(name, args.warnings)
        ok &= report["valid"]
        print(json.dumps(report, ensure_ascii=False), flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
