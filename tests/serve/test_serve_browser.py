"""The web chat end to end in headless Chromium: a reply streams with its badge, a forced GenUI
turn renders an A2UI card inline, and clicking its button sends a userAction turn back."""

from __future__ import annotations

import json
import os
import re

import pytest

from test_serve_mol import card_reply

pytestmark = pytest.mark.browser
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
        "--disable-component-update", "--disable-sync"]


# The official renderer draws inside shadow roots, which innerText does not enter.
DEEP_TEXT = """el => { const out = []; const walk = n => { if (n.nodeType === 3) out.push(n.textContent);
  if (n.shadowRoot) walk(n.shadowRoot); for (const c of n.childNodes) walk(c); }; walk(el);
  return out.join(' ').replace(/\\s+/g, ' ').trim(); }"""


@pytest.fixture(scope="module")
def chromium():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=ARGS, headless=True)
        yield browser
        browser.close()


def test_chat_streams_shows_badge_renders_card_and_sends_user_action(chromium, inproc):
    url, mol, script = inproc
    script.replies["chat"] = "Hello from the chat specialist."
    script.replies["genui"] = lambda view: (
        '{"text_response":"Lunch confirmed.","a2ui":[{"deleteSurface":{"surfaceId":"s1"}}]}' if "userAction" in view[-1]["content"] else card_reply())
    page = chromium.new_page()
    page.route("**/*", lambda route: route.continue_() if route.request.url.startswith(url) else route.abort())
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(url + "/")
    page.wait_for_selector("#adapter option[value=genui]", state="attached")

    # 1. a forced chat turn streams in and gets its badge
    page.select_option("#adapter", "chat")
    page.fill("#input", "hi there")
    page.click("#send")
    page.wait_for_selector(".msg.assistant .badge")
    first = page.locator(".msg.assistant").nth(0)
    assert first.locator(".text").inner_text() == "Hello from the chat specialist."
    badge = first.locator(".badge .plain").inner_text()
    assert re.fullmatch(r"Answered by the chat specialist · you chose it · [\d.]+ tok/s · [\d.]+ s", badge), badge
    details = first.locator(".badge details")  # the technical details, one click away
    assert details.get_attribute("open") is None and not details.locator("dl").is_visible()
    details.locator("summary").click()
    tech = details.locator("dl").inner_text()
    assert "policy forced" in tech and "tokens computed" in tech and "reused" in tech and mol.pair_id in tech
    assert "first token after" in tech

    # 2. a forced GenUI turn renders the card inline
    page.select_option("#adapter", "genui")
    page.fill("#input", "a lunch card please")
    page.click("#send")
    page.wait_for_selector(".msg.assistant .card a2ui-button button")
    second = page.locator(".msg.assistant").nth(1)
    assert second.locator(".text").inner_text() == "Here is a card."
    assert "Lunch?" in second.locator(".card").evaluate(DEEP_TEXT)

    # 3. the card's button sends a userAction turn, routed back to genui without a route hop
    page.select_option("#adapter", "")  # auto: stickiness, not the toggle, picks genui
    second.locator("a2ui-button button").click()
    page.wait_for_selector(".msg.assistant:nth-of-type(6) .badge")
    third = page.locator(".msg.assistant").nth(2)
    assert "kept for the card's button" in third.locator(".badge .plain").inner_text()
    adapter, view = next((a, v) for a, v in reversed(script.seen) if "userAction" in v[-1]["content"])
    action = json.loads(view[-1]["content"])["userAction"]
    assert adapter == "genui" and action["name"] == "confirm" and action["context"] == {"slot": "noon"}
    assert page.locator(".msg.user.action").count() == 1
    # the reply's deleteSurface goes to the surface the earlier reply drew: that card is gone
    page.wait_for_function("document.querySelectorAll('a2ui-surface').length === 0")
    assert third.locator(".card").count() == 0
    assert not errors, errors
    page.close()


