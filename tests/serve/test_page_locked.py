"""The web page is locked to its server (issue 41 item 5): every response carries a CSP and the
other browser headers, the page runs under that CSP with a clean console, an image URL outside
the server in a reply's markdown or in a card (an Image literal, an Image bound to the data
model, markdown in a Text) makes no request to another host, and /docs, /redoc, /openapi.json
are off unless `--api-docs` (then the schema is behind the API key; the CDN pages never)."""

from __future__ import annotations

import json

import httpx
import pytest

from serve_helpers import ServerProcess, model_args
from test_serve_browser import ARGS, DEEP_TEXT

from macaronic.genui.build import Card

CSP = ("default-src 'self'; script-src 'self'; style-src 'self'; style-src-attr 'unsafe-inline'; "
       "img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'")
OUTSIDE = "https://images.example.net/pixel.png"
PIXEL = "data:image/gif;base64,R0lGODlhAQABAAAAACw="  # an image the page may show: no request
# every src/href-like attribute in the document, shadow roots included
DEEP_SOURCES = """() => { const out = []; const walk = n => { if (n.nodeType === 1) for (const a of ['src', 'srcset',
  'poster', 'background']) if (n.hasAttribute(a)) out.push(n.getAttribute(a)); if (n.shadowRoot) walk(n.shadowRoot);
  for (const c of n.childNodes) walk(c); }; walk(document.documentElement); return out; }"""


@pytest.fixture(scope="module")
def plain(tiny_models, tmp_path_factory):
    """A real `macaronic serve` with the defaults: no --api-docs, no key."""
    store = tmp_path_factory.mktemp("locked") / "state.sqlite"
    s = ServerProcess([*model_args(*tiny_models), "--router-policy", "none", "--store", str(store),
                       "--max-tokens-limit", "64"])
    yield s
    s.stop()


def test_every_page_and_file_carries_the_lock_headers(plain):
    for path in ("/", "/static/chat.js", "/static/chat.css", "/static/a2ui-demo.html", "/health", "/nope"):
        r = httpx.get(plain.url + path)
        assert r.headers["content-security-policy"] == CSP, path
        assert r.headers["x-content-type-options"] == "nosniff", path
        assert r.headers["x-frame-options"] == "DENY", path
        assert r.headers["referrer-policy"] == "no-referrer", path


def test_api_docs_are_off_by_default(plain):
    for path in ("/docs", "/redoc", "/openapi.json", "/docs/oauth2-redirect"):
        r = httpx.get(plain.url + path)
        assert r.status_code == 404, (path, r.status_code)


def test_api_docs_flag_serves_the_schema_behind_the_key(tiny_models, tmp_path):
    key = "k-" + "7" * 20
    s = ServerProcess([*model_args(*tiny_models), "--router-policy", "none", "--store", str(tmp_path / "s.sqlite"),
                       "--api-docs", "--api-key", key])
    try:
        assert httpx.get(s.url + "/openapi.json").status_code == 401
        r = httpx.get(s.url + "/openapi.json", headers={"Authorization": f"Bearer {key}"})
        assert r.status_code == 200 and "/v1/chat/completions" in r.json()["paths"]
        for path in ("/docs", "/redoc"):  # they load scripts from a CDN: never served
            assert httpx.get(s.url + path, headers={"Authorization": f"Bearer {key}"}).status_code == 404
    finally:
        s.stop()


@pytest.fixture(scope="module")
def chromium():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=ARGS, headless=True)
        yield browser
        browser.close()


def watched_page(chromium, url):
    """A page whose requests to other hosts are recorded (and aborted) and whose console errors,
    warnings and uncaught exceptions are collected."""
    page = chromium.new_page()
    outside, console = [], []
    page.on("request", lambda r: None if r.url.startswith(url) else outside.append(r.url))
    page.route("**/*", lambda route: route.continue_() if route.request.url.startswith(url) else route.abort())
    page.on("console", lambda m: m.type in ("error", "warning") and console.append(m.text))
    page.on("pageerror", lambda e: console.append(str(e)))
    return page, outside, console


@pytest.mark.browser
def test_outside_images_in_replies_and_cards_are_never_fetched(chromium, inproc):
    url, _, script = inproc
    script.replies["chat"] = f"Look: ![a cat]({OUTSIDE}?reply) and [a link](https://example.org/)."
    c = Card("s1")
    c.column("root", c.text("title", "Photos"), c.add("pic", "Image", url={"literalString": OUTSIDE + "?card"}),
             c.add("bound", "Image", url={"path": "/photo"}),
             c.text("md", f"see ![in text]({OUTSIDE}?text)"), c.add("own", "Image", url={"literalString": PIXEL}))
    c.data({"photo": OUTSIDE + "?bound"})
    script.replies["genui"] = json.dumps({"text_response": f"A card ![x]({OUTSIDE}?genui)", "a2ui": c.messages("root")},
                                         separators=(",", ":"))
    page, outside, console = watched_page(chromium, url)
    page.goto(url + "/")
    page.wait_for_selector("#adapter option[value=genui]", state="attached")
    page.select_option("#adapter", "chat")
    page.fill("#input", "show me a picture")
    page.click("#send")
    page.wait_for_selector(".msg.assistant .badge")
    page.select_option("#adapter", "genui")
    page.fill("#input", "a photo card")
    page.click("#send")
    page.wait_for_selector(".msg.assistant:nth-of-type(4) .badge")
    page.wait_for_function("document.querySelector('.msg.assistant:nth-of-type(4) a2ui-surface') !== null")
    page.wait_for_timeout(500)  # let the renderer settle and any image start loading
    assert not outside, outside
    assert not console, console
    first, second = page.locator(".msg.assistant").nth(0), page.locator(".msg.assistant").nth(1)
    assert "[image: a cat]" in first.locator(".text").inner_text()
    assert first.locator("a").get_attribute("href") == "https://example.org/"  # links stay: a click, not a load
    assert "[image: x]" in second.locator(".text").inner_text()
    card = second.locator(".card").evaluate(DEEP_TEXT)
    assert "Photos" in card and "image not loaded: outside this server" in card and "Invalid image URL" in card, card
    sources = page.evaluate(DEEP_SOURCES)
    assert sources and all(s.startswith(("data:", "/", url)) for s in sources), sources
    page.close()


@pytest.mark.browser
def test_the_pages_run_under_the_csp_with_a_clean_console(chromium, plain):
    for path, ready in (("/", "#adapter option[value=chat]"), ("/static/a2ui-demo.html", "a2ui-surface")):
        page, outside, console = watched_page(chromium, plain.url)
        page.goto(plain.url + path)
        page.wait_for_selector(ready, state="attached")
        page.wait_for_timeout(300)
        assert not outside and not console, (path, outside, console)
        page.close()
