"""Tools that run, in headless Chromium under the strict CSP: with built-in tools on, the agent's
call executes on the server's substrate, the page shows the call and its result (collapsed) and
sends the result back until the agent answers in text; a call nothing runs, an agent without
tools, and an agent that never stops calling each end the turn with a note, never an endless "…"."""

from __future__ import annotations

import json

import httpx
import pytest

from test_serve_browser import DEEP_TEXT, TOOLS, chat_page, chromium  # noqa: F401 (fixture)

pytestmark = pytest.mark.browser
CALL = '<tool_call>{"name": "add_reminder", "arguments": {"title": "call Sam", "due": "2031-05-04"}}</tool_call>'


def agent(view):
    return "Done: I will remind you to call Sam." if view[-1]["role"] == "tool" else "On it. " + CALL


def turn_over(page, n_notes_or_badges):
    page.wait_for_function("n => document.querySelectorAll('.msg.assistant .badge, .msg .note').length >= n"
                           " && !document.body.classList.contains('busy')", arg=n_notes_or_badges, timeout=60000)


def reminders_only(page, url):
    """The tiny test model's context (2,048 tokens) holds a few tools, not all 23 (the real bases
    hold them all): the page gets the server's own reminder schemas, nothing else."""
    full = httpx.get(url + "/v1/tools").json()

    def few(route):
        data = [t for t in full["data"] if "reminder" in t["function"]["name"] or t["function"]["name"] == "get_today"]
        names = {t["function"]["name"] for t in data}
        route.fulfill(json={"object": "list", "data": data, "writes": [w for w in full["writes"] if w in names]})

    page.route(url + "/v1/tools", few)


def ask(page, text):
    page.fill("#input", text)
    page.click("#send")


def test_builtin_tools_run_on_the_server_and_the_agent_goes_on(chromium, inproc):  # noqa: F811
    url, mol, script = inproc
    script.replies["agent"] = agent
    page = chat_page(chromium, url)
    reminders_only(page, url)
    page.select_option("#adapter", "agent")
    page.locator("#tools-box summary").click()
    page.check("#builtin-tools")
    ask(page, "remind me to call Sam on 4 May 2031")
    # a call that changes something waits for the user: nothing ran yet
    page.wait_for_selector(".confirm-call:has-text('add_reminder')", timeout=60000)
    assert 'title: "call Sam"' in page.locator(".confirm-call").inner_text()
    pending = httpx.post(url + "/v1/tools/execute", json={"name": "list_reminders", "arguments": {"query": "call Sam"}})
    assert pending.json()["result"]["reminders"] == []
    page.click(".confirm-call button.allow")
    page.wait_for_selector(".msg.assistant:last-child .text:has-text('Done: I will remind you')", timeout=60000)
    assert page.locator(".confirm-call").count() == 0
    turn_over(page, 2)

    call = page.locator(".msg.assistant").nth(0).locator("details.tool-call")
    assert "add_reminder" in call.locator("summary").inner_text()
    result = page.locator(".msg.tool details.tool-result")
    assert result.count() == 1 and result.get_attribute("open") is None  # collapsed
    assert result.locator("summary").inner_text() == "tool result · add_reminder"
    result.locator("summary").click()
    shown = json.loads(result.locator("pre").inner_text())
    assert "error" not in shown and "call Sam" in json.dumps(shown)

    # the call ran on the server's substrate: the reminder is there
    listed = httpx.post(url + "/v1/tools/execute", json={"name": "list_reminders", "arguments": {"query": "call Sam"}})
    assert [r["title"] for r in listed.json()["result"]["reminders"]] == ["call Sam"]
    # the agent saw the built-in schemas, then the result
    views = [v for a, v in script.seen if a == "agent"]
    assert any(v[-1]["role"] == "tool" and "call Sam" in v[-1]["content"] for v in views)
    roles = page.evaluate("MacaronicChat.history().map(m => m.role)")
    assert roles == ["user", "assistant", "tool", "assistant"]
    assert page.evaluate("MacaronicChat.history()[2].tool_call_id") == page.evaluate(
        "MacaronicChat.history()[1].tool_calls[0].id")
    assert page.locator(".msg.assistant .text:has-text('…')").count() == 0

    page.reload()  # the same page from storage: the result block and the toggle stay
    page.wait_for_selector(".msg.tool details.tool-result")
    assert page.locator(".msg.tool").count() == 1 and page.is_checked("#builtin-tools")
    assert not page.problems, page.problems
    page.context.close()


