"""The official A2UI v0.8 renderer (`@a2ui/lit`, as the web chat bundles it) in a headless
Chromium page, for the conformance tests and the renderer-vs-validator table.

The page is served from the package's own web files by request interception (no server, no
network: image URLs in cards get a 1-pixel PNG, anything else is aborted and recorded). The chat
draws no image from another host (a2ui-card.js replaces it), so `render` first moves the cards'
remote URLs onto the page's origin, where the renderer draws them as it would the server's own. `render`
reports what a user of the renderer would see: an exception from the message processor, console
errors and warnings, the surfaces drawn and their text (read through the shadow roots).

    python tests/genui/official_renderer.py           # the disagreement table (docs/BENCHMARKS.md)
    python tests/genui/official_renderer.py --bench   # official renderer vs a2ui.js, ms per card
    python tests/genui/official_renderer.py --probe   # the genui specialist's served cards, drawn
"""

from __future__ import annotations

import base64
import io
import json
import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

import macaronic

WEB = Path(macaronic.__file__).resolve().parent / "web"
ORIGIN = "http://card.test"
SNAPSHOTS = Path(__file__).parent / "snapshots" / "official"
UPDATE = os.environ.get("MACARONIC_UPDATE_SNAPSHOTS") == "1"
PIXEL = base64.b64decode("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGPo6OgAAAMEAYFL09IMAAAAAElFTkSuQmCC")
PAGE = """<!doctype html><html><head><meta charset="utf-8"></head>
<body style="margin:0;background:#fff;font:15px/1.45 system-ui,sans-serif">
<div id="host" style="width:460px;padding:8px"></div>
<script type="module">
import { renderCard } from "/static/a2ui-card.js";
window.renderCard = renderCard;
window.cardReady = true;
</script></body></html>"""
# Render, wait until every Lit element under the card has finished updating, then read it.
RENDER = """async ([messages, asIs]) => {
  const old = document.getElementById('host');
  const host = old.cloneNode(false);
  old.replaceWith(host);
  window.actions = [];
  let threw = null;
  try {
    window.card = window.renderCard(host, messages, {onAction: m => window.actions.push(m), asIs});
  } catch (e) { threw = String(e && e.message || e); }
  const all = root => [...root.querySelectorAll('*')].flatMap(n => n.shadowRoot ? [n, ...all(n.shadowRoot)] : [n]);
  for (let i = 0; i < 5; i++) {
    await Promise.all(all(host).filter(n => n.updateComplete).map(n => n.updateComplete));
    await new Promise(r => requestAnimationFrame(() => setTimeout(r, 0)));
  }
  const text = [];
  const walk = n => { if (n.nodeType === 3) text.push(n.textContent); if (n.shadowRoot) walk(n.shadowRoot);
    for (const c of n.childNodes) walk(c); };
  walk(host);
  return {threw, surfaces: host.querySelectorAll('a2ui-surface').length,
          components: all(host).filter(n => n.tagName.startsWith('A2UI-') && !['A2UI-SURFACE', 'A2UI-ROOT'].includes(n.tagName)).length,
          text: text.join(' ').replace(/\\s+/g, ' ').trim(), height: host.getBoundingClientRect().height};
}"""


@dataclass
class Rendered:
    threw: str | None
    surfaces: int
    components: int
    text: str
    height: float
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @property
    def clean(self) -> bool:
        """What "the official renderer accepts it" means here: no exception, no console error,
        and at least one component drawn."""
        return self.threw is None and not self.errors and self.components > 0


def on_origin(messages):
    """`messages` with every string that is a remote URL (catalog and schema ids aside) moved onto
    ORIGIN: the images the official examples name, served the 1-pixel PNG as before."""
    text = json.dumps(messages)
    return json.loads(re.sub(r'"https?://(?!a2ui\.org/|json-schema\.org/)', f'"{ORIGIN}/remote/', text))