MARKDOWN_REPLY = """## Plan

1. **Bold** step with `inline code`
2. A [link](https://example.org) and a [bad one](javascript:alert(1))

<img src=x onerror="window.pwned=1"><script>window.pwned=2</script>

```python
print("<b>hi</b>")
```"""
TOOLS = [{"type": "function", "function": {"name": "add_reminder", "description": "Add a reminder",
          "parameters": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}}}]


def snapshot_check(name: str, png: bytes):
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parents[1] / "genui"))
    from official_renderer import compare_snapshot

    return compare_snapshot(name, png, directory=Path(__file__).parent / "snapshots")


def test_chat_renders_markdown_safely_and_tool_calls_as_collapsible_blocks(chromium, inproc):
    url, mol, script = inproc
    script.replies["chat"] = MARKDOWN_REPLY
    script.replies["agent"] = 'On it. <tool_call>{"name": "add_reminder", "arguments": {"text": "buy milk"}}</tool_call>'
    page = chromium.new_page(viewport={"width": 900, "height": 900}, device_scale_factor=1)
    page.route("**/*", lambda route: route.continue_() if route.request.url.startswith(url) else route.abort())
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("console", lambda m: m.type == "error" and errors.append(m.text))
    page.goto(url + "/")
    page.wait_for_selector("#adapter option[value=agent]", state="attached")

    page.select_option("#adapter", "chat")
    page.fill("#input", "make a plan")
    page.click("#send")
    page.wait_for_selector(".msg.assistant .badge")
    text = page.locator(".msg.assistant .text").nth(0)
    assert text.locator("h2").inner_text() == "Plan"
    assert text.locator("ol > li").count() == 2 and text.locator("strong").inner_text() == "Bold"
    assert text.locator("pre > code.language-python").inner_text().rstrip() == 'print("<b>hi</b>")'
    assert text.locator("a").count() == 1  # the javascript: link stays text
    assert text.locator("a").get_attribute("rel") == "noopener noreferrer"
    assert text.locator("img, script, b").count() == 0 and page.evaluate("window.pwned") is None
    assert '<img src=x onerror="window.pwned=1">' in text.inner_text()  # raw HTML shown, escaped

    page.locator("#tools-box summary").click()
    page.fill("#tools", json.dumps(TOOLS))
    page.select_option("#adapter", "agent")
    page.fill("#input", "remind me to buy milk")
    page.click("#send")
    page.wait_for_selector(".msg.assistant:nth-of-type(4) .badge")
    call = page.locator(".msg.assistant").nth(1).locator("details.tool-call")
    assert call.count() == 1 and call.get_attribute("open") is None  # collapsed
    assert "add_reminder" in call.locator("summary").inner_text()
    assert not call.locator("pre").is_visible()
    call.locator("summary").click()
    assert json.loads(call.locator("pre").inner_text()) == {"text": "buy milk"}
    sent = [v for a, v in script.seen if a == "agent"]
    assert sent and page.evaluate("MacaronicChat.history().at(-1).tool_calls[0].function.name") == "add_reminder"
    page.locator("#tools-box summary").click()  # fold the box again for the screenshot
    why = snapshot_check("chat-markdown-tools", page.locator("#log").screenshot(animations="disabled"))
    assert why is None, why
    assert not errors, errors
    page.close()


def ghost_card() -> str:
    card = json.loads(card_reply())
    column = next(c["component"]["Column"] for c in card["a2ui"][0]["surfaceUpdate"]["components"]
                  if "Column" in c["component"])
    column["children"]["explicitList"][0] = "ghost"  # a child that is not defined
    return json.dumps(card, separators=(",", ":"))  # compact, as the GenUI grammar admits


