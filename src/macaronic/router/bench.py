"""The router benchmark: every policy and the cascade, side by side, plus scaling in routes.

Main tables: the router is fitted exactly as the shipped state is (macaronic.router.shipped:
template train + hand-written train writers, calibrated on both dev parts, fixed threads), and
the report says whether its state id equals the shipped one. Two held-out sets are reported
separately: "template" (the template families' test split: family-held-out, see data.py) and
"hand" (the hand-written test writers: writer-held-out, see handwritten.py). One more row,
"probe-template", is the probe fitted on the template data alone (the previous shipped setup).
Metrics as defined in macaronic.router.metrics, per-band accuracy included. Accuracy and the
other quality metrics come from one batched pass; p50/p95 come from separate single-turn
route() calls (no feature cache: the full cost a routed turn adds before its answer prefill).
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
The same three sizes on the hand-written turns ("hand" rows; writer-held-out, the splits of
handwritten.py): 4 the roles; 40 the hand-labelled sub-intents of handwritten_intents.txt (a route
"<role>.<intent>", described by the role and its first train turn); 400 those 40 crossed with the
same 10 context modifiers (the suffix goes on the last user message). There every route must be
told apart on phrasing no train writer used.
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
from dataclasses import dataclass, replace
from typing import Callable

import numpy as np

from macaronic.router.conversation import request_text
from macaronic.router.data import load_routing_data
from macaronic.router.families import FAMILIES
from macaronic.router.handwritten import load_handwritten
from macaronic.router.metrics import evaluate, percentile_ms
from macaronic.router.router import Router
from macaronic.router.types import AdapterInfo, Backbone

POLICIES = ("prompted", "embedding", "probe", "head", "arrow", "cascade", "prefill")
# prefill: the head's first stage, then the head on the answer's own prefill (`Router.route_prefilled`);
# scored only where the state has one (the base's `head_prefill` router option)
MODIFIERS = (("garden", "garden project"), ("school", "school assignment"),
             ("shop", "small business"), ("wedding", "wedding"), ("club", "book club"),
             ("team", "soccer team"), ("lab", "research lab"), ("gran", "grandmother"),
             ("pitch", "startup pitch"), ("camp", "camping trip"))


@dataclass(frozen=True)
class BenchConfig:
    quick: bool = False  # test on fill 0 of each group only (~1/5 of test), fewer samples
    latency_samples: int = 30
    scaling: tuple[int, ...] = (4, 40, 400)
    scaling_policies: tuple[str, ...] = ("embedding", "probe", "head", "prompted")
    scaling_data: tuple[str, ...] = ("template", "hand")
    prompted_scaling_samples: int = 40
    seed: int = 0
    log: Callable[[str], None] | None = None  # progress lines (the CLI sends them to stderr)
    policies: tuple[str, ...] = POLICIES
    prompted_samples: int | None = None  # prompted: score this many turns per set (None: all)
    refit: bool = True  # False: evaluate the shipped state instead of refitting it
    cache: str | None = None  # npz of request features reused across runs (see FeatureCache)

    def sized(self) -> "BenchConfig":
        if not self.quick:
            return self
        return replace(self, latency_samples=min(self.latency_samples, 8),
                       prompted_scaling_samples=min(self.prompted_scaling_samples, 8),
                       prompted_samples=min(self.prompted_samples or 40, 40))

    def say(self, msg: str) -> None:
        if self.log is not None:
            self.log(msg)


def _fill_index(e: dict) -> int:
    m = re.search(r"#(\d+)", e["group"])
    return int(m.group(1)) if m else 0


def quick_subset(examples: list[dict]) -> list[dict]:
    """Fill-0 groups (and every 5th hand case): injection twins and multi-turn stay consistent."""
    return [e for e in examples if _fill_index(e) % 5 == 0]


def _prefill_reader(router: Router, messages: list[dict], rows: dict | None = None):
    """`read` for `Router.route_prefilled`: the conversation's route prefill as a feature row (kept in
    `rows` by its layout, so a second pass over the same turns reads no forward)."""
    from macaronic.router.features import prefill_ids, prefill_row

    def read():
        ids, start = prefill_ids(router.backbone, router.bundle, messages)
        key = tuple(ids)
        if rows is None or key not in rows:
            got = prefill_row(router.backbone.route_prefill(ids, start, router.state.prefill.layer))
            if rows is None:
                return got
            rows[key] = got
        return rows[key]
    return read


def _timed_routes(router: Router, conversations: list[list[dict]], policy: str) -> list[float]:
    times = []
    for c in conversations:
        t0 = time.perf_counter()
        if policy == "prefill":
            router.route_prefilled(c, _prefill_reader(router, c))
        else:
            router.route(c, policy=policy)
        times.append((time.perf_counter() - t0) * 1e3)
    return times


def _held_out(quick: bool) -> dict[str, list[dict]]:
    template, hand = load_routing_data("test"), load_handwritten("test")
    if quick:
        template = quick_subset(template)
        keep = {e["id"] for e in hand if int(e["id"].split("/")[2]) % 3 == 0}
        hand = [e for e in hand if e["id"].split("/inj")[0] in keep]
    return {"template": template, "hand": hand}


def _policy_metrics(router: Router, test: list[dict], policy: str, cfg: BenchConfig, features, head_cache,
                    no_h: Router) -> dict:
    rng = random.Random(cfg.seed)
    if policy == "prompted" and cfg.prompted_samples and len(test) > cfg.prompted_samples:
        # Expensive (one prefill of the route prompt per turn): a fixed sample, twins kept.
        ids = {e["id"] for e in rng.sample([e for e in test if e["kind"] != "injection"], cfg.prompted_samples)}
        test = [e for e in test if e["id"] in ids or e.get("twin") in ids]
    cache: dict = {}
    convos = [e["messages"] for e in test]
    if policy == "prefill":
        decisions = [router.route_prefilled(c, _prefill_reader(router, c, cache)) for c in convos]
        m = evaluate(test, decisions)
        m["switch_rate_no_hysteresis"] = evaluate(
            test, [no_h.route_prefilled(c, _prefill_reader(no_h, c, cache)) for c in convos])["switch_rate"]
        m["prefill_rate"] = float(np.mean([d.policy == "prefill" for d in decisions if d.reason != "sticky-tool"]))
    else:
        decisions = router.route_many(convos, policy=policy, features=features, cache=cache, head_cache=head_cache)
        m = evaluate(test, decisions)
        m["switch_rate_no_hysteresis"] = evaluate(
            test, no_h.route_many(convos, policy=policy, features=features, cache=cache, head_cache=head_cache))["switch_rate"]
    if policy == "cascade":
        m["deferral_rate"] = float(np.mean([d.policy != router.config.cheap_policy for d in decisions
                                            if d.reason != "sticky-tool"]))
        m["band_default_rate"] = float(np.mean([d.reason == "band-default" for d in decisions]))
    m["rows"] = [{"id": e["id"], "label": e["label"], "pred": d.role} for e, d in zip(test, decisions)]
    timed = [e["messages"] for e in rng.sample([e for e in test if e["kind"] != "tool_result"],
                                               min(cfg.latency_samples, len(test)))]
    times = _timed_routes(router, timed, policy)
    m["p50_ms"], m["p95_ms"] = percentile_ms(times, 50), percentile_ms(times, 95)
    return m


class FeatureCache:
    """Request features (pooled rows and head rows, by text) kept in one npz between runs, so a
    rerun on the loaded box does not recompute them. Timed routes never read it."""

    def __init__(self, path: str | None, bundle=None, config=None):
        from macaronic.router.config import RouterConfig

        if bundle is None:
            from macaronic.harness import load_bundle

            bundle = load_bundle()
        cfg = config or RouterConfig.from_dict(bundle.router)  # the fitted config (`shipped.fit_config`)
        # head rows are only reused for the head they were computed for (its views and layer)
        self.head_key = f"{','.join(cfg.head_views)}@{cfg.head_depth}" + ("+prefix" if cfg.head_prefix else "")
        self.path, self.pooled, self.head = path, {}, {}
        if path:
            from pathlib import Path

            if Path(path).is_file():
                with np.load(path, allow_pickle=False) as z:
                    self.pooled = dict(zip(z["pooled_texts"].tolist(), z["pooled"]))
                    key = str(z["head_key"]) if "head_key" in z.files else "mean,last,chatmean,chatlast@None"
                    if key == self.head_key:
                        self.head = dict(zip(z["head_texts"].tolist(), z["head"]))

    def save(self) -> None:
        if not self.path:
            return
        def arr(d):
            return np.stack(list(d.values())) if d else np.zeros((0, 0), np.float32)
        np.savez(self.path, pooled_texts=np.array(list(self.pooled), dtype=str), pooled=arr(self.pooled),
                 head_texts=np.array(list(self.head), dtype=str), head=arr(self.head),
                 head_key=np.array(self.head_key))


def precompute(backbone: Backbone, config: BenchConfig, bundle=None) -> int:
    """Fill the feature cache for every text the benchmark scores; returns the number of texts."""
    from macaronic.harness import load_bundle
    from macaronic.router.shipped import fit_config

    bundle = bundle or load_bundle()
    fitted = fit_config(backbone, bundle)
    data, cache = bench_data(config.quick), FeatureCache(config.cache, bundle, fitted)
    router = Router(backbone, bundle, config=fitted)
    fit_parts = ("train", "dev", "template_train", "template_dev") if config.refit else ()
    texts = sorted({request_text(e["messages"]) for k in fit_parts for e in data[k]}
                   | {request_text(e["messages"]) for v in data["held_out"].values() for e in v})
    for i in range(0, len(texts), 128):
        router.embed(texts[i:i + 128], cache.pooled)
        router.head_embed(texts[i:i + 128], cache.head)
        cache.save()
        config.say(f"features for {min(i + 128, len(texts))} / {len(texts)} texts")
    return len(texts)


def bench_data(quick: bool = False) -> dict:
    """{"train", "dev" (what the shipped state is fitted on), "template_train", "template_dev"
    (the previous setup's data), "held_out": {"template": [...], "hand": [...]}}."""
    from macaronic.router.data import router_fit_data

    train, dev = router_fit_data()
    return {"train": train, "dev": dev, "template_train": load_routing_data("train"),
            "template_dev": load_routing_data("dev"), "held_out": _held_out(quick)}


def bench_policies(backbone: Backbone, bundle=None, config: BenchConfig = BenchConfig(),
                   features: dict[str, np.ndarray] | None = None, data: dict | None = None) -> dict:
    """{"sets": {set: {policy: metrics}}, "fit_s", "state_id", "shipped_state_id", "bands", ...}.
    `features` (text -> pooled row) is filled and reused; pass one dict to share it. `data` is
    `bench_data()` unless given (tests pass a slice)."""
    from macaronic.harness import load_bundle
    from macaronic.router.config import RouterConfig
    from macaronic.router.probe import ProbePolicy
    from macaronic.router.router import training_pairs
    from macaronic.router.shipped import backbone_base, fit_config, fit_state, shipped_dir
    from macaronic.router.state import RouterState

    cfg = config.sized()
    bundle = bundle or load_bundle()
    data = data or bench_data(cfg.quick)
    cache = FeatureCache(cfg.cache, bundle, fit_config(backbone, bundle))
    features = cache.pooled if features is None else features
    head_cache = cache.head
    t0 = time.perf_counter()
    if cfg.refit:
        router = fit_state(backbone, bundle, fit_config(backbone, bundle), log=cfg.say,
                           data=(data["train"], data["dev"]), features=features, head_cache=head_cache)
    else:
        from macaronic.router.shipped import load_shipped

        router = load_shipped(backbone, bundle, RouterConfig.from_dict(bundle.router))
    fit_s = time.perf_counter() - t0
    try:
        shipped_id = RouterState.load(shipped_dir(backbone_base(backbone))).id
    except (OSError, ValueError):
        shipped_id = None
    cfg.say(f"fitted in {fit_s:.1f}s; state {router.state.id[:16]} "
            f"({'equals' if shipped_id == router.state.id else 'differs from'} the shipped state)")
    baseline = None
    if cfg.refit:  # the previous setup for comparison: the probe fitted on the template data only
        ttexts, tlabels = training_pairs(data["template_train"])
        dtexts, dlabels = training_pairs(data["template_dev"])
        old_probe = ProbePolicy.fit(router.embed(ttexts, features), tlabels, router.embed(dtexts, features),
                                    dlabels, C=router.config.probe_c)
        baseline = Router(backbone, bundle, RouterState(probe=old_probe), router.config)
    out: dict[str, dict] = {}
    for name, test in data["held_out"].items():
        rows = {}
        for policy in cfg.policies:
            if policy == "prefill" and not router.reads_prefill():
                cfg.say(f"{name} / prefill: skipped (the state has no prefill head, or another identity's)")
                continue
            rows[policy] = _policy_metrics(router, test, policy, cfg, features, head_cache,
                                           router.with_config(hysteresis_margin=0.0))
            cfg.say(f"{name} / {policy}: accuracy {rows[policy]['accuracy']:.3f}, "
                    f"macro-F1 {rows[policy]['macro_f1']:.3f}, p50 {rows[policy]['p50_ms']:.1f} ms")
        if baseline is not None:
            rows["probe-template"] = _policy_metrics(baseline, test, "probe", cfg, features, head_cache,
                                                     baseline.with_config(hysteresis_margin=0.0))
        out[name] = rows
    tools = tools_attached(router, data["held_out"]["hand"], bundle) if "hand" in data["held_out"] else None
    if tools:
        cfg.say("tools attached: " + ", ".join(f"{k} {v['accuracy']:.3f}" for k, v in tools.items()))
    cache.save()
    return {"sets": out, "tools_attached": tools, "refit": cfg.refit, "fit_s": fit_s, "state_id": router.state.id, "shipped_state_id": shipped_id,
            "state_bytes": router.state.nbytes(), "n_train": len(data["train"]), "n_dev": len(data["dev"]),
            "n_test": {k: len(v) for k, v in data["held_out"].items()},
            "bands": router.state.bands.rows() if router.state.bands is not None else None,
            "head": router.state.head.meta() if router.state.head is not None else None,
            "router_config": router.config.to_dict()}


def _tool(fn: str, description: str, /, **params: str) -> dict:
    return {"type": "function", "function": {"name": fn, "description": description, "parameters": {
        "type": "object", "properties": {k: {"type": "string", "description": v} for k, v in params.items()},
        "required": list(params)}}}


# Tools a client attaches to every request (hand-written here, not from any suite): one set an
# assistant app would send (what agent turns ask for), one that has nothing to do with most turns.
TOOLSETS = {
    "assistant": [_tool("create_event", "Add an event to the user's calendar", title="what", when="date and time"),
                  _tool("set_reminder", "Remind the user at a time", text="what to remember", when="date and time"),
                  _tool("add_note", "Save a note", title="note title", body="note text"),
                  _tool("search_contacts", "Find a contact by name", name="who")],
    "unrelated": [_tool("get_stock_price", "Latest price of a stock ticker", ticker="e.g. AAPL"),
                  _tool("convert_currency", "Convert an amount between currencies", amount="number", to="currency")],
}


def tools_attached(router: Router, test: list[dict], bundle) -> dict:
    """The held-out turns with each toolset attached (`tool_choice` auto), decided the way the
    server does: the tools rule (`config.tools_route`), else the router (on the answer's own prefill
    where its state has that head; the prefill's layout leaves the tools out, as the MoL's does). The label stays the turn's
    own: tools being there does not make a chat question an agent task. Per toolset: accuracy,
    macro-F1, how often the rule fired, accuracy on the rule's role's turns (the agent's) and on the others."""
    from macaronic.router.config import RouterConfig, tool_session, tools_route
    from macaronic.router.metrics import macro_f1

    tool_role = RouterConfig.from_dict(bundle.router).tools_route  # the role the rule answers with (the agent)

    turns = [e for e in test if e.get("kind") != "tool_result"]
    if router.reads_prefill():  # as the server routes: on the answer's own prefill
        routed = [router.route_prefilled(e["messages"], _prefill_reader(router, e["messages"])).role for e in turns]
    else:
        routed = [d.role for d in router.route_many([e["messages"] for e in turns])]
    labels = [e["label"] for e in turns]
    out = {}
    for name, tools in TOOLSETS.items():
        rule = [tools_route(bundle, tools, "auto", request_text(e["messages"]), tool_session(e["messages"]))
                for e in turns]
        picks = [r or d for r, d in zip(rule, routed)]
        ok = [p == label for p, label in zip(picks, labels)]
        agent = [o for o, label in zip(ok, labels) if label == tool_role]
        other = [o for o, label in zip(ok, labels) if label != tool_role]
        out[name] = {"n": len(turns), "tools": [t["function"]["name"] for t in tools],
                     "accuracy": float(np.mean(ok)), "macro_f1": macro_f1(labels, picks),
                     "rule_rate": float(np.mean([r is not None for r in rule])),
                     "accuracy_agent": float(np.mean(agent)) if agent else None,
                     "accuracy_other": float(np.mean(other)) if other else None}
    return out


def scaling_dataset(n_routes: int, bundle=None, seed: int = 0, quick: bool = False, data: str = "template"):
    """(adapters, train, dev, test) for 4, 40 or 400 routes on the template families or the
    hand-written turns (`data` "template" or "hand"; see module docstring)."""
    if data == "hand":
        return hand_scaling_dataset(n_routes, bundle, quick)
    if data != "template":
        raise ValueError(f"unknown scaling data {data!r}; expected 'template' or 'hand'")
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


def hand_scaling_dataset(n_routes: int, bundle=None, quick: bool = False):
    """(adapters, train, dev, test) for 4, 40 or 400 routes on the hand-written turns."""
    from macaronic.router.handwritten import load_intents

    if n_routes not in (4, 40, 400):
        raise ValueError(f"hand-written scaling has 4, 40 or 400 routes, not {n_routes}")
    intents = load_intents()
    examples = load_handwritten()
    if quick:  # dev and test: every third turn of a writer (an injection stays with its twin)
        examples = [e for e in examples if e["split"] == "train" or int(e["id"].split("/")[2]) % 3 == 0]
    mods = list(MODIFIERS) if n_routes == 400 else [None]
    adapters: dict[str, AdapterInfo] = {}
    rows = {"train": [], "dev": [], "test": []}
    for e in examples:
        for mod in mods:
            label = e["label"] if n_routes == 4 else intents[e["id"]] + (f".{mod[0]}" if mod else "")
            messages = [dict(m) for m in e["messages"]]
            if mod:
                messages[-1]["content"] += f" (It's for my {mod[1]}.)"
            if n_routes != 4 and label not in adapters and e["split"] == "train" and e["kind"] == "hand":
                desc = f"{e['label']} requests like: {request_text(e['messages'])}"
                adapters[label] = AdapterInfo(label, desc + (f" (for the user's {mod[1]})" if mod else ""))
            rows[e["split"]].append({**e, "label": label, "messages": messages,
                                     "id": e["id"] + (f"@{mod[0]}" if mod else "")})
    if n_routes == 4:
        from macaronic.harness import load_bundle

        infos = AdapterInfo.from_bundle(bundle or load_bundle())
    else:
        missing = sorted({r["label"] for part in rows.values() for r in part} - set(adapters))
        if missing:
            raise ValueError(f"routes without a plain train turn: {missing}")
        infos = [adapters[k] for k in sorted(adapters)]
    return infos, rows["train"], rows["dev"], rows["test"]


def macro_f1(labels: list[str], pred: list[str]) -> float:
    """Macro-F1 over the routes present in `labels` (a route only predicted counts as a miss)."""
    f1 = []
    for c in sorted(set(labels)):
        tp = sum(p == c and y == c for y, p in zip(labels, pred))
        fp = sum(p == c and y != c for y, p in zip(labels, pred))
        fn = sum(p != c and y == c for y, p in zip(labels, pred))
        f1.append(2 * tp / (2 * tp + fp + fn) if tp else 0.0)
    return float(np.mean(f1)) if f1 else 0.0


def _x(fill) -> str:
    return fill if isinstance(fill, str) else fill[0]


def _y(fill) -> str:
    return "" if isinstance(fill, str) else fill[1]


def bench_scaling(backbone: Backbone, bundle=None, config: BenchConfig = BenchConfig(),
                  features: dict[str, np.ndarray] | None = None) -> list[dict]:
    cfg = config.sized()
    rows = []
    features = {} if features is None else features
    for data, n in [(d, n) for d in cfg.scaling_data for n in cfg.scaling]:
        adapters, train, dev, test = scaling_dataset(n, bundle, cfg.seed, cfg.quick, data)
        router = Router.fit(backbone, train, dev, bundle, adapters=adapters, features=features,
                            head="head" in cfg.scaling_policies)
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
            pred = [names[i] for i in probs.argmax(1)]
            acc = float(np.mean([p == e["label"] for p, e in zip(pred, sample)]))
            part = getattr(router.state, policy, None) or router.state.embedding
            rows.append({"data": data, "n_adapters": len(adapters), "policy": policy, "accuracy": acc,
                         "macro_f1": macro_f1([e["label"] for e in sample], pred),
                         "n_test": len(sample), "p50_ms": percentile_ms(times, 50),
                         "memory_mb": sum(a.nbytes for a in part.arrays().values()) / 2**20})
            cfg.say(f"scaling {data} {len(adapters)} routes, {policy}: accuracy {acc:.3f}")
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
    """The benchmark as markdown: per held-out set one row per policy, per-band accuracy of the
    cascade, the dev band table, then the scaling rows."""
    cols = ["n", "accuracy", "macro_f1", "ece", "abstain_rate", "paraphrase_consistency",
            "worst_group_accuracy", "injection_flip_rate", "switch_rate", "switch_rate_no_hysteresis",
            "p50_ms", "p95_ms"]
    head = ["set", "policy", "turns", "acc", "macro-F1", "ECE", "abstain", "para-cons", "worst-kind",
            "inj-flip", "switch", "switch (no hyst.)", "p50 ms", "p95 ms"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for set_name, rows in report["sets"].items():
        for name, m in rows.items():
            cells = [str(m[c]) if c == "n" else f"{m[c]:.1f}" if c.endswith("_ms") else f"{m[c]:.3f}" for c in cols]
            lines.append(f"| {set_name} | {name} | " + " | ".join(cells) + " |")
    if report.get("tools_attached"):
        lines += ["", "The hand-written held-out turns with tools attached (`tool_choice` auto; the tools rule, then "
                      "the router, as the server decides; each turn keeps its own label):", "",
                  "| tools | turns | acc | macro-F1 | rule fired | acc, agent turns | acc, other turns |",
                  "|---|---:|---:|---:|---:|---:|---:|"]
        for name, m in report["tools_attached"].items():
            f = lambda x: "-" if x is None else f"{x:.3f}"  # noqa: E731
            lines.append(f"| {name}: {', '.join(m['tools'])} | {m['n']} | {f(m['accuracy'])} | {f(m['macro_f1'])} | "
                         f"{f(m['rule_rate'])} | {f(m['accuracy_agent'])} | {f(m['accuracy_other'])} |")
    for set_name, rows in report["sets"].items():
        if "cascade" not in rows:
            continue
        bands = rows["cascade"]["bands"]
        lines += ["", f"Per-band accuracy of the cascade's final decisions on {set_name} "
                      f"(deferral rate {rows['cascade'].get('deferral_rate', 0):.3f}):", "",
                  "| confidence | " + " | ".join(f"({b['band'][0]:.2f}, {b['band'][1]:.2f}]" for b in bands) + " |",
                  "|---|" + "---|" * len(bands),
                  "| turns | " + " | ".join(str(b["n"]) for b in bands) + " |",
                  "| accuracy | " + " | ".join("-" if b["accuracy"] is None else f"{b['accuracy']:.3f}" for b in bands) + " |"]
    if report.get("bands"):
        opts = list(report["bands"][0]["dev_accuracy"])
        lines += ["", "Band table fitted on dev (primary's confidence band -> dev accuracy of each option; choice):", "",
                  "| band | dev turns | " + " | ".join(opts) + " | choice |", "|---|---|" + "---|" * (len(opts) + 1)]
        for r in report["bands"]:
            acc = ["-" if r["dev_accuracy"][o] is None else f"{r['dev_accuracy'][o]:.3f}" for o in opts]
            lines.append(f"| ({r['band'][0]:.2f}, {r['band'][1]:.2f}] | {r['dev_n']} | " + " | ".join(acc)
                         + f" | {r['choice']} |")
    if report.get("scaling"):
        lines += ["", "| data | routes | policy | test turns | acc | macro-F1 | p50 ms | state MB |",
                  "|---|---|---|---|---|---|---|---|"]
        for r in report["scaling"]:
            f1 = "-" if r.get("macro_f1") is None else f"{r['macro_f1']:.3f}"
            lines.append(f"| {r.get('data', 'template')} | {r['n_adapters']} | {r['policy']} | {r['n_test']} | "
                         f"{r['accuracy']:.3f} | {f1} | {r['p50_ms']:.1f} | {r['memory_mb']:.3f} |")
    same = report.get("shipped_state_id") == report.get("state_id")
    lines += ["", f"Fitted state {str(report.get('state_id'))[:16]} ({report.get('state_bytes', 0) / 1024:.0f} KiB of "
                  f"arrays), {'identical to' if same else 'NOT identical to'} the shipped state; "
                  f"train {report.get('n_train')} / dev {report.get('n_dev')} turns; test turns {report.get('n_test')}."]
    return "\n".join(lines) + "\n"
