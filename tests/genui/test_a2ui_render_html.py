"""Static HTML rendering: deterministic, escaped, templates expanded, snapshot-stable."""

from __future__ import annotations

from pathlib import Path

from macaronic.genui.render_html import render_html
from macaronic.genui.tasks import make_task

SNAPSHOT = Path(__file__).parent / "snapshots" / "meetings-0.html"


def test_snapshot_of_a_templated_card():
    html = render_html(make_task("meetings", 0).gold, standalone=True)
    if not SNAPSHOT.exists():  # first run writes it; later runs compare
        SNAPSHOT.parent.mkdir(exist_ok=True)
        SNAPSHOT.write_text(html)
    assert html == SNAPSHOT.read_text()


def test_templates_expand_per_item():
    task = make_task("meetings", 0)
    html = render_html(task.gold["a2ui"])
    for row in task.context["meetings"]:
        assert f">{row['title']}<" in html and f">{row['time']}<" in html
    assert html.count('data-component-id="meeting-title"') == len(task.context["meetings"])


def test_values_are_escaped():
    msgs = [{"surfaceUpdate": {"surfaceId": "s", "components": [
        {"id": "r", "component": {"Text": {"text": {"path": "/x"}}}}]}},
        {"dataModelUpdate": {"surfaceId": "s", "contents": [{"key": "x", "valueString": "<script>alert(1)</script>"}]}},
        {"beginRendering": {"surfaceId": "s", "root": "r"}}]
    html = render_html(msgs)
    assert "<script>" not in html and "&lt;script&gt;" in html


def test_invalid_trees_degrade_to_inline_errors():
    msgs = [{"surfaceUpdate": {"surfaceId": "s", "components": [
        {"id": "r", "component": {"Column": {"children": {"explicitList": ["r", "ghost"]}}}}]}},
        {"beginRendering": {"surfaceId": "s", "root": "r"}}]
    html = render_html(msgs)
    assert "cycle: r" in html and "unknown component: ghost" in html


def test_text_response_and_deleted_surfaces():
    gold = make_task("weather", 0).gold
    html = render_html({"text_response": gold["text_response"], "a2ui": gold["a2ui"]})
    assert html.startswith('<p class="a2ui-text-response">')
    sid = gold["a2ui"][0]["surfaceUpdate"]["surfaceId"]
    assert "a2ui-surface" not in render_html(gold["a2ui"] + [{"deleteSurface": {"surfaceId": sid}}])


def test_passwords_never_rendered():
    html = render_html(make_task("form", 0).gold["a2ui"])
    assert 'type="password" value=""' in html or 'type="password"' not in html
