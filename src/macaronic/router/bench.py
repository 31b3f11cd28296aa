"""The router benchmark: every policy and the cascade, side by side, plus scaling in routes.

Main table: fit on the train split, calibrate on dev, evaluate final decisions on test (family-
held-out, see data.py); metrics as defined in macaronic.router.metrics. Accuracy and the other
quality metrics come from one batched pass; p50/p95 come from separate single-turn route() calls.
switch_rate is reported under the configured hysteresis margin and with margin 0.

Scaling (4, 40, 400 routes) uses synthetic routes built from the template families, exactly:
  4    the four roles (bundle descriptions), examples from the non-ambiguous families;
  40   40 families drawn with a fixed seed from the non-ambiguous families; each family is a
       route, described as "<role> requests like: <its first template with its first fill>";
  400  each of those 40 families crossed with 10 context modifiers: the request gets the suffix
       " (It's for my <modifier>.)" and the route is "<family>.<modifier key>", so telling routes
       apart needs both the intent and the modifier.
Because a synthetic route must have training examples, scaling splits *within* each family by
fill: fills 0-2 train, fill 3 dev, fill 4 test (at 400: templates 0-1 for train, 2 for dev,
2-3 for test, to bound the cost; --quick trains on template 0 only). This is easier than the
main table's family-held-out split.
Arrow needs adapter weights and synthetic routes have none, so it is not in the scaling rows;
prompted is scored with its embedding shortlist on a fixed sample. memory_mb is the fitted
router state a policy needs (centroids, probe weights; prompted: its shortlist centroids).
Returns plain data; printing and files are the caller's.
"""

from __future__ import annotations

import platform
import random
import re
import time
from dataclasses import dataclass
from typing import Callable

import numpy as np

from macaronic.router.conversation import request_text
from macaronic.router.data import load_routing_data
from macaronic.router.families import FAMILIES
from macaronic.router.metrics import evaluate, percentile_ms
from macaronic.router.router import Router
from macaronic.router.types import AdapterInfo, Backbone

POLICIES = ("prompted", "embedding", "probe", "arrow", "cascade")
MODIFIERS = (("garden", "garden project"), ("school", "school assignment"),
             ("shop", "small business"), ("wedding", "wedding"), ("club", "book club"),
             ("team", "soccer team"), ("lab", "research lab"), ("gran", "grandmother"),
             ("pitch", "startup pitch"), ("camp", "camping trip"))


@dataclass(frozen=True)
class BenchConfig:
    quick: bool = False  # test on fill 0 of each group only (~1/5 of test), fewer samples
    latency_samples: int = 30
    scaling: tuple[int, ...] = (4, 40, 400)
    scaling_policies: tuple[str, ...] = ("embedding", "probe", "prompted")
    prompted_scaling_samples: int = 40
    seed: int = 0
    log: Callable[[str], None] | None = None  # progress lines (the CLI sends them to stderr)

    def sized(self) -> "BenchConfig":
        if not self.quick:
            return self
        return BenchConfig(True, min(self.latency_samples, 8), self.scaling, self.scaling_policies,
                           min(self.prompted_scaling_samples, 8), self.seed, self.log)

    def say(self, msg: str) -> None:
        if self.log is not None:
            self.log(msg)


def _fill_index(e: dict) -> int:
    m = re.search(r"#(\d+)", e["group"])
    return int(m.group(1)) if m else 0


def quick_subset(examples: list[dict]) -> list[dict]:
    """Fill-0 groups (and every 5th hand case): injection twins and multi-turn stay consistent."""
    return [e for e in examples if _fill_index(e) % 5 == 0]


def _timed_routes(router: Router, conversations: list[list[dict]], policy: str) -> list[float]:
    times = []
    for c in conversations:
        t0 = time.perf_counter()
        router.route(c, policy=policy)
        times.append((time.perf_counter() - t0) * 1e3)
    return times