def test_a_denied_change_does_not_run_and_the_agent_is_told(chromium, inproc):  # noqa: F811
    """Deny: the call never reaches the server, the agent gets a refused result and answers; a read
    (get_today) runs without asking; Stop while asking runs nothing either."""
    url, mol, script = inproc
    script.replies["agent"] = agent
    assert set(httpx.get(url + "/v1/tools").json()["writes"]) >= {"add_reminder"}
    assert "get_today" not in httpx.get(url + "/v1/tools").json()["writes"]
    page = chat_page(chromium, url)
    reminders_only(page, url)
    page.select_option("#adapter", "agent")
    page.locator("#tools-box summary").click()
    page.check("#builtin-tools")
    ask(page, "remind me to call Sam on 4 May 2031")
    page.wait_for_selector(".confirm-call", timeout=60000)
    page.click(".confirm-call button.deny")
    page.wait_for_selector(".msg.assistant:last-child .text:has-text('Done')", timeout=60000)
    turn_over(page, 2)
    assert page.locator(".msg.tool summary").inner_text() == "tool refused · add_reminder"
    assert "declined" in page.evaluate("MacaronicChat.history()[2].content")
    views = [v for a, v in script.seen if a == "agent"]
    assert any(v[-1]["role"] == "tool" and "declined" in v[-1]["content"] for v in views)
    listed = httpx.post(url + "/v1/tools/execute", json={"name": "list_reminders", "arguments": {"query": "call Sam"}})
    assert listed.json()["result"]["reminders"] == []

    # Stop while the page asks: nothing runs, the turn ends
    page.click("#clear")
    ask(page, "remind me to call Sam on 4 May 2031")
    page.wait_for_selector(".confirm-call", timeout=60000)
    page.click("#stop")
    page.wait_for_selector("text=stopped before the tools ran", timeout=30000)
    assert page.locator(".confirm-call").count() == 0 and not page.is_disabled("#send")
    listed = httpx.post(url + "/v1/tools/execute", json={"name": "list_reminders", "arguments": {"query": "call Sam"}})
    assert listed.json()["result"]["reminders"] == []

    # a read runs without asking
    script.replies["agent"] = lambda v: ("Today it is." if v[-1]["role"] == "tool"
                                         else '<tool_call>{"name": "get_today", "arguments": {}}</tool_call>')
    page.click("#clear")
    ask(page, "what day is it")
    page.wait_for_selector(".msg.assistant:last-child .text:has-text('Today it is.')", timeout=60000)
    assert page.locator(".msg.tool summary").inner_text() == "tool result · get_today"
    assert not page.problems, page.problems
    page.context.close()


def test_what_nothing_runs_ends_the_turn_with_a_note(chromium, inproc):  # noqa: F811
    url, mol, script = inproc
    script.replies["agent"] = agent
    page = chat_page(chromium, url)
    reminders_only(page, url)
    page.select_option("#adapter", "agent")

    # tools off: the agent can only write a call as text; the page says tools are off
    ask(page, "remind me to call Sam")
    turn_over(page, 2)
    last = page.locator(".msg.assistant").last
    assert "tools are off" in last.locator(".tool-note").inner_text()

    # a tool typed into the Tools box: the call is shown, nothing runs it, the turn ends with a note
    page.locator("#tools-box summary").click()
    page.fill("#tools", json.dumps(TOOLS))
    ask(page, "remind me again")
    page.wait_for_selector(".tool-note:has-text('nothing on this page runs add_reminder')", timeout=60000)
    turn_over(page, 4)
    last = page.locator(".msg.assistant").last
    assert last.locator("details.tool-call").count() == 1 and page.locator(".msg.tool").count() == 0
    before = last.locator(".text").evaluate("el => getComputedStyle(el, '::before').content")
    assert before in ("none", "normal", ""), before  # no endless "…"
    assert not page.is_disabled("#send")

    # an agent that never stops calling: bounded rounds, then a note (in a new chat: the tiny
    # model's context is short)
    page.click("#clear")
    page.fill("#tools", "")
    page.check("#builtin-tools")
    script.replies["agent"] = '<tool_call>{"name": "get_today", "arguments": {}}</tool_call>'
    ask(page, "what day is it")
    page.wait_for_selector(".tool-note:has-text('stopped after 5 tool rounds')", timeout=120000)
    turn_over(page, 1)
    assert page.locator(".msg.tool").count() == 5 and page.locator(".msg.assistant").count() == 5
    assert not page.problems, page.problems
    page.context.close()


