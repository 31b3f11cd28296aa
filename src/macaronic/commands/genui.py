"""`macaronic genui`: validate GenUI output files and `macaronic genui probe`.

Each file holds a `{text_response, a2ui}` object or a bare A2UI v0.8 message list (near-miss
JSON is repaired first). Prints one JSON line per file; exits 0 only if every file is valid.
Knows argparse and printing; everything else lives in genui/ (`output.py`, `probe.py`).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path


PROBE_DOC = """the genui specialist on hand-written requests, through the served harness.

Each request (`macaronic/data/genui_requests.json`, 62 written by hand, not from the task
templates; `--set 2`: `genui_requests_2.json`, 30 more written 2026-12-06 before the open engine's
adapter was judged; `--set 3`: `genui_requests_3.json`, 40 by a writer who saw neither the engine nor
the other sets; `--set 4`: `genui_requests_4.json`, 40 more written blind the same way, before the
mixing engine was built; `--set 5`: `genui_requests_5.json`, 40 more, before the naming engine; or
`--requests FILE`) is one turn forced to `genui`, answered concurrently. Per request: whether the
raw generation validates (schema + integrity), whether the served card does (after the harness
closed it), which fixes closing needed, whether it fell back to a text card, which of the components
a fitting card would use (`expects`) it contains, and which of the values the request gives
(`shows`) the rendered card displays. `--no-constraints`
answers without grammars or closing, the comparison row. Writes JSON; prints a summary.
"""


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
        return probe(argv[1:])
    args = parser().parse_args(argv)
    ok = True
    for name in args.files:
        report = validate_file(name, args.warnings)
        ok &= report["valid"]
        print(json.dumps(report, ensure_ascii=False), flush=True)
    return 0 if ok else 1


def probe(argv: list[str]) -> int:
    """`macaronic genui probe`."""
    p = argparse.ArgumentParser(prog="macaronic genui probe", description=PROBE_DOC,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--requests", type=Path, default=None, help="JSON {requests: [{id, text, expects}]}")
    p.add_argument("--set", choices=("1", "2", "3", "4", "5"), default="1",
                   help="which packaged hand-written set: 1 (62 requests, the default), 2 (30, written 2026-12-06), "
                   "3 (40, written blind to the data engine), 4 or 5 (40 more each, written blind)")
    p.add_argument("--json", type=Path, required=True, help="where to write per-request rows and the summary")
    p.add_argument("--no-constraints", action="store_true", help="no grammar, no closing (comparison row)")
    p.add_argument("--no-adopt", action="store_true",
                   help="leave out the components a card's root does not reach, as the renderer would (comparison row)")
    p.add_argument("--max-tokens", type=int, default=768)
    p.add_argument("--limit", type=int, default=None, help="only the first N requests")
    p.add_argument("--base", default=None, help="a registered base (default: the default base), with its specialists")
    p.add_argument("--adapter-dir", action="append", default=[], metavar="DIR",
                   help="answer with this adapter directory instead of the shipped specialists (repeatable; an "
                        "adapter is named by its directory, so the one answering is a directory called genui, "
                        "e.g. an evolve candidate's adapters/genui)")
    a = p.parse_args(argv)
    from macaronic.genui.probe import answer_all, load_requests, score, summary

    requests = load_requests(a.requests, a.limit, a.set)
    from macaronic.engine.llm import EngineConfig, load_base_llm
    from macaronic.serve.mol import HarnessConfig, MoL

    t0 = time.perf_counter()
    llm = load_base_llm(a.base, a.adapter_dir, EngineConfig.from_env(max_batch=max(1, min(16, len(requests)))))
    try:
        mol = MoL.from_llm(llm, config=HarnessConfig(constrain=not a.no_constraints, summaries=False,
                                                       adopt_strays=not a.no_adopt))
        results = asyncio.run(answer_all(mol, requests, a.max_tokens))
    finally:
        llm.close()
    rows = [score(r, res) for r, res in zip(requests, results)]
    out = {"command": "macaronic genui probe " + " ".join(argv), "constrained": not a.no_constraints,
           "seconds": round(time.perf_counter() - t0, 1), "summary": summary(rows), "rows": rows}
    a.json.parent.mkdir(parents=True, exist_ok=True)
    a.json.write_text(json.dumps(out, indent=1) + "\n")
    print(json.dumps(out["summary"]))
    return 0