def bench_policies(backbone: Backbone, bundle=None, config: BenchConfig = BenchConfig(),
                   features: dict[str, np.ndarray] | None = None) -> dict:
    """{"policies": {name: metrics}, "fit_s": ..., "state_id": ...} on the role routing data.
    `features` (text -> pooled row) is filled and reused; pass one dict to share it."""
    cfg = config.sized()
    train, dev, test = (load_routing_data(s) for s in ("train", "dev", "test"))
    if cfg.quick:
        test = quick_subset(test)
    features = {} if features is None else features
    t0 = time.perf_counter()
    router = Router.fit(backbone, train, dev, bundle, features=features)
    fit_s = time.perf_counter() - t0
    cfg.say(f"fitted on {len(train)} train / {len(dev)} dev turns in {fit_s:.1f}s")
    no_h = router.with_config(hysteresis_margin=0.0)
    rng = random.Random(cfg.seed)
    timed = [e["messages"] for e in rng.sample([e for e in test if e["kind"] != "tool_result"],
                                              min(cfg.latency_samples, len(test)))]
    out = {}
    for policy in POLICIES:
        cache: dict = {}
        convos = [e["messages"] for e in test]
        decisions = router.route_many(convos, policy=policy, features=features, cache=cache)
        metrics = evaluate(test, decisions)
        metrics["switch_rate_no_hysteresis"] = evaluate(
            test, no_h.route_many(convos, policy=policy, features=features, cache=cache))["switch_rate"]
        if policy == "cascade":
            metrics["fallback_rate"] = float(np.mean([d.policy == router.config.fallback_policy
                                                      for d in decisions]))
        times = _timed_routes(router, timed, policy)
        metrics["p50_ms"], metrics["p95_ms"] = percentile_ms(times, 50), percentile_ms(times, 95)
        out[policy] = metrics
        cfg.say(f"{policy}: accuracy {metrics['accuracy']:.3f}, p50 {metrics['p50_ms']:.1f} ms")
    return {"policies": out, "fit_s": fit_s, "state_id": router.state.id, "n_test": len(test),
            "router_config": router.config.to_dict()}


def scaling_dataset(n_routes: int, bundle=None, seed: int = 0, quick: bool = False):
    """(adapters, train, dev, test) for 4, 40 or 400 synthetic routes (see module docstring)."""
    fams = [f for f in FAMILIES if f.kind != "ambiguous"]
    if n_routes == 4:
        chosen, mods = fams, [None]
    else:
        chosen = sorted(random.Random(seed).sample(fams, 40), key=lambda f: f.name)
        mods = [None] if n_routes == 40 else list(MODIFIERS)
    if len(chosen) * len(mods) < n_routes and n_routes != 4:
        raise ValueError(f"cannot build {n_routes} routes")
    adapters: dict[str, AdapterInfo] = {}
    rows = {"train": [], "dev": [], "test": []}
    for fam in chosen:
        for mod in mods:
            if n_routes == 4:
                label = fam.role
            else:
                label = fam.name.replace("/", ".") + (f".{mod[0]}" if mod else "")
                example = fam.templates[0].format(x=_x(fam.fills[0]), y=_y(fam.fills[0]))
                desc = f"{fam.role} requests like: {example}" + (f" (for the user's {mod[1]})" if mod else "")
                adapters[label] = AdapterInfo(label, desc)
            for i, fill in enumerate(fam.fills):
                for j, tpl in enumerate(fam.templates):
                    split = "train" if i <= 2 else "dev" if i == 3 else "test"
                    train_j = 0 if quick else 1  # quick: one training template per route
                    if mod and not ((split == "train" and j <= train_j) or (split == "dev" and j == 2)
                                    or (split == "test" and j >= 2)):
                        continue
                    text = tpl.format(x=_x(fill), y=_y(fill)) + (f" (It's for my {mod[1]}.)" if mod else "")
                    rows[split].append({"id": f"{label}/{i}/{j}", "label": label, "kind": "template",
                                        "messages": [{"role": "user", "content": text}],
                                        "group": f"{label}#{i}"})
    if n_routes == 4:
        from macaronic.harness import load_bundle

        infos = AdapterInfo.from_bundle(bundle or load_bundle())
    else:
        infos = list(adapters.values())
    return infos, rows["train"], rows["dev"], rows["test"]


def _x(fill) -> str:
    return fill if isinstance(fill, str) else fill[0]


def _y(fill) -> str:
    return "" if isinstance(fill, str) else fill[1]