def test_chat_draws_a_card_the_harness_closed_with_a_note(chromium, inproc):
    url, mol, script = inproc
    script.replies["genui"] = ghost_card()
    page = chromium.new_page()
    page.route("**/*", lambda route: route.continue_() if route.request.url.startswith(url) else route.abort())
    page.goto(url + "/")
    page.wait_for_selector("#adapter option[value=genui]", state="attached")
    page.select_option("#adapter", "genui")
    page.fill("#input", "a lunch card please")
    page.click("#send")
    page.wait_for_selector(".msg.assistant .badge")
    reply = page.locator(".msg.assistant").nth(0)
    assert "completed by the harness" in reply.locator(".badge dl").text_content()
    assert reply.locator(".refused").count() == 0
    page.wait_for_selector(".msg.assistant a2ui-button button")
    assert reply.locator(".text").inner_text() == "Here is a card."
    # the same surface rendered anew (beginRendering) in a later reply: drawn there, and only there
    page.fill("#input", "again please")
    page.click("#send")
    page.wait_for_selector(".msg.assistant:nth-of-type(4) .badge")
    assert page.locator(".msg.assistant").nth(1).locator("a2ui-surface").count() == 1
    assert page.locator(".msg.assistant").nth(0).locator("a2ui-surface").count() == 0
    assert "drawn again in a later reply" in page.locator(".msg.assistant").nth(0).inner_text()
    page.close()


def test_chat_refuses_a_card_that_did_not_validate(chromium, scripted):
    """With constraints on, the harness closes every GenUI reply into a valid card; a server run
    without them (or a remote engine that ignores the grammar) can still send a broken one."""
    from serve_helpers import InProcessServer

    from macaronic.serve.app import create_app
    from macaronic.serve.mol import HarnessConfig, MoL

    mol, script = scripted
    srv = InProcessServer(create_app(MoL(mol.backend, mol.bundle, mol.router, config=HarnessConfig(constrain=False))))
    url = srv.url
    script.replies["genui"] = ghost_card()
    page = chromium.new_page()
    page.route("**/*", lambda route: route.continue_() if route.request.url.startswith(url) else route.abort())
    page.goto(url + "/")
    page.wait_for_selector("#adapter option[value=genui]", state="attached")
    page.select_option("#adapter", "genui")
    page.fill("#input", "a lunch card please")
    page.click("#send")
    page.wait_for_selector(".msg.assistant .refused")
    reply = page.locator(".msg.assistant").nth(0)
    assert "ghost" in reply.locator(".refused").inner_text()
    assert reply.locator("macaronic-a2ui, a2ui-surface").count() == 0  # never handed to the renderer
    page.close()
    srv.stop()


# ---- issue 42: cards that draw, conversations that last, the plain badge, feedback ----

# The official renderer's <a2ui-surface> sets style attributes (vendor/a2ui-lit.js), which only
# style-src-attr admits; the chat's own files need no inline script or style.
CSP = "default-src 'self'; script-src 'self'; style-src 'self'; style-src-attr 'unsafe-inline'; img-src 'self' data:"


def chat_page(chromium, url, **kw):
    """A fresh page on the chat under a strict CSP (what the server is to send), with every
    console error, page error and outside request collected in `page.problems`."""
    context = chromium.new_context(**kw)
    page = context.new_page()
    page.problems = []

    def only_ours(route):
        if not route.request.url.startswith(url):
            page.problems.append("outside request: " + route.request.url)
            return route.abort()
        if route.request.url.rstrip("/") == url:  # the page itself, with the policy
            response = route.fetch()
            return route.fulfill(response=response, headers={**response.headers, "content-security-policy": CSP})
        return route.continue_()

    page.route("**/*", only_ours)
    page.on("pageerror", lambda e: page.problems.append(str(e)))
    page.on("console", lambda m: m.type == "error" and page.problems.append(m.text))
    page.goto(url + "/")
    page.wait_for_selector("#adapter option[value=genui]", state="attached")
    return page


def ask(page, text, adapter=None):
    n = page.locator(".msg.assistant .badge, .msg.assistant .note").count()
    if adapter is not None:
        page.select_option("#adapter", adapter)
    page.fill("#input", text)
    page.click("#send")
    page.wait_for_function("n => document.querySelectorAll('.msg.assistant .badge, .msg.assistant .note').length > n"
                           " && !document.body.classList.contains('busy')", arg=n)


