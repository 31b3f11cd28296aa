"""The web chat's files are served from the package: the official A2UI renderer bundle (built
from the npm lockfile by scripts/build_web, rebuilt and compared byte for byte by
`scripts/setup --test`), its licenses, the glue modules, and nothing outside the list."""

from __future__ import annotations

import json
from pathlib import Path

import httpx

ROOT = Path(__file__).parents[2]


def test_the_bundle_is_pinned_by_the_lockfile():
    lock = json.loads((ROOT / "package-lock.json").read_text())
    packages = lock["packages"]
    assert packages["node_modules/@a2ui/lit"]["version"] == "0.11.0"
    assert packages["node_modules/@a2ui/lit"]["integrity"].startswith("sha512-")
    licenses = (ROOT / "src/macaronic/web/vendor/LICENSES.txt").read_text()
    for name in ("@a2ui/lit 0.11.0", "@a2ui/web_core 0.11.0", "lit 3.", "markdown-it 14.", "dompurify 3.",
                 "highlight.js 11.", "material-icons 1."):
        assert f"==== {name}" in licenses, name


def test_serve_ships_the_renderer_and_refuses_other_paths(inproc):
    url, _, _ = inproc
    page = httpx.get(url + "/")
    assert '<script type="module" src="/static/chat.js">' in page.text
    for name, kind in [("chat.js", "javascript"), ("a2ui-card.js", "javascript"), ("markdown.js", "javascript"),
                       ("vendor/a2ui-lit.js", "javascript"), ("vendor/LICENSES.txt", "text/plain"),
                       ("a2ui-card-v09.js", "javascript"), ("vendor/a2ui-lit-v09.js", "javascript"),
                       ("a2ui-demo.html", "text/html"), ("favicon.svg", "image/svg+xml"),
                       ("vendor/material-icons-outlined.woff2", "font/woff2"),
                       *[(m, "javascript") for m in ("badge.js", "cardstream.js", "conversations.js", "feedback.js", "toolrun.js",
                                                      "settings.js")]]:
        r = httpx.get(f"{url}/static/{name}")
        assert r.status_code == 200 and kind in r.headers["content-type"], name
    bundle = httpx.get(url + "/static/vendor/a2ui-lit.js").text
    assert "a2ui-surface" in bundle and "a2uiaction" in bundle  # the official renderer's elements
    v09 = httpx.get(url + "/static/vendor/a2ui-lit-v09.js").text  # v0.9's, renamed to live beside them
    assert "a2ui09-surface" in v09 and "a2ui09-choicepicker" in v09 and "'a2ui-surface'" not in v09
    for bad in ("vendor%2F..%2Fchat.js", "..%2Fserve%2Fapp.py", "vendor/missing.js", "package.json", "a2ui.js"):
        r = httpx.get(f"{url}/static/{bad}")
        assert r.status_code == 404 and "no static file" in r.json()["error"]["message"], bad


def test_the_chat_page_has_no_inline_script_or_style():
    """So a strict Content-Security-Policy (script-src 'self'; style-src 'self') admits the page."""
    import re

    html = (ROOT / "src/macaronic/web/chat.html").read_text()
    assert not re.search(r"<script(?![^>]*\bsrc=)", html) and "<style" not in html
    assert not re.search(r"\sstyle=|\son[a-z]+=", html)
    assert '<link rel="icon" type="image/svg+xml" href="/static/favicon.svg">' in html
