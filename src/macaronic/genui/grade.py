"""Grade one GenUI reply against a task: L1 structural validity, L2 content coverage.

L1: the reply parses (after repair) into `{text_response, a2ui}` and passes every validator
layer. L2: the fraction of the task's requirements the rendered card meets: component types
present in the rendered tree, data values displayed, Button actions offered, action contexts a
click would send. L2 is measured on what renders (render_html), so unreachable components and
unresolved bindings do not count. Pure: no printing, no files.
"""

from __future__ import annotations

import re
from html import escape, unescape
from typing import Any

from macaronic.genui.actions import make_user_action
from macaronic.genui.output import parse_genui_output
from macaronic.genui.render_html import render_html
from macaronic.genui.tasks import GenUITask, Requirements


def grade(task: GenUITask, output_text: str) -> dict[str, Any]:
    parsed = parse_genui_output(output_text)
    met, missing = coverage(task.requirements, parsed.messages)
    total = task.requirements.count()
    return {
        "task_id": task.id,
        "l1_valid": parsed.valid,
        "l2_content": met / total if total else 1.0,
        "errors": parsed.validation.errors,
        "repairs": parsed.repairs,
        "missing": missing,
    }


def coverage(req: Requirements, messages: list[Any]) -> tuple[int, list[str]]:
    try:
        html = render_html(messages)
    except Exception:  # a malformed list renders nothing: every requirement is missing
        html = ""
    missing = [f"component {c}" for c in req.components if f'class="a2ui-{c.lower()}"' not in html]
    missing += [f"value {v!r}" for v in req.values if escape(str(v)) not in html]
    missing += [f"action {a}" for a in req.actions if f'data-action="{escape(a)}"' not in html]
    missing += [f"action {a} context {k}={v!r}" for a, k, v in req.action_context
                if not sends(messages, html, a, k, v)]
    return req.count() - len(missing), missing


def sends(messages: list[Any], html: str, action: str, key: str, value: Any) -> bool:
    """Does some rendered Button named `action` send context[key] == value when clicked?"""
    for button_id in rendered_buttons(html, action):
        try:
            event = make_user_action(messages, button_id)
        except (KeyError, TypeError, AttributeError):
            continue
        if event["userAction"]["context"].get(key) == value:
            return True
    return False


def rendered_buttons(html: str, action: str) -> list[str]:
    """Ids of the Buttons named `action` that render_html put into `html`."""
    pattern = rf'data-component-id="([^"]+)" data-action="{re.escape(escape(action))}"'
    return [unescape(b) for b in re.findall(pattern, html)]