class OfficialRenderer:
    """One page holding the bundled renderer; `render` may be called any number of times."""

    def __init__(self, browser):
        self.context = browser.new_context(viewport={"width": 480, "height": 900}, device_scale_factor=1)
        self.page = self.context.new_page()
        self.blocked: list[str] = []
        self.log: list[tuple[str, str]] = []
        self.page.on("console", lambda m: self.log.append((m.type, m.text)))
        self.page.on("pageerror", lambda e: self.log.append(("error", f"pageerror: {e}")))
        self.page.route("**/*", self._serve)
        self.page.goto(ORIGIN + "/")
        self.page.wait_for_function("window.cardReady === true")

    def _serve(self, route):
        url = route.request.url
        if url == ORIGIN + "/":
            return route.fulfill(body=PAGE, content_type="text/html")
        name = url[len(ORIGIN + "/static/"):] if url.startswith(ORIGIN + "/static/") else None
        if name and (WEB / name).is_file() and ".." not in name:
            return route.fulfill(body=(WEB / name).read_bytes(), content_type="text/javascript")
        if route.request.resource_type == "image":  # cards name remote images; never fetched
            return route.fulfill(body=PIXEL, content_type="image/png")
        self.blocked.append(url)
        return route.abort()

    def render(self, messages, as_is: bool = False) -> Rendered:
        """`as_is`: hand the messages to the renderer untouched (no id disambiguation)."""
        self.log.clear()
        out = self.page.evaluate(RENDER, [on_origin(messages), as_is])
        return Rendered(**out, errors=[t for k, t in self.log if k == "error"],
                        warnings=[t for k, t in self.log if k == "warning"])

    def screenshot(self) -> bytes:
        return self.page.locator("#host").screenshot(animations="disabled")

    def close(self):
        self.context.close()


