"""Bootstrap, McNemar, per-task reduction (pass^k), strata and the gate's rules."""

from __future__ import annotations

import numpy as np
import pytest

from macaronic.contract import spec as cspec
from macaronic.contract.report import build_report, freeze_strata, task_scores
from macaronic.contract.stats import bootstrap_ci, mcnemar, paired_bootstrap

REPORT_KEYS = {"contract", "pair", "parent", "suites", "strata", "decision", "failed_rules", "cost"}


def rows(pair, suite, scores, k=1):
    """scores[i] = list of k sample scores for task i."""
    return [{"pair": pair, "suite": suite, "task": f"t{i}", "sample": j, "score": float(s), "passed": s >= 1,
             "tokens": 10, "seconds": 0.5} for i, ss in enumerate(scores) for j, s in enumerate(ss)]


@pytest.fixture(scope="module")
def contract(contract_file):
    return cspec.load(contract_file)


def test_bootstrap_and_paired_bootstrap():
    lo, hi = bootstrap_ci([0, 1] * 50, resamples=500)
    assert lo < 0.5 < hi
    assert bootstrap_ci([]) is None
    d, ci = paired_bootstrap([1] * 20 + [0] * 5, [0] * 20 + [0] * 5, resamples=500)
    assert d == pytest.approx(0.8) and ci[0] > 0.5
    d, ci = paired_bootstrap([1, 0] * 10, [0, 1] * 10, resamples=500)
    assert d == 0 and ci[0] < 0 < ci[1]
    assert paired_bootstrap([1, 0], [1, 0], seed=3) == paired_bootstrap([1, 0], [1, 0], seed=3)


def test_mcnemar_exact():
    m = mcnemar([1, 1, 1, 1, 1, 0], [0, 0, 0, 0, 0, 0])
    assert (m["b"], m["c"]) == (5, 0)
    assert m["p_two_sided"] == pytest.approx(2 / 32) and m["p_worse"] == 1.0
    m = mcnemar([0] * 6, [1] * 6)
    assert m["p_worse"] == pytest.approx(1 / 64)
    assert mcnemar([1, 0], [1, 0])["p_two_sided"] == 1.0


def test_pass_hat_k_per_task(contract):
    ts = task_scores(contract, rows("p", "agent", [[1, 1], [1, 0], [0, 0]]))
    assert [ts[f"agent/t{i}"]["score"] for i in range(3)] == [1.0, 0.0, 0.0]  # pass^2: both samples
    assert [ts[f"agent/t{i}"]["rate"] for i in range(3)] == [1.0, 0.5, 0.0]
    ts = task_scores(contract, rows("p", "mixed", [[0.5], [0.25]]))
    assert ts["mixed/t0"]["score"] == 0.5 and not ts["mixed/t0"]["binary"]


def test_strata_from_reference(contract):
    s = freeze_strata(contract, rows("ref", "agent", [[1, 1], [1, 0], [0, 0]])
                      + rows("ref", "humaneval", [[1]]))
    assert s == {"agent/t0": "easy", "agent/t1": "easy", "agent/t2": "hard"}  # rate 0.5 is easy; report-only out
    s = freeze_strata(contract, rows("ref", "mixed", [[0.25], [0.0], [0.75]]))
    assert s == {"mixed/t0": "mid", "mixed/t1": "hard", "mixed/t2": "easy"}


def test_report_fields_and_accept(contract):
    parent = rows("P", "agent", [[0, 0]] * 20) + rows("P", "mixed", [[0.25]] * 10)
    child = rows("C", "agent", [[1, 1]] * 15 + [[0, 0]] * 5) + rows("C", "mixed", [[0.5]] * 10)
    strata = freeze_strata(contract, parent)
    report, checks = build_report(contract, "C", child, "P", parent, strata)
    assert set(report) == REPORT_KEYS
    assert report["contract"] == {"id": "tiny@1", "version": 1, "sha256": contract.sha256}
    assert report["pair"] == {"id": "C"} and report["parent"] == {"id": "P"}
    assert set(report["suites"]["agent"]) == {"n", "score", "ci95", "delta", "delta_ci95"}
    assert set(report["strata"]) == {"easy", "mid", "hard"}
    assert set(report["strata"]["hard"]) == {"n", "score", "delta", "delta_ci95"}
    assert report["suites"]["agent"]["score"] == 0.75 and report["suites"]["agent"]["delta"] == 0.75
    assert report["strata"]["hard"]["n"] == 20 and report["strata"]["mid"]["n"] == 10
    assert report["decision"] == "accept" and report["failed_rules"] == []
    assert report["cost"] == {"tokens": 10 * len(child), "seconds": 0.5 * len(child)}
    assert {c["rule"] for c in checks} >= {"primary", "guard:agent", "mcnemar"}


def test_reference_report_has_no_gate(contract):
    report, checks = build_report(contract, "C", rows("C", "mixed", [[0.5]] * 4))
    assert report["decision"] == "reference" and report["parent"] == {"id": None} and checks == []
    assert report["suites"]["mixed"]["delta"] is None and report["suites"]["agent"]["n"] == 0


def test_no_improvement_is_rejected(contract):
    parent = rows("P", "mixed", [[0.5], [0.25]] * 10)
    report, _ = build_report(contract, "C", rows("C", "mixed", [[0.25], [0.5]] * 10), "P", parent)
    assert report["decision"] == "reject" and report["failed_rules"] == ["primary"]


def test_guard_easy_and_mcnemar_veto_a_primary_gain(contract):
    # Big graded (non-binary) mixed gain, but agent (a guard, bound 0.5) collapses on binary tasks.
    parent = rows("P", "agent", [[1, 1]] * 12) + rows("P", "mixed", [[0.0]] * 60)
    child = rows("C", "agent", [[0, 0]] * 12) + rows("C", "mixed", [[0.75]] * 60)
    strata = freeze_strata(contract, parent)  # agent tasks were easy for the parent
    report, checks = build_report(contract, "C", child, "P", parent, strata)
    assert report["suites"]["mixed"]["delta_ci95"][0] > 0
    assert set(report["failed_rules"]) == {"guard:agent", "easy", "mcnemar"}
    assert report["decision"] == "reject"
    mc = next(c for c in checks if c["rule"] == "mcnemar")
    assert mc["n"] == 12 and mc["c"] == 12 and mc["b"] == 0 and mc["p_worse"] < 0.05
    # the same binary gain elsewhere outweighs it: McNemar is a cross-check, not a veto on any loss
    child = rows("C", "agent", [[0, 0]] * 12) + rows("C", "mixed", [[1.0]] * 60)
    report, _ = build_report(contract, "C", child, "P", parent, strata)
    assert "mcnemar" not in report["failed_rules"]


def test_intervals_are_seeded(contract):
    a = build_report(contract, "C", rows("C", "mixed", [[x] for x in np.linspace(0, 1, 9)]))[0]
    b = build_report(contract, "C", rows("C", "mixed", [[x] for x in np.linspace(0, 1, 9)]))[0]
    assert a == b