@pytest.mark.long  # over 15 s on 2 cores: the long CI step keeps the default suite under 15 minutes
@pytest.mark.real_model
def test_real_agent_acts_through_the_page_on_a_real_server(chromium, tmp_path):  # noqa: F811
    """The real default base and its shipped agent adapter behind `macaronic serve`, at temperature
    0: with built-in tools on, the routed turn calls add_reminder, the call runs on the server's
    substrate file (a real row in SQLite), and the agent answers in text after the result; with
    tools off, the page says so under the reply."""
    import sqlite3

    from serve_helpers import ServerProcess

    s = ServerProcess(["--store", str(tmp_path / "state.sqlite")], timeout=300)
    try:
        page = chat_page(chromium, s.url)
        page.locator("#settings-box summary").click()
        page.fill("#temperature", "0")
        page.locator("#settings-box summary").click()
        page.locator("#tools-box summary").click()
        page.check("#builtin-tools")
        ask(page, "Remind me to call Sam tomorrow at 9 am.")
        page.wait_for_selector(".confirm-call:has-text('add_reminder')", timeout=120000)
        page.click(".confirm-call button.allow")
        page.wait_for_selector(".msg.tool", timeout=120000)
        turn_over(page, 2)
        assert page.locator(".msg.tool summary").first.inner_text() == "tool result · add_reminder"
        last = page.locator(".msg.assistant").last
        assert last.locator(".text").inner_text().strip() and last.locator("details.tool-call").count() == 0
        rows = sqlite3.connect(tmp_path / "substrate.sqlite").execute(
            "SELECT title FROM reminders WHERE id > 12").fetchall()  # the seeded world has 12
        assert len(rows) == 1 and "Sam" in rows[0][0], rows

        page.uncheck("#builtin-tools")
        page.click("#clear")
        ask(page, "Remind me to call Sam tomorrow at 9 am.")
        page.wait_for_selector(".tool-note:has-text('tools are off')", timeout=120000)
        assert not page.problems, page.problems
        page.context.close()
    finally:
        s.stop()


# What the genui specialist writes (v0.8, compact): a text field, a choice and a button.
BOOKING = json.dumps({"text_response": "Book a table.", "a2ui": [
    {"surfaceUpdate": {"surfaceId": "book", "components": [
        {"id": "root", "component": {"Column": {"children": {"explicitList": ["title", "name", "time", "go"]}}}},
        {"id": "title", "component": {"Text": {"text": {"literalString": "Table for tonight"}, "usageHint": "h3"}}},
        {"id": "name", "component": {"TextField": {"label": {"literalString": "Your name"}, "text": {"path": "/name"}}}},
        {"id": "time", "component": {"MultipleChoice": {"selections": {"path": "/time"},
            "options": [{"label": {"literalString": "7 pm"}, "value": "19"},
                        {"label": {"literalString": "9 pm"}, "value": "21"}], "maxAllowedSelections": 1}}},
        {"id": "go-label", "component": {"Text": {"text": {"literalString": "Book"}}}},
        {"id": "go", "component": {"Button": {"child": "go-label", "action": {
            "name": "book", "context": [{"key": "name", "value": {"path": "/name"}},
                                        {"key": "party", "value": {"literalNumber": 2}}]}}}}]}},
    {"dataModelUpdate": {"surfaceId": "book", "contents": [
        {"key": "name", "valueString": ""}, {"key": "time", "valueString": "[\"19\"]"}]}},
    {"beginRendering": {"surfaceId": "book", "root": "root"}}]}, separators=(",", ":"))


def test_a_v09_card_draws_with_its_field_choice_and_button_and_its_action_comes_back(chromium, inproc):  # noqa: F811
    """The page's setting asks for A2UI v0.9: the server converts the specialist's card, and the
    official v0.9 renderer draws it once, under the strict CSP, with no outside request; typing,
    choosing and pressing the button send the userAction the specialist reads."""
    url, _, script = inproc
    script.replies["genui"] = lambda view: (
        '{"text_response":"Booked.","a2ui":[]}' if "userAction" in view[-1]["content"] else BOOKING)
    page = chat_page(chromium, url)
    page.locator("#settings-box summary").click()
    page.select_option("#a2ui-version", "0.9")
    page.fill("#max-tokens", "1500")  # the whole card, in the tiny test model's tokens
    page.select_option("#adapter", "genui")
    ask(page, "book a table for tonight")
    page.wait_for_selector(".card[data-a2ui-version='0.9'] a2ui09-surface a2ui09-basic-button button", timeout=60000)
    reply = page.locator(".msg.assistant").nth(0)
    assert reply.locator(".text").inner_text().strip() == "Book a table."
    box = reply.locator(".card")
    assert box.count() == 1 and box.locator("a2ui09-surface").count() == 1  # drawn once
    assert page.locator("a2ui-surface").count() == 0  # not by the v0.8 renderer
    assert "Table for tonight" in box.evaluate(DEEP_TEXT)
    assert box.locator("a2ui09-basic-textfield input").count() == 1
    assert box.locator("a2ui09-choicepicker").count() == 1 and "9 pm" in box.locator("a2ui09-choicepicker").inner_text()
    meta = page.evaluate("MacaronicChat.state.conv.entries.at(-1).meta.genui")
    assert meta["a2ui_version"] == "0.9" and all(m["version"] == "v0.9" for m in meta["a2ui"])

    box.locator("a2ui09-basic-textfield input").fill("Ada")
    box.locator("a2ui09-choicepicker").get_by_text("9 pm").click()
    assert box.locator("a2ui09-choicepicker input:checked").count() == 1
    assert box.locator("a2ui09-choicepicker label:has(input:checked)").inner_text().strip() == "9 pm"
    box.locator("a2ui09-basic-button button").click()
    page.wait_for_selector(".msg.assistant:nth-of-type(4) .badge", timeout=60000)
    adapter, view = next((a, v) for a, v in reversed(script.seen) if "userAction" in v[-1]["content"])
    action = json.loads(view[-1]["content"])["userAction"]
    assert adapter == "genui" and action["name"] == "book" and action["surfaceId"] == "book"
    assert action["context"] == {"name": "Ada", "party": 2}
    assert not page.problems, page.problems
    page.context.close()