# Records what every streaming bubble showed, at each change; clicks Stop once `stop_when` is seen.
WATCH = """stopWhen => { window.shown = []; window.pending = 0;
  new MutationObserver(() => { for (const b of document.querySelectorAll('.msg.streaming')) {
      const t = b.querySelector('.text').textContent; window.shown.push(t);
      if (b.querySelector('.card-pending')) window.pending++;
      if (stopWhen && t.includes(stopWhen) && b.querySelector('.card-pending')) { stopWhen = null;
        document.getElementById('stop').click(); } } })
    .observe(document.getElementById('log'), {subtree: true, childList: true, characterData: true}); }"""


def icon_card() -> str:
    from macaronic.genui.build import Card, bound

    c = Card("s1")
    icon = c.add("when", "Icon", name=bound("calendarToday"))
    c.column("root", icon, c.text("title", "Lunch?"), c.button("ok", "Confirm", "confirm", {"slot": "noon"}))
    return json.dumps({"text_response": "Here is a card.", "a2ui": c.messages("root")}, separators=(",", ":"))


# What each drawn A2UI icon's content needs (scrollWidth: its box is 1em wide, overflow hidden):
# about 24 px for a glyph, far more for its name drawn as text.
ICON_WIDTHS = """() => { const out = []; const walk = n => { if (n.classList && n.classList.contains('g-icon'))
  out.push([n.textContent, n.scrollWidth]); if (n.shadowRoot) walk(n.shadowRoot);
  for (const c of n.children || []) walk(c); }; walk(document.body); return out; }"""


def test_a_card_streams_as_its_text_and_a_placeholder_never_json_and_stop_drops_it(chromium, inproc):
    url, mol, script = inproc
    script.replies["genui"] = icon_card()
    page = chat_page(chromium, url)
    page.evaluate(WATCH, None)
    ask(page, "a lunch card please", "genui")
    shown = page.evaluate("window.shown")
    assert shown and page.evaluate("window.pending") > 0  # the placeholder was up while it decoded
    assert not [t for t in shown if t.lstrip().startswith("{") or "surfaceUpdate" in t or "a2ui" in t], shown
    assert any(t.strip() == "Here is a card." for t in shown)  # its text_response, as it decoded
    reply = page.locator(".msg.assistant").nth(0)
    assert reply.locator(".text").inner_text() == "Here is a card." and reply.locator(".card-pending").count() == 0
    page.wait_for_selector("a2ui-button button")
    assert page.locator("a2ui-surface").count() == 1  # drawn once
    page.evaluate("document.fonts.ready")
    assert [(name, w <= 30) for name, w in page.evaluate(ICON_WIDTHS)] == [("calendar_today", True)]  # a glyph

    # Stop while the next card decodes: its text stays, the unfinished card leaves the history
    page.evaluate(WATCH, "Here is a card.")
    ask(page, "another one")
    cut = page.locator(".msg.assistant").nth(1)
    assert "the unfinished card was dropped" in cut.inner_text() and "error" not in cut.get_attribute("class")
    assert cut.locator(".text").inner_text() == "Here is a card." and cut.locator(".card, a2ui-surface").count() == 0
    history = page.evaluate("MacaronicChat.history()")
    assert history[-1] == {"role": "assistant", "content": "Here is a card."}
    assert not [m for m in history if m["role"] == "assistant" and "surfaceUpdate" in m["content"][:20]]
    assert page.locator("a2ui-surface").count() == 1
    # every prefix of a card, fenced or not, escapes cut anywhere: a card, and a prefix of its text
    full = "```json\n" + json.dumps({"text_response": 'Say "hi" \u00e9\\', "a2ui": []}) + "\n```"
    bad = page.evaluate(PREFIXES, full)
    assert bad == [], bad
    assert page.evaluate("async () => { const m = await import('/static/cardstream.js'); return"
                         " ['Hello', '```python\\nprint(1)', '{\"id\": 1}'].map(m.looksLikeCard); }") == [False] * 3
    assert not page.problems, page.problems
    page.context.close()


