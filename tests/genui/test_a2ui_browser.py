"""a2ui.js in real headless Chromium: every official example and every task family renders
without errors, screenshots are non-empty and pairwise distinct, inputs write the data model, and
Button clicks emit well-formed v0.8 userAction messages. No network: every request is aborted."""

from __future__ import annotations

import hashlib
import io

import pytest
from a2ui_cases import EXAMPLES, load

from macaronic.genui.actions import Approval, approval_from, check_user_action, make_user_action
from macaronic.genui.shared import a2ui_js
from macaronic.genui.tasks import FAMILIES, make_task

pytestmark = pytest.mark.browser
A2UI_JS = a2ui_js().read_text(encoding="utf-8")
PAGE = f"""<!doctype html><html><head><meta charset="utf-8"><script>{A2UI_JS}</script></head>
<body style="margin:0;background:#fff"><div id="host" style="width:460px;padding:8px"></div></body></html>"""
RENDER = """messages => {
  const old = document.getElementById('host');
  const host = old.cloneNode(false);  // a fresh element: no listeners from earlier renders
  old.replaceWith(host);
  window.actions = [];
  window.events = [];
  host.addEventListener('a2ui-action', e => window.events.push(e.detail));
  window.r = A2UI.render(host, messages, {onAction: m => window.actions.push(m)});
  return host.querySelectorAll('.a2ui-error').length;
}"""


@pytest.fixture(scope="module")
def page(browser):
    context = browser.new_context(viewport={"width": 480, "height": 800}, device_scale_factor=1)
    page = context.new_page()
    page.route("**/*", lambda route: route.abort())  # nothing leaves the machine
    page.set_content(PAGE)
    yield page
    context.close()


def render(page, messages) -> int:
    return page.evaluate(RENDER, messages)


def shot(page) -> bytes:
    return page.locator("#host").screenshot(animations="disabled")


def distinct_colors(png: bytes) -> int:
    from PIL import Image

    return len(Image.open(io.BytesIO(png)).convert("RGB").getcolors(maxcolors=1 << 20) or [])


@pytest.mark.skipif(not EXAMPLES, reason="shared A2UI v0.8 files not found")
def test_examples_render_with_distinct_screenshots(page):
    digests = {}
    for path in EXAMPLES:
        messages = load(path)
        assert render(page, messages) == 0, path.name
        assert page.locator("#host .a2ui-surface").count() == 1
        png = shot(page)
        assert len(png) > 500 and distinct_colors(png) > 2, f"{path.name} rendered blank"
        digests.setdefault(hashlib.sha256(png).hexdigest(), []).append(path.name)
    duplicates = [names for names in digests.values() if len(names) > 1]
    assert not duplicates and len(digests) == len(EXAMPLES)


def test_task_cards_show_their_data(page):
    for family in FAMILIES:
        task = make_task(family, 0)
        assert render(page, task.gold["a2ui"]) == 0, family
        text = page.locator("#host").inner_text()
        labels = page.eval_on_selector_all("#host input, #host textarea", "els => els.length")
        for value in task.requirements.values:
            assert value in text or labels, (family, value)
        for ctype in task.requirements.components:
            assert page.locator(f"#host .a2ui-{ctype.lower()}").count() >= 1, (family, ctype)


def test_login_click_emits_user_action_with_typed_input(page):
    path = next((p for p in EXAMPLES if p.stem == "4_login_form"), None)
    assert path is not None, "the official example 4_login_form is missing from ../shared/a2ui"
    messages = load(path)
    render(page, messages)
    page.fill('[data-component-id="username_field"] input', "ada")
    page.fill('[data-component-id="password_field"] input', "s3cret")
    page.click('[data-component-id="submit_button"]')
    actions, events = page.evaluate("[window.actions, window.events]")
    assert len(actions) == 1 and events == actions
    event = actions[0]
    assert check_user_action(event) == []
    assert event["userAction"]["context"] == {"user": "ada", "pass": "s3cret"}
    model = page.evaluate("window.r.dataModel('4_login_form')")
    twin = make_user_action(messages, "submit_button", model=model, timestamp=event["userAction"]["timestamp"])
    assert twin == event  # the Python twin resolves the same context


def test_button_inside_template_sends_its_item(page):
    task = make_task("product_list", 0)
    render(page, task.gold["a2ui"])
    buttons = page.locator('#host [data-component-id="add"]')
    assert buttons.count() == len(task.context["products"])
    buttons.nth(1).click()
    (event,) = page.evaluate("window.actions")
    assert check_user_action(event) == []
    assert event["userAction"]["name"] == "add_to_cart"
    assert event["userAction"]["context"] == {"product_id": task.context["products"][1]["id"]}


def test_confirm_click_is_an_approval(page):
    task = make_task("confirm", 0)
    render(page, task.gold["a2ui"])
    page.click('#host [data-component-id="ok"]')
    (event,) = page.evaluate("window.actions")
    approval = approval_from(event)
    assert isinstance(approval, Approval)
    assert approval.confirmation_id == task.context["pending_write"]["confirmation_id"]


def test_checkbox_and_tabs_and_modal_interact(page):
    task = make_task("todo", 0)
    render(page, task.gold["a2ui"])
    sid = task.gold["a2ui"][0]["surfaceUpdate"]["surfaceId"]
    first = page.locator('#host [data-component-id="task"] input').first
    before = page.evaluate(f"window.r.dataModel('{sid}').tasks['0'].done")
    first.click()
    assert page.evaluate(f"window.r.dataModel('{sid}').tasks['0'].done") is (not before)

    task = make_task("itinerary", 0)
    render(page, task.gold["a2ui"])
    tabs = page.locator("#host [role=tab]")
    tabs.nth(1).click()
    assert page.locator("#host [role=tabpanel]").nth(1).is_visible()
    assert not page.locator("#host [role=tabpanel]").nth(0).is_visible()

    modal = next((p for p in EXAMPLES if p.stem == "30_modal-sample"), None)
    if modal is not None:
        render(page, load(modal))
        assert not page.locator("#host dialog").is_visible()
        page.click('#host [data-component-id="open-btn"]')
        assert page.locator("#host dialog").is_visible()


def test_stream_update_and_delete_surface(page):
    task = make_task("weather", 0)
    msgs = task.gold["a2ui"]
    sid = msgs[0]["surfaceUpdate"]["surfaceId"]
    render(page, msgs)
    page.evaluate("""([sid]) => window.r.process([{dataModelUpdate: {surfaceId: sid, path: '/city',
        contents: []}}, {dataModelUpdate: {surfaceId: sid, contents: [{key: 'city', valueString: 'Reykjavik'},
        {key: 'temp', valueString: '1°C'}]}}])""", [sid])
    assert "Reykjavik" in page.locator("#host").inner_text()
    page.evaluate("([sid]) => window.r.process([{deleteSurface: {surfaceId: sid}}])", [sid])
    assert page.locator("#host .a2ui-surface").count() == 0


def test_corrupted_cards_never_throw(page):
    import random

    from a2ui_cases import corrupt

    rng = random.Random(1)
    golds = [make_task(f, 0).gold for f in FAMILIES]
    for i in range(60):
        bad = corrupt(golds[i % len(golds)], rng)
        messages = bad.get("a2ui") if isinstance(bad, dict) else bad
        render(page, messages)  # a JS exception would raise here
