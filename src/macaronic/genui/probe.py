"""The genui probe's grading: the genui specialist on hand-written requests, through the served harness
(the command, `macaronic genui probe`, is in commands/genui.py; this module knows no argparse).

Each request (`macaronic/data/genui_requests.json`, written by hand, not from the task
templates; or `--requests FILE`) is one turn forced to `genui`, answered concurrently. Per
request: whether the raw generation validates (schema + integrity), whether the served card does
(after the harness closed it), which fixes closing needed, whether it fell back to a text card,
which of the components a fitting card would use (`expects`) it contains, and which of the
values the request gives (`shows`) the rendered card displays, and how many components the card's
root does not reach (`strays`: the renderer drops them). `--no-constraints`
answers without grammars or closing, the comparison row. Writes JSON; prints a summary.
"""

from __future__ import annotations

import asyncio
import json
import re
from importlib import resources


def components_of(card: dict) -> set[str]:
    out = set()
    for m in card.get("a2ui") or []:
        for e in ((m or {}).get("surfaceUpdate") or {}).get("components") or []:
            if isinstance(e, dict) and isinstance(e.get("component"), dict):
                out.update(e["component"])
    return out


def score(request: dict, result) -> dict:
    from macaronic.genui.close import stray_components
    from macaronic.genui.output import parse_genui_output

    raw = parse_genui_output(result.text)
    served = parse_genui_output(result.content or "")
    ok = served.valid and isinstance(served.obj, dict)
    used = components_of(served.obj) if ok else set()
    fixes = (result.genui or {}).get("closed") or []
    row = {"id": request["id"], "raw_valid": raw.valid, "served_valid": served.valid, "closed": fixes,
           "fallback": "fallback_text_card" in fixes, "finish_reason": result.finish_reason,
           "tokens": result.usage.get("completion_tokens"), "components": sorted(used),
           "coverage": round(len(used & set(request["expects"])) / len(request["expects"]), 3),
           "strays": len(stray_components(served.obj)) if ok else 0, "content": result.content}
    if request.get("shows"):
        text = shown_text(served.obj) if ok else ""
        missing = [v for v in request["shows"] if v.lower() not in text]
        row |= {"shows": round(1 - len(missing) / len(request["shows"]), 3), "not_shown": missing}
    return row


def shown_text(card: dict) -> str:
    """The text a rendered card displays (its card part, not text_response), lower-cased."""
    from html import unescape

    from macaronic.genui.render_html import render_html

    return unescape(re.sub(r"<[^>]+>", " ", render_html(card.get("a2ui") or []))).lower()


async def answer_all(mol, requests: list[dict], max_tokens: int) -> list:
    return await asyncio.gather(*[
        mol.aturn([{"role": "user", "content": r["text"]}], model="genui",
                  sampling={"max_tokens": max_tokens, "temperature": 0.0}) for r in requests])


def summary(rows: list[dict]) -> dict:
    n = len(rows)
    mean = lambda k: round(sum(float(r[k]) for r in rows) / n, 3)  # noqa: E731
    shows = [r["shows"] for r in rows if "shows" in r]
    return {"n": n, "raw_valid": mean("raw_valid"), "served_valid": mean("served_valid"),
            "fallback": mean("fallback"), "coverage": mean("coverage"),
            "dropping": round(sum(r.get("strays", 0) > 0 for r in rows) / n, 3),
            "shows": round(sum(shows) / len(shows), 3) if shows else None, "shows_n": len(shows),
            "length_cut": round(sum(r["finish_reason"] == "length" for r in rows) / n, 3)}


def load_requests(path=None, limit: int | None = None, which: str = "1") -> list[dict]:
    """A packaged hand-written set (`which` 1: `macaronic/data/genui_requests.json`, 2:
    `genui_requests_2.json`, 3 to 5: `genui_requests_3.json` ... `genui_requests_5.json`), or the requests of the
    file at `path`."""
    name = "genui_requests.json" if which == "1" else f"genui_requests_{which}.json"
    src = path.read_text() if path else resources.files("macaronic").joinpath(f"data/{name}").read_text()
    return json.loads(src)["requests"][:limit]