def thumbnail(png: bytes):
    """The snapshot form of a screenshot: half size, greyscale (small to commit, and blind to
    sub-pixel anti-aliasing)."""
    from PIL import Image

    img = Image.open(io.BytesIO(png)).convert("L")
    return img.resize((max(1, img.width // 2), max(1, img.height // 2)), Image.Resampling.BOX)


def compare_snapshot(name: str, png: bytes, tolerance: float = 0.02, directory: Path = SNAPSHOTS) -> str | None:
    """None when the screenshot matches <directory>/<name>.png (at most
    `tolerance` of the pixels differ by more than 48 grey levels, height within 4 px), else why
    not. MACARONIC_UPDATE_SNAPSHOTS=1 rewrites the snapshot instead."""
    from PIL import Image, ImageChops

    new = thumbnail(png)
    path = directory / f"{name}.png"
    if UPDATE or not path.exists():
        if not UPDATE:
            return f"no snapshot {path.name} (run with MACARONIC_UPDATE_SNAPSHOTS=1 and commit it)"
        directory.mkdir(parents=True, exist_ok=True)
        new.save(path, optimize=True)
        return None
    old = Image.open(path).convert("L")
    if old.width != new.width or abs(old.height - new.height) > 4:
        return f"{name}: size {new.size} vs snapshot {old.size}"
    h = min(old.height, new.height)
    diff = ImageChops.difference(old.crop((0, 0, old.width, h)), new.crop((0, 0, new.width, h)))
    changed = sum(diff.point(lambda v: 255 if v > 48 else 0).histogram()[255:])
    share = changed / (old.width * h)
    return None if share <= tolerance else f"{name}: {share:.1%} of pixels differ from the snapshot"


def recorded_replies(served: bool = False) -> list[tuple[str, dict]]:
    """Every GenUI reply the shipped genui specialist wrote in the recorded specialist benchmark
    runs (docs/bench/*.tasks.jsonl.gz: the genui suite and the genui turns of the mixed suite), as the
    serving harness parses it (`parse_genui_output(...).to_dict()`), when it holds an a2ui list.
    `served`: as `macaronic serve` returns it today, a reply that does not validate closed into a
    valid card (`genui.close.close_card`, what the harness does with constraints on)."""
    import gzip
    import json

    from macaronic.genui.close import close_card
    from macaronic.genui.output import parse_genui_output

    out = []
    for gz in sorted((Path(__file__).parents[2] / "docs" / "bench").glob("*.tasks.jsonl.gz")):
        path = gz.with_suffix("")  # the rows file as the run wrote it: ids name it
        for line in gzip.decompress(gz.read_bytes()).decode("utf-8").splitlines():
            row = json.loads(line)
            for i, m in enumerate(row.get("messages", [])):
                if m.get("role") != "assistant" or m.get("adapter", row.get("config")) != "genui":
                    continue
                parsed = parse_genui_output(m["content"])
                reply = parsed.to_dict()
                if served and not parsed.valid:
                    closed, fixes = close_card(parsed.obj, m["content"])
                    reply = {**reply, "valid": True, "errors": [], "closed": fixes, "a2ui": closed["a2ui"],
                             "text_response": closed["text_response"]}
                if isinstance(reply.get("a2ui"), list) and reply["a2ui"]:
                    out.append((f"{path.stem}:{row['suite']}:{row['config']}:{row['task']}:{i}", reply))
    return out


def table() -> str:  # pragma: no cover - a report, run by hand
    """The disagreement table: every official example, every task family's gold card, the broken
    variants of the validator tests and 200 random corruptions of gold cards, judged by our
    validator and by the official renderer."""
    import random
    from collections import defaultdict

    from a2ui_cases import EXAMPLES, corrupt, example_id, load
    from test_a2ui_broken import MUTATIONS

    from macaronic.genui.tasks import FAMILIES, make_task
    from macaronic.genui.validate import validate
    from playwright.sync_api import sync_playwright

    cases = [(f"example {example_id(p)}", load(p)) for p in EXAMPLES]
    cases += [(f"gold {f}-{i}", make_task(f, i).gold["a2ui"]) for f in FAMILIES for i in range(3)]
    for mutate in MUTATIONS:
        for p in EXAMPLES:
            messages = load(p)
            try:
                mutate(messages)
            except StopIteration:
                continue
            cases.append((f"broken:{mutate.__name__} {example_id(p)}", messages))
    for name, reply in recorded_replies():
        cases.append((f"recorded {name}", reply["a2ui"]))
    for name, reply in recorded_replies(served=True):
        cases.append((f"served {name}", reply["a2ui"]))
    rng = random.Random(1)
    golds = [make_task(f, 0).gold for f in FAMILIES]
    for i in range(200):
        bad = corrupt(golds[i % len(golds)], rng)
        cases.append((f"corrupted #{i}", bad.get("a2ui") if isinstance(bad, dict) else bad))
    rows = defaultdict(list)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path="/usr/bin/chromium", headless=True,
                                     args=["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                                           "--disable-background-networking", "--disable-component-update",
                                           "--disable-sync"])
        r = OfficialRenderer(browser)
        for name, messages in cases:
            ours = validate(messages)
            for as_is in (True, False):
                got = r.render(messages, as_is=as_is)
                if ours.valid != got.clean:
                    why = got.threw or (got.errors[0] if got.errors else "no component drawn" if not got.components else "")
                    rows[(name.split(" ")[0], ours.valid, got.clean, as_is)].append(
                        (name, (ours.errors[0]["message"] if ours.errors else ""), why[:90]))
        browser.close()
    out = [f"{len(cases)} cards; disagreements:", "",
           "| cards | ids as sent | ours | official | n | example | our first error | renderer |",
           "|---|---|---|---|---|---|---|---|"]
    for (kind, ov, oc, as_is), items in sorted(rows.items()):
        name, err, why = items[0]
        out.append(f"| {kind} | {'yes' if as_is else 'disambiguated'} | {'accepts' if ov else 'refuses'} "
                   f"| {'renders' if oc else 'fails'} | {len(items)} | {name} | {err[:70]} | {why} |")
    return "\n".join(out)


BENCH = """async ([messages, which, reps]) => {
  const host = document.getElementById('host');
  const settle = async () => {
    const all = root => [...root.querySelectorAll('*')].flatMap(n => n.shadowRoot ? [n, ...all(n.shadowRoot)] : [n]);
    for (let i = 0; i < 3; i++) await Promise.all(all(host).filter(n => n.updateComplete).map(n => n.updateComplete));
  };
  const t0 = performance.now();
  for (let i = 0; i < reps; i++) {
    for (const m of messages) {
      if (which === 'official') { window.renderCard(host, m); await settle(); }
      else { host.replaceChildren(); window.A2UI.render(host, m); }
      host.getBoundingClientRect();  // force layout in both cases
    }
  }
  return (performance.now() - t0) / (reps * messages.length);
}"""


def bench(reps: int = 5) -> str:  # pragma: no cover - a report, run by hand
    """Mean ms per card (render + layout) for the official renderer and the hand-written a2ui.js
    (as of commit 2df6a4c), measured alternately in one page on the 35 official examples, and the
    bytes each ships."""
    import subprocess

    from a2ui_cases import EXAMPLES, load
    from playwright.sync_api import sync_playwright

    # The hand-written renderer the chat used before; removed from the tree, read from history.
    HAND_WRITTEN = subprocess.run(["git", "show", "2df6a4c:src/macaronic/web/a2ui.js"], capture_output=True,
                                  text=True, check=True, cwd=Path(__file__).parent).stdout
    cards = [load(p) for p in EXAMPLES]
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path="/usr/bin/chromium", headless=True,
                                     args=["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                                           "--disable-background-networking", "--disable-component-update",
                                           "--disable-sync"])
        r = OfficialRenderer(browser)
        r.page.add_script_tag(content=HAND_WRITTEN)
        times = {"official": [], "a2ui.js": []}
        for _ in range(3):
            for which in times:
                times[which].append(r.page.evaluate(BENCH, [cards, which, reps]))
        browser.close()
    size = {"official": (WEB / "vendor" / "a2ui-lit.js").stat().st_size + (WEB / "a2ui-card.js").stat().st_size,
            "a2ui.js": len(HAND_WRITTEN.encode())}
    lines = ["| renderer | ms per card (3 rounds) | median | bytes shipped |", "|---|---|---|---|"]
    for which, ts in times.items():
        lines.append(f"| {which} | {', '.join(f'{t:.2f}' for t in ts)} | {sorted(ts)[1]:.2f} | {size[which]:,} |")
    return "\n".join(lines)


def probe(limit: int | None = None) -> str:  # pragma: no cover - runs the real specialist, minutes
    """The shipped genui specialist on the hand-written requests of `macaronic genui probe`
    (macaronic/data/genui_requests.json), through the served harness with constraints on, each
    served card then drawn by the official renderer."""
    import asyncio
    import json
    from importlib import resources

    from macaronic.engine.llm import EngineConfig, load_default_llm
    from macaronic.genui.probe import answer_all
    from macaronic.genui.validate import validate
    from macaronic.serve.mol import HarnessConfig, MoL
    from playwright.sync_api import sync_playwright

    requests = json.loads(resources.files("macaronic").joinpath("data/genui_requests.json").read_text())["requests"]
    requests = requests[:limit]
    llm = load_default_llm(EngineConfig.from_env(max_batch=max(1, min(16, len(requests)))))
    try:
        mol = MoL.from_llm(llm, config=HarnessConfig(summaries=False))
        results = asyncio.run(answer_all(mol, requests, 768))
    finally:
        llm.close()
    rows = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path="/usr/bin/chromium", headless=True,
                                     args=["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                                           "--disable-background-networking", "--disable-component-update",
                                           "--disable-sync"])
        r = OfficialRenderer(browser)
        cards = {}
        for req, res in zip(requests, results):
            genui = res.genui or {}
            card = {"text_response": genui.get("text_response", ""), "a2ui": genui.get("a2ui") or []}
            cards[req["id"]] = card
            got = r.render(card["a2ui"])
            rows.append((req["id"], validate(card).valid, got.clean, bool(got.text),
                         "fallback_text_card" in (genui.get("closed") or []), got.threw or (got.errors[:1] or [""])[0]))
        browser.close()
    if os.environ.get("MACARONIC_PROBE_CARDS"):  # keep the served cards, to look at the failures
        Path(os.environ["MACARONIC_PROBE_CARDS"]).write_text(json.dumps(cards, indent=1) + "\n")
    lines = [f"{len(rows)} requests: ours valid {sum(x[1] for x in rows)}, official renders {sum(x[2] for x in rows)}, "
             f"with text {sum(x[3] for x in rows)}, fallback text cards {sum(x[4] for x in rows)}", "",
             "| request | ours | official | text drawn | fallback | renderer error |", "|---|---|---|---|---|---|"]
    lines += [f"| {a} | {b} | {c} | {d} | {e} | {f[:80]} |" for a, b, c, d, e, f in rows]
    return "\n".join(lines)


if __name__ == "__main__":  # pragma: no cover
    sys.path.insert(0, str(Path(__file__).parent))
    if "--probe" in sys.argv:
        print(probe(int(sys.argv[sys.argv.index("--limit") + 1]) if "--limit" in sys.argv else None))
    else:
        print(bench() if "--bench" in sys.argv else table())
