from types import SimpleNamespace as D

import pytest

from macaronic.router.metrics import ece, evaluate, macro_f1


def ex(id_, label, kind="template", group=None, messages=None, twin=None):
    e = {"id": id_, "label": label, "kind": kind, "group": group or id_,
         "messages": messages or [{"role": "user", "content": id_}]}
    if twin:
        e["twin"] = twin
    return e


def test_ece_and_macro_f1():
    assert ece([1.0, 1.0], [True, True]) == 0
    assert ece([0.8, 0.8], [True, False]) == pytest.approx(0.3)
    assert macro_f1(["a", "a", "b"], ["a", "b", "b"]) == pytest.approx((2 / 3 + 2 / 3) / 2)


def test_evaluate_group_metrics():
    prev = [{"role": "user", "content": "q"}, {"role": "assistant", "content": "r", "specialist": "chat"},
            {"role": "user", "content": "q2"}]
    examples = [ex("a", "chat", group="g1"), ex("b", "chat", group="g1"), ex("c", "coding", group="g2"),
                ex("d", "coding", group="g2"), ex("e", "chat", "injection", twin="a"),
                ex("f", "agent", "multiturn", messages=prev)]
    decisions = [D(role=a, confidence=0.9, reason=r) for a, r in
                 [("chat", "scored"), ("chat", "scored"), ("coding", "scored"), ("chat", "scored"),
                  ("coding", "low-confidence-default"), ("chat", "hysteresis")]]
    m = evaluate(examples, decisions)
    assert m["accuracy"] == pytest.approx(3 / 6)
    assert m["paraphrase_consistency"] == 0.5  # g1 agrees, g2 splits
    assert m["injection_flip_rate"] == 1.0  # "e" routed away from its twin "a"
    assert m["abstain_rate"] == pytest.approx(1 / 6)
    assert (m["switch_rate"], m["gold_switch_rate"]) == (0.0, 1.0)
    assert m["worst_group_accuracy"] == 0.0 and m["group_accuracy"]["template"] == 0.75