def bench_scaling(backbone: Backbone, bundle=None, config: BenchConfig = BenchConfig(),
                  features: dict[str, np.ndarray] | None = None) -> list[dict]:
    cfg = config.sized()
    rows = []
    features = {} if features is None else features
    for n in cfg.scaling:
        adapters, train, dev, test = scaling_dataset(n, bundle, cfg.seed, cfg.quick)
        router = Router.fit(backbone, train, dev, bundle, adapters=adapters, features=features)
        rng = random.Random(cfg.seed)
        if cfg.quick:
            test = rng.sample(test, min(len(test), 80))
        names = [a.name for a in adapters]
        for policy in cfg.scaling_policies:
            if policy == "prompted":
                # Expensive (one prefill per shared label prefix): each sampled text is scored
                # once, alone, and that call gives both its accuracy and its latency.
                sample = rng.sample(test, min(len(test), cfg.prompted_scaling_samples))
                probs, times = [], []
                for e in sample:
                    t0 = time.perf_counter()
                    probs.append(router.score_texts([request_text(e["messages"])], policy, adapters)[0][0])
                    times.append((time.perf_counter() - t0) * 1e3)
                probs = np.stack(probs)
            else:
                sample = test
                texts = [request_text(e["messages"]) for e in sample]
                probs = router.score_texts(texts, policy, adapters, features)[0]
                times = []
                for t in texts[: cfg.latency_samples]:
                    t0 = time.perf_counter()
                    router.score_texts([t], policy, adapters)  # no feature cache: the full cost
                    times.append((time.perf_counter() - t0) * 1e3)
            acc = float(np.mean([names[i] == e["label"] for i, e in zip(probs.argmax(1), sample)]))
            part = router.state.probe if policy == "probe" else router.state.embedding
            rows.append({"n_adapters": len(adapters), "policy": policy, "accuracy": acc,
                         "n_test": len(sample), "p50_ms": percentile_ms(times, 50),
                         "memory_mb": sum(a.nbytes for a in part.arrays().values()) / 2**20})
            cfg.say(f"scaling {len(adapters)} routes, {policy}: accuracy {acc:.3f}")
    return rows


def run_bench(backbone: Backbone, bundle=None, config: BenchConfig = BenchConfig(),
              description: dict | None = None) -> dict:
    """The full report: policies, scaling, and a description of the machine and backbone."""
    import torch

    features: dict[str, np.ndarray] = {}  # the same request text is embedded once
    report = bench_policies(backbone, bundle, config, features)
    report["scaling"] = bench_scaling(backbone, bundle, config, features)
    report["meta"] = {"machine": platform.platform(), "processor": platform.processor() or platform.machine(),
                      "torch_threads": torch.get_num_threads(), "quick": config.quick,
                      "backbone": description or {}}
    return report


def markdown_table(report: dict) -> str:
    """The benchmark as markdown: one row per policy, then the scaling rows."""
    cols = ["accuracy", "macro_f1", "ece", "abstain_rate", "paraphrase_consistency",
            "worst_group_accuracy", "injection_flip_rate", "switch_rate", "switch_rate_no_hysteresis",
            "p50_ms", "p95_ms"]
    head = ["policy", "acc", "macro-F1", "ECE", "abstain", "para-cons", "worst-kind", "inj-flip",
            "switch", "switch (no hyst.)", "p50 ms", "p95 ms"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for name, m in report["policies"].items():
        cells = [f"{m[c]:.1f}" if c.endswith("_ms") else f"{m[c]:.3f}" for c in cols]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    if report.get("scaling"):
        lines += ["", "| routes | policy | acc | p50 ms | state MB |", "|---|---|---|---|---|"]
        for r in report["scaling"]:
            lines.append(f"| {r['n_adapters']} | {r['policy']} | {r['accuracy']:.3f} | "
                         f"{r['p50_ms']:.1f} | {r['memory_mb']:.3f} |")
    gold = next(iter(report["policies"].values()), {}).get("gold_switch_rate")
    if gold is not None:
        lines += ["", f"Test turns: {report.get('n_test')}; gold switch rate on multi-turn cases: {gold:.3f}."]
    return "\n".join(lines) + "\n"
