"""Routing metrics: pure functions of labelled examples and the router's decisions.

Every metric is computed on final decisions (after tool stickiness, the low-confidence default
route and hysteresis), one decision per example, in the order given.

  accuracy                fraction of examples whose routed adapter equals the label.
  macro_f1                unweighted mean over labels of per-label F1 (precision and recall of
                          routing to that label; a label never predicted has precision 0).
  ece                     expected calibration error with 10 equal-width confidence bins over
                          [0, 1]: sum over bins b of |b|/N * |accuracy(b) - mean confidence(b)|,
                          where confidence is the probability the policy gave the chosen adapter.
  abstain_rate            fraction of examples sent to the default route because the policy was
                          unsure (below min_confidence, or an embedding threshold abstained).
  paraphrase_consistency  over paraphrase groups with two or more members (the template and bait
                          kinds: the same intent and fill, worded by different templates), the
                          fraction of groups whose members all get the same route, right or wrong.
  worst_group_accuracy    the lowest accuracy over the example kinds present (template, bait,
                          ambiguous, injection, multiturn, tool_result, hand); per-kind accuracy
                          is reported beside it as group_accuracy.
  injection_flip_rate     over injection examples whose injection-free twin is also evaluated,
                          the fraction routed differently from their twin.
  switch_rate             over multiturn examples (a new request after an assistant turn tagged
                          with its adapter), the fraction routed to an adapter other than the
                          previous assistant's. gold_switch_rate is the same with the labels;
                          the benchmark reports it with and without hysteresis.
  bands                   per band of decision confidence (the cascade's band edges), over
                          scored decisions (tool-sticky ones left out): n, accuracy, mean
                          confidence.
  p50_ms, p95_ms          median and 95th percentile of single-turn route() wall time, one turn
                          at a time, measured separately from the batched accuracy pass.
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np


def macro_f1(labels: list[str], preds: list[str]) -> float:
    f1s = []
    for c in sorted(set(labels)):
        tp = sum(l == c and p == c for l, p in zip(labels, preds))
        fp = sum(l != c and p == c for l, p in zip(labels, preds))
        fn = sum(l == c and p != c for l, p in zip(labels, preds))
        f1s.append(2 * tp / (2 * tp + fp + fn) if tp else 0.0)
    return float(np.mean(f1s)) if f1s else 0.0


def ece(confidences: list[float], correct: list[bool], n_bins: int = 10) -> float:
    conf, ok = np.asarray(confidences, float), np.asarray(correct, float)
    if not len(conf):
        return 0.0
    # Bin b holds (b/n, (b+1)/n]; confidence 0 goes to the first bin.
    bins = np.clip(np.ceil(conf * n_bins).astype(int) - 1, 0, n_bins - 1)
    total = 0.0
    for b in range(n_bins):
        m = bins == b
        if m.any():
            total += m.mean() * abs(ok[m].mean() - conf[m].mean())
    return float(total)


def percentile_ms(times: list[float], q: float) -> float:
    return float(np.percentile(times, q)) if times else 0.0


def previous_adapter(example: dict) -> str | None:
    for m in reversed(example["messages"][:-1]):
        if m.get("role") == "assistant":
            return m.get("specialist")
    return None


def switch_rate(examples: list[dict], routed: list[str]) -> tuple[float, float]:
    """(routed switch rate, gold switch rate) over multiturn examples."""
    rows = [(previous_adapter(e), r, e["label"]) for e, r in zip(examples, routed)
            if e["kind"] == "multiturn" and previous_adapter(e)]
    if not rows:
        return 0.0, 0.0
    return (float(np.mean([prev != r for prev, r, _ in rows])),
            float(np.mean([prev != gold for prev, _, gold in rows])))


def band_accuracy(confidences: list[float], correct: list[bool], edges) -> list[dict]:
    conf, ok = np.asarray(confidences, float), np.asarray(correct, bool)
    edges = np.asarray(edges, float)
    band = np.clip(np.searchsorted(edges, conf, side="left") - 1, 0, len(edges) - 2)
    out = []
    for b in range(len(edges) - 1):
        m = band == b
        out.append({"band": [float(edges[b]), float(edges[b + 1])], "n": int(m.sum()),
                    "accuracy": float(ok[m].mean()) if m.any() else None,
                    "mean_confidence": float(conf[m].mean()) if m.any() else None})
    return out


def evaluate(examples: list[dict], decisions: list) -> dict:
    """Metrics (see module docstring) for decisions aligned with examples. A decision needs
    .role, .confidence and .reason (a RouteDecision)."""
    labels = [e["label"] for e in examples]
    preds = [d.role for d in decisions]
    correct = [p == l for p, l in zip(preds, labels)]
    by_kind = defaultdict(list)
    for e, ok in zip(examples, correct):
        by_kind[e["kind"]].append(ok)
    groups = defaultdict(set)
    sizes = defaultdict(int)
    for e, p in zip(examples, preds):
        if e["kind"] in ("template", "bait"):
            groups[e["group"]].add(p)
            sizes[e["group"]] += 1
    multi = [g for g in groups if sizes[g] >= 2]
    route_of = {e["id"]: p for e, p in zip(examples, preds)}
    flips = [route_of[e["twin"]] != p for e, p in zip(examples, preds)
             if e["kind"] == "injection" and e.get("twin") in route_of]
    sw, gold_sw = switch_rate(examples, preds)
    group_acc = {k: float(np.mean(v)) for k, v in sorted(by_kind.items())}
    from macaronic.router.bands import EDGES

    scored = [(d.confidence, ok) for d, ok in zip(decisions, correct) if d.reason != "sticky-tool"]
    return {
        "n": len(examples),
        "accuracy": float(np.mean(correct)) if correct else 0.0,
        "macro_f1": macro_f1(labels, preds),
        "ece": ece([d.confidence for d in decisions], correct),
        "abstain_rate": float(np.mean([d.reason == "low-confidence-default" for d in decisions]))
        if decisions else 0.0,
        "paraphrase_consistency": float(np.mean([len(groups[g]) == 1 for g in multi])) if multi else 1.0,
        "worst_group_accuracy": min(group_acc.values()) if group_acc else 0.0,
        "group_accuracy": group_acc,
        "injection_flip_rate": float(np.mean(flips)) if flips else 0.0,
        "switch_rate": sw,
        "gold_switch_rate": gold_sw,
        "bands": band_accuracy([c for c, _ in scored], [k for _, k in scored], EDGES),
    }