PREFIXES = """async full => { const m = await import('/static/cardstream.js'); const said = JSON.parse(
  full.slice(full.indexOf('{'), full.lastIndexOf('}') + 1)).text_response; const bad = [];
  for (let i = 1; i <= full.length; i++) { const t = full.slice(0, i);
    if (!m.looksLikeCard(t) || !said.startsWith(m.partialTextResponse(t))) bad.push(t); }
  if (m.partialTextResponse(full) !== said) bad.push('whole'); return bad; }"""


CODE_REPLY = "Like this:\n\n```python\nprint(1)\n```"


def test_conversations_last_across_a_reload_with_the_controls_a_chat_ui_has(chromium, inproc):
    url, mol, script = inproc
    script.replies["chat"] = CODE_REPLY
    script.replies["genui"] = icon_card()
    page = chat_page(chromium, url, color_scheme="dark", viewport={"width": 1100, "height": 760})
    page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    sent = []
    page.on("request", lambda r: r.url.endswith("/v1/chat/completions") and sent.append(json.loads(r.post_data)))
    # the welcome screen: one example per specialist; a click fills the input
    assert page.locator("#welcome").is_visible()
    assert page.locator("#examples button").evaluate_all("bs => bs.map(b => b.dataset.role)") == mol.bundle.role_names
    page.locator("#examples button[data-role=coding]").click()
    assert "palindrome" in page.input_value("#input")
    # dark by prefers-color-scheme, light by the toggle (kept)
    background = "() => getComputedStyle(document.body).backgroundColor"
    assert page.evaluate(background) == "rgb(22, 24, 29)"
    page.click("#theme")
    assert page.evaluate(background) == "rgb(246, 247, 249)"
    # settings go with each request
    page.locator("#settings-box summary").click()
    page.fill("#temperature", "0.3")
    page.fill("#max-tokens", "600")
    page.fill("#system", "Be terse.")
    ask(page, "show me code", "chat")
    assert sent[-1]["temperature"] == 0.3 and sent[-1]["max_tokens"] == 600
    assert sent[-1]["messages"][0] == {"role": "system", "content": "Be terse."}
    # code: highlighted, with a language label and a copy button
    head = page.locator(".msg.assistant .code-head")
    assert head.locator(".lang").inner_text() == "python"
    assert page.locator(".msg.assistant pre code.hljs .hljs-built_in").inner_text() == "print"  # highlighted
    head.locator("button").click()
    assert page.evaluate("navigator.clipboard.readText()") == "print(1)\n"
    ask(page, "a lunch card please", "genui")
    page.wait_for_selector("a2ui-button button")
    before = page.evaluate("MacaronicChat.history()")

    page.reload()  # the conversation, its card (once), the theme and the settings survive
    page.wait_for_selector("a2ui-button button")
    assert page.evaluate("MacaronicChat.history()") == before and page.locator("a2ui-surface").count() == 1
    assert page.locator(".msg.assistant .badge").count() == 2 and not page.locator("#welcome").is_visible()
    assert page.evaluate(background) == "rgb(246, 247, 249)" and page.input_value("#max-tokens") == "600"
    items = page.locator("#conversations li")
    assert items.count() == 1 and items.locator(".open").inner_text() == "show me code"
    if os.environ.get("MACARONIC_WEB_SCREENSHOT"):  # the README's picture of the chat
        page.screenshot(path=os.environ["MACARONIC_WEB_SCREENSHOT"])

    # regenerate the last reply: answered again, same number of replies
    seen = len(script.seen)
    page.locator(".msg.assistant .regen").click()
    page.wait_for_function("() => !document.body.classList.contains('busy') && document.querySelector('.regen')")
    assert len(script.seen) > seen and page.locator(".msg.assistant").count() == 2
    # edit the first message: everything after it goes, the edited one is sent
    page.select_option("#adapter", "chat")
    page.locator(".msg.user").nth(0).get_by_role("button", name="Edit").click()
    page.fill(".edit-box", "show me code again")
    page.locator(".msg.user.editing").get_by_role("button", name="Send").click()
    page.wait_for_function("() => !document.body.classList.contains('busy') && document.querySelector('.regen')")
    assert [m["content"] for m in page.evaluate("MacaronicChat.history()") if m["role"] == "user"] == ["show me code again"]
    assert sent[-1]["messages"][-1] == {"role": "user", "content": "show me code again"}

    # rename, export, a new chat, open the old one again, delete
    items.locator(".rename").click()
    page.fill("#conversations .rename-box", "My code chat")
    page.press("#conversations .rename-box", "Enter")
    assert items.locator(".open").inner_text() == "My code chat"
    with page.expect_download() as download:
        page.click("#export")
    exported = json.loads(open(download.value.path()).read())
    assert exported["title"] == "My code chat" and exported["entries"][0]["content"] == "show me code again"
    page.click("#clear")
    assert page.locator("#welcome").is_visible() and page.locator(".msg").count() == 0 and items.count() == 1
    items.locator(".open").click()
    assert page.locator(".msg.assistant").count() == 1 and "print(1)" in page.locator(".msg.assistant").inner_text()
    items.locator(".delete").click()
    items.locator(".delete").click()  # the second click confirms
    assert items.count() == 0 and page.locator("#welcome").is_visible()
    page.reload()
    page.wait_for_selector("#welcome")
    assert items.count() == 0
    assert not page.problems, page.problems
    page.context.close()


