"""Conformance against the official A2UI v0.8 renderer (`@a2ui/lit` 0.11.0 from npm, as the web
chat bundles it), in one real headless Chromium page: every official example card and the gold
card of every GenUI task family render with no exception, no console error and a non-empty
surface, their screenshots match the committed snapshots, a Button click sends the userAction our
Python twin computes, and the broken cards of the validator tests are refused by our validator
(the web chat never hands a refused card to the renderer: tests/serve/test_serve_browser.py)."""

from __future__ import annotations

import hashlib

import pytest
from a2ui_cases import EXAMPLES, example_id, load
from official_renderer import OfficialRenderer, compare_snapshot
from test_a2ui_broken import MUTATIONS

from macaronic.genui.actions import check_user_action, make_user_action
from macaronic.genui.tasks import FAMILIES, make_task
from macaronic.genui.validate import validate

pytestmark = pytest.mark.browser
GOLDS = [make_task(f, i) for f in FAMILIES for i in range(3)]


@pytest.fixture(scope="module")
def official(browser):
    r = OfficialRenderer(browser)
    yield r
    assert not r.blocked, f"the page tried to reach the network: {r.blocked}"
    r.close()


def test_the_official_examples_are_all_here():
    assert len(EXAMPLES) == 35, "expected the 35 official v0.8 examples in ../shared/a2ui/v0_8 (MACARONIC_SHARED)"


def test_every_official_example_renders_clean_and_matches_its_snapshot(official):
    failures, digests = [], {}
    for path in EXAMPLES:
        name = example_id(path).replace("/", "-")
        got = official.render(load(path))
        if not got.clean or not got.text:
            failures.append((name, got.threw, got.errors, got.components))
            continue
        png = official.screenshot()
        digests[hashlib.sha256(png).hexdigest()] = name
        if (why := compare_snapshot(name, png)) is not None:
            failures.append(why)
    assert not failures, failures
    assert len(digests) == len(EXAMPLES)  # every card looks different


def test_rendering_is_stable(official):
    messages = load(EXAMPLES[0])
    official.render(messages)
    first = official.screenshot()
    official.render(messages)
    assert official.screenshot() == first


def test_every_task_family_gold_card_renders_its_data(official):
    failures = []
    for task in GOLDS:
        assert validate(task.gold).valid, task.id
        got = official.render(task.gold["a2ui"])
        missing = [v for v in task.requirements.values if v not in got.text]
        if not got.clean or (missing and task.family not in ("form", "preferences")):  # inputs hold their values
            failures.append((task.id, got.threw, got.errors, missing))
        elif task.id.endswith("-0") and (why := compare_snapshot(f"gold-{task.family}", official.screenshot())):
            failures.append(why)
    assert not failures, failures


def test_the_renderer_alone_fails_on_ids_that_equal_a_string_property(official):
    """Why a2ui-card.js disambiguates ids: a Text with usageHint "body" in a card that has a
    component "body" is read as a child reference by the renderer and the card throws."""
    task = make_task("meetings", 0)
    assert validate(task.gold).valid
    raw = official.render(task.gold["a2ui"], as_is=True)
    assert raw.threw and "Circular dependency" in raw.threw
    assert official.render(task.gold["a2ui"]).clean


def test_button_click_sends_the_user_action_the_python_twin_computes(official):
    path = next(p for p in EXAMPLES if p.stem == "4_login_form")
    messages = load(path)
    official.render(messages)
    page = official.page
    page.fill("#username_field input", "ada")
    page.fill("#password_field input", "s3cret")
    page.click("#submit_button button")
    (event,) = page.evaluate("window.actions")
    assert check_user_action(event) == []
    assert event["userAction"]["context"] == {"user": "ada", "pass": "s3cret"}
    model = page.evaluate("window.card.dataModel('4_login_form')")
    twin = make_user_action(messages, "submit_button", model=model, timestamp=event["userAction"]["timestamp"])
    assert twin == event


def test_button_inside_a_template_sends_its_item(official):
    task = make_task("product_list", 0)
    official.render(task.gold["a2ui"])
    buttons = official.page.locator("a2ui-button button")
    assert buttons.count() == len(task.context["products"])
    buttons.nth(1).click()
    (event,) = official.page.evaluate("window.actions")
    assert check_user_action(event) == []
    assert event["userAction"]["name"] == "add_to_cart"
    assert event["userAction"]["context"] == {"product_id": task.context["products"][1]["id"]}


def test_broken_cards_are_refused_by_our_validator():
    refused = 0
    for mutate in MUTATIONS:
        for path in EXAMPLES:
            messages = load(path)
            try:
                mutate(messages)
            except StopIteration:
                continue
            assert not validate(messages).valid, (mutate.__name__, path.name)
            refused += 1
    assert refused > 200
