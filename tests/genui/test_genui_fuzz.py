"""Random corruption of valid cards never crashes the validator, the HTML renderer or the
grader: every corruption ends in a result, and structural damage is reported as an error."""

from __future__ import annotations

import json
import random

from a2ui_cases import corrupt

from macaronic.genui.grade import grade
from macaronic.genui.render_html import render_html
from macaronic.genui.tasks import make_task
from macaronic.genui.validate import validate

def test_corruptions_never_crash():
    rng = random.Random(0)
    tasks = [make_task(f, 0) for f in ("meetings", "order_refund", "preferences", "itinerary", "todo")]
    invalid = 0
    for i in range(400):
        task = tasks[i % len(tasks)]
        bad = corrupt(task.gold, rng)
        result = validate(bad)
        invalid += not result.valid
        render_html(bad if isinstance(bad, dict) else {})
        graded = grade(task, json.dumps(bad))
        assert 0.0 <= graded["l2_content"] <= 1.0
    assert invalid > 300  # nearly every corruption is caught