def test_the_badge_speaks_plainly_and_feedback_reaches_the_store(chromium, server):
    """Against the `macaronic serve` subprocess (tiny random models, the prompted router, a store file)."""
    import sqlite3

    page = chat_page(chromium, server.url)
    page.locator("#settings-box summary").click()
    page.fill("#max-tokens", "8")
    ask(page, "hello, how are you today?", "")  # routed
    reply = page.locator(".msg.assistant").nth(0)
    line = reply.locator(".badge .plain").inner_text()
    assert re.fullmatch(r"Answered by the (chat|agent|coding|genui) specialist · chosen in \d+ ms · [\d.]+ tok/s · [\d.]+ s",
                        line), line
    # up, then "wrong specialist": each a row in the server's store, kept by the page
    rid = page.evaluate("MacaronicChat.state.conv.entries.at(-1).id")
    assert rid.startswith("chatcmpl-")
    reply.locator(".fb-up").click()
    page.wait_for_function("() => document.querySelector('.fb-status').dataset.sent === '1'")
    reply.locator(".fb-specialist").select_option("coding")
    page.wait_for_function("() => document.querySelector('.fb-status').dataset.sent === '2'")
    reply.locator(".fb-comment").fill("it was a code question")  # free text, sent with the verdict
    reply.locator(".fb-comment").press("Enter")
    page.wait_for_function("() => document.querySelector('.fb-status').dataset.sent === '3'")
    rows = sqlite3.connect(server.store).execute(
        "SELECT rating, expected_specialist, comment FROM feedback WHERE response_id = ? ORDER BY id", (rid,)).fetchall()
    # each row the whole verdict so far
    assert rows == [("up", None, None), ("up", "coding", None), ("up", "coding", "it was a code question")]
    page.reload()
    page.wait_for_selector(".msg.assistant .feedback")
    assert reply.locator(".fb-up").get_attribute("aria-pressed") == "true"
    assert reply.locator(".fb-specialist").input_value() == "coding"
    assert reply.locator(".fb-comment").input_value() == "it was a code question"
    assert not page.problems, page.problems
    page.context.close()