def test_a_stored_v09_card_is_drawn_on_reload(chromium, inproc):  # noqa: F811
    """A v0.9 card kept in the conversation draws again after a reload, by the v0.9 renderer."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parents[1] / "genui"))
    from test_a2ui_v09 import CARD

    url, _, _ = inproc
    page = chat_page(chromium, url)
    conv = {"id": "cv09", "title": "v0.9", "created": 1, "updated": 2, "entries": [
        {"role": "user", "content": "a card"},
        {"role": "assistant", "content": "{}", "meta": {"adapter": "genui", "genui": {
            "valid": True, "text_response": "Here it is.", "a2ui": CARD, "errors": []}}}]}
    page.evaluate("c => { localStorage.setItem('macaronic-conversations', JSON.stringify([c]));"
                  " localStorage.setItem('macaronic-current', c.id); }", conv)
    page.reload()
    page.wait_for_selector(".card a2ui09-surface a2ui09-basic-button button")
    assert page.locator(".msg.assistant .text").inner_text().strip() == "Here it is."
    assert page.locator(".msg.assistant .card a2ui09-surface").count() == 1
    assert "Hello" in page.locator(".msg.assistant .card").evaluate(DEEP_TEXT)
    assert not page.problems, page.problems
    page.context.close()

def test_a_v09_card_streams_as_its_text_and_a_placeholder_never_json_and_stop_drops_it(chromium, inproc):  # noqa: F811
    """As a v0.8 card does: while a v0.9 card decodes the bubble shows its text_response and the
    placeholder (the server streams the text_response in the served form), never JSON; the card is
    drawn once by the v0.9 renderer; Stop mid-card keeps the words and drops the card from the history."""
    from test_serve_browser import WATCH, ask
    from test_serve_mol import card_reply

    url, _, script = inproc
    script.replies["genui"] = card_reply()
    page = chat_page(chromium, url)
    page.locator("#settings-box summary").click()
    page.select_option("#a2ui-version", "0.9")
    page.fill("#max-tokens", "1500")
    page.evaluate(WATCH, None)
    ask(page, "a lunch card please", "genui")  # test_serve_browser's: waits for the turn to end
    shown = page.evaluate("window.shown")
    assert shown and page.evaluate("window.pending") > 0  # the placeholder was up while it decoded
    assert not [t for t in shown if t.lstrip().startswith("{") or "updateComponents" in t or "a2ui" in t], shown
    assert any(t.strip() == "Here is a card." for t in shown)
    # (that the words arrive as they decode is the HTTP test's, test_serve_a2ui_version.py: on a loaded
    # box the page may read several deltas in one network read and show them at once)
    page.wait_for_selector(".card[data-a2ui-version='0.9'] a2ui09-surface a2ui09-basic-button button", timeout=60000)
    reply = page.locator(".msg.assistant").nth(0)
    assert reply.locator(".text").inner_text() == "Here is a card." and reply.locator(".card-pending").count() == 0
    assert page.locator("a2ui09-surface").count() == 1 and page.locator("a2ui-surface").count() == 0

    page.evaluate(WATCH, "Here is a card.")  # Stop once the words are out, while the card decodes
    ask(page, "another one")
    cut = page.locator(".msg.assistant").nth(1)
    assert "the unfinished card was dropped" in cut.inner_text()
    assert cut.locator(".text").inner_text() == "Here is a card." and cut.locator(".card, a2ui09-surface").count() == 0
    assert page.evaluate("MacaronicChat.history()")[-1] == {"role": "assistant", "content": "Here is a card."}
    assert page.locator("a2ui09-surface").count() == 1
    assert not page.problems, page.problems
    page.context.close()
