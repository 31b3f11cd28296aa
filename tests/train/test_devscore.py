"""Dev scoring for the training comparisons: task sets stay off the training data, summaries pair tasks."""

from __future__ import annotations

import pytest

from macaronic.train import devscore


def test_heldout_instances_are_not_training_instances():
    from macaronic.train.builders import build

    for role, n_train in (("agent", 40), ("coding", 240)):
        trained = devscore.user_texts(build(role, n_train, 0))
        held = devscore.tasks_for(role, "heldout", 12, exclude=trained)
        texts = [m[-1]["content"] for m, _ in held]
        assert len(held) == 12 and len(set(texts)) == 12 and not set(texts) & trained
        assert len({t.family for _, t in held}) >= 6  # spread over the train families
    assert {t.split for _, t in devscore.tasks_for("agent", "dev", 4)} == {"dev"}
    with pytest.raises(ValueError):
        devscore.tasks_for("agent", "test", 4)


def test_summary_pairs_tasks_with_the_reference():
    rows = {"ref": [{"task": str(i), "pass": float(i < 5), "tests": 0.5} for i in range(20)],
            "new": [{"task": str(i), "pass": float(i < 11), "tests": 0.5} for i in reversed(range(20))]}
    s = devscore.summarize(rows, "coding", reference="ref")
    assert s["ref"]["pass"]["mean"] == 0.25 and s["new"]["pass"]["mean"] == 0.55
    d = s["new"]["pass"]["delta_vs_ref"]
    assert d["mean"] == pytest.approx(0.3)  # paired by task id even though the rows are in another order
    assert d["ci95"][0] > 0  # no task got worse, six of 20 got better
    assert "delta_vs_ref" not in s["ref"]["pass"]
    lo, hi = s["new"]["pass"]["ci95"]
    assert lo < 0.55 < hi
