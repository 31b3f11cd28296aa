"""Re-grade `macaronic genui probe` rows under the current harness's closing, without generating
again: each row's served card (`content`) is closed once more (`genui.close.close_card`: a card made
valid before is left as it is, apart from what closing has learned since, e.g. `strays_adopted`) and
scored as the probe scores it. The raw-validity fields keep the generation's values. Rows written
by a probe that already closed this way come back unchanged, which is the check that this equals
running the probe again.

    .venv/bin/python scripts/genui_rescore.py IN.json OUT.json [--set 1|2]
"""

from __future__ import annotations

import datetime
import json
import sys
from types import SimpleNamespace

from macaronic.genui.close import card_text, close_card
from macaronic.genui.output import parse_genui_output
from macaronic.genui.probe import load_requests, score, summary


def rescore(src: dict, which: str) -> dict:
    requests = {r["id"]: r for r in load_requests(which=which)}
    rows = []
    for row in src["rows"]:
        parsed = parse_genui_output(row["content"])
        closed, fixes = close_card(parsed.obj, row["content"])
        content = card_text(closed) if fixes else row["content"]
        new = score(requests[row["id"]], SimpleNamespace(text=content, content=content, genui={"closed": row["closed"] + fixes},
                                                        finish_reason=row["finish_reason"],
                                                        usage={"completion_tokens": row["tokens"]}))
        rows.append(new | {"raw_valid": row["raw_valid"]})
    return {**src, "rescored": f"scripts/genui_rescore.py (closing of {datetime.date.today()})",
            "summary": summary(rows), "rows": rows}


def main(argv: list[str]) -> None:
    which = argv[argv.index("--set") + 1] if "--set" in argv else "1"
    src, out = argv[0], argv[1]
    result = rescore(json.load(open(src)), which)
    open(out, "w").write(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result["summary"]))


if __name__ == "__main__":
    main(sys.argv[1:])
