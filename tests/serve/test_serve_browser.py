"""The web chat end to end in headless Chromium: a reply streams with its badge, a forced GenUI
turn renders an A2UI card inline, and clicking its button sends a userAction turn back."""

from __future__ import annotations

import json

import pytest

from test_serve_harness import card_reply

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
    badge = first.locator(".badge").inner_text()
    assert "chat" in badge and "forced" in badge and "prefill" in badge and "reused" in badge

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
    assert "sticky-action" in third.locator(".badge").inner_text()
    adapter, view = next((a, v) for a, v in reversed(script.seen) if "userAction" in v[-1]["content"])
    action = json.loads(view[-1]["content"])["userAction"]
    assert adapter == "genui" and action["name"] == "confirm" and action["context"] == {"slot": "noon"}
    assert page.locator(".msg.user.action").count() == 1
    assert not errors, errors
    page.close()
