"""Operators: from a parent pair, its failure clusters and its experience, the candidates of one
generation's search, each a list of successor steps with the components it touches.

  prompt        a role's system prompt gains the instruction of its largest failure cluster
                (the registry's `hints`); one candidate per role, largest clusters first
  decoding      the role with the most failures decodes greedily (if it sampled), else with half
                its token cap (if its failures run long)
  router_refit  the router refitted on logged outcomes, policy chosen on dev; with served
                corrections (evolve/served.py), on them too (the step names their rows' sha256)
  rft           RFT with exploration: k samples per train task at T >= 0.7 (collected by the loop),
                graded successes (plus STaR-style hinted successes for tasks never solved),
                warm-started from the parent's adapter for a few steps; one candidate for each of
                the two roles with the most failures (and enough successes)
  failure_data  targeted data for the failing skill (evolve/failure_data.py), one candidate per
                skill whose clusters failed: lookup-then-act episodes on tool compositions in no
                split (act_without_lookup, wrong_state, no_call), the same with requests that
                hold a <...> placeholder the lookup fills (copied_placeholder), and episodes
                whose final reply states what the write returned (missing_facts), lookups and
                writes over the tools the others leave out, chosen by the request's verb
                (empty_lookup, answered_after_lookup), a person's field looked up in the
                contacts and carried onto another contact (empty_lookup); for GenUI
                (missing_content), cards that show every value of the data, on card families in
                no split; when more than one skill fails, first one candidate trained on every
                failing skill's data; from a parent already trained on failure data, first the
                failing skills and the ones it was trained on, new episodes, then each failing
                skill it was not trained on, alone, with its data file replayed
  grpo          a few GRPO steps on each specialist whose suite's reward is verifiable (the
                registry's `grpo`: coding, its unit tests), warm-started
  data_engine   the adapter of each of the two roles with the most failures, warm-started on
                `Budget.engine_examples` fresh examples of its registry `data_engine` (a seed drawn
                from the adapter, so not the examples it was trained on) mixed with as many
                replayed; size and steps grow by escalation, `lr_pct` scales the recorded lr;
                a role with served failures (`--experience`) gets examples made like them

Which specialists get failure data, with which skills, and which get GRPO, is their registry
entries' (`failure_data`, `grpo`): the agent's skills and GenUI's are `AGENT_DATA` and `GENUI_DATA`.
A candidate already screened from the same parent with the same steps is not proposed again; a
training candidate (rft, failure_data, grpo) that dev screening found neutral comes back from the
same parent with twice its training (steps; examples or prompts too), up to `Budget.escalate`
times (`escalations`), before the router refit and the training menu. The kinds take turns for
the `Budget.candidates` slots, the ones the lineage screened least first (`fair`), so the cheap
instruction candidates, listed first, cannot fill every slot. Pure: numbers and manifests in,
Candidate list out.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path

from macaronic.evolve.failure_data import step_version
from macaronic.evolve.failures import hints_for
from macaronic.evolve.search import Candidate
from macaronic.specialist import all_specialists, find, lookup, resolve

# failure-driven data: skill, the agent clusters it answers, what it teaches (evolve/failure_data.py)
FAILURE_SKILLS = (("fill_placeholders", ("copied_placeholder",), "fill-the-placeholder"),
                  ("lookup_then_act", ("act_without_lookup", "wrong_state", "no_call", "answered_after_lookup"),
                   "lookup-then-act"),
                  ("state_facts", ("missing_facts",), "state-the-returned-facts"),
                  ("pick_tools", ("empty_lookup", "answered_after_lookup"), "pick-the-tool"),
                  ("find_person", ("empty_lookup",), "find-the-person"),
                  ("order_writes", ("answered_after_lookup",), "the-write-the-order-allows"))
GENUI_SKILLS = (("show_values", ("missing_content",), "show-every-value"),)


@dataclass(frozen=True)
class FailureData:
    """A specialist's failure-data skills: (skill, the clusters of its suite it answers, what it
    teaches). `stack`: propose the failing skills together, and on top of the ones its adapter was
    trained on, before each alone (the agent's: one skill's data alone can unlearn another's); else
    each failing skill alone."""
    skills: tuple
    stack: bool = False


AGENT_DATA = FailureData(FAILURE_SKILLS, stack=True)
GENUI_DATA = FailureData(GENUI_SKILLS)


def signature(parent: str, steps) -> str:
    """What a candidate does from its parent: its steps without their notes (a note carries the
    cluster's count, which moves between generations while the edit stays the same)."""
    def bare(s):
        d = json.loads(s) if isinstance(s, str) and s.startswith("{") else s
        if isinstance(d, dict):
            return {k: {a: b for a, b in v.items() if a != "note"} if isinstance(v, dict) else v for k, v in d.items()}
        return d

    return json.dumps([parent, [bare(s) for s in steps]], sort_keys=True)


def trained_skills(data, role: str = "agent") -> list[str]:
    """The failure-data skills a pair's adapter for `role` was trained on, from its data files' names
    (successor.failure_data writes `failure-<role>-<skill>+<skill>.jsonl`)."""
    skills = lookup(role, "failure_data")
    names = {s for s, _, _ in (skills.skills if skills else ())}
    out, head = [], f"failure-{role}-"
    for f in data:
        n = Path(f).name
        if n.startswith(head) and n.endswith(".jsonl"):
            out += [s for s in n[len(head):-len(".jsonl")].split("+") if s in names and s not in out]
    return out


def _fresh_seed(parent, role: str, trained: bool) -> dict:
    """The failure data's seed: none (0) for an adapter not yet trained on it; after that one drawn
    from the adapter's id, so a successor's successor trains on new episodes, not the same again."""
    return {"seed": int(parent.adapters[role]["id"][:6], 16)} if trained else {}


def _role_failures(clusters) -> dict[str, int]:
    out: dict[str, int] = {}
    for (suite, label), n in clusters.items():  # a specialist's contract suite has its name
        role = suite if find(suite) else (label.split(":")[1] if ":" in label else None)
        if role:
            out[role] = out.get(role, 0) + n
    return out


# The training operators' size knobs: what an escalation doubles (a knob left out of a step is its default).
GROWS = {"rft": ("steps",), "failure_data": ("steps", "examples"), "grpo": ("steps", "prompts"),
         "data_engine": ("steps", "examples")}


def _size(name: str, knob: str, opts: dict, budget) -> int:
    if opts.get(knob):
        return int(opts[knob])
    if knob == "steps":
        return budget.grpo_steps if name == "grpo" else budget.rft_steps
    if knob == "examples" and name == "data_engine":
        return budget.engine_examples
    return {"examples": 24, "prompts": 8}[knob]  # successor.failure_data's and successor.grpo's defaults


def escalations(screens, parent_id: str, budget) -> list[tuple[str, list, tuple, str]]:
    """(operator, steps, components, note) for each training candidate from `parent_id` that dev
    screening found neutral: the same steps with twice the training (steps, and examples or prompts),
    marked with the level (`escalation`: 1, 2, ...), up to `budget.escalate` levels. A neutral
    candidate may have been too small to move dev; a harmful one is not grown, a positive one is
    already in the stack. Each level is a new signature, so the duplicate check lets it through once."""
    out = []
    for sc in screens:
        if sc["verdict"] != "neutral" or sc["parent_id"] != parent_id or sc["operator"] not in GROWS:
            continue
        steps, level = [], 0
        for s in sc["detail"].get("steps", []):
            d = json.loads(s) if isinstance(s, str) and s.startswith("{") else s
            if isinstance(d, dict) and len(d) == 1 and next(iter(d)) in GROWS:
                (name, opts), = d.items()
                level = int(opts.get("escalation", 0)) + 1
                d = {name: {**{k: v for k, v in opts.items() if k != "note"},
                            **{k: 2 * _size(name, k, opts, budget) for k in GROWS[name]}, "escalation": level}}
            steps.append(d)
        if 0 < level <= budget.escalate:
            note = (sc["detail"].get("candidate") or {}).get("note", "")
            out.append((sc["operator"], steps, tuple(sc["components"]),
                        f"escalated x{2 ** level} after a neutral screen: {note}".rstrip(": ")))
    return out


def propose(parent, clusters, operators: tuple[str, ...], budget, tried: set[str], successes: dict | None = None,
            start: int = 1, harmful: frozenset[str] = frozenset(),
            served: tuple[str, int] | None = None, screens=(),
            served_seeds: dict[str, tuple[str, int]] | None = None) -> list[Candidate]:
    """Candidates from `parent` (a PairManifest), at most budget.candidates, taken in turn from each
    operator kind (`fair`), best guess first within a kind.
    `harmful`: signatures of candidates screened below zero on a suite they touched (a skill whose
    data alone did harm from this parent is not stacked onto the others). `served`: (sha256 prefix,
    count) of the routing rows read from served corrections. `screens`: the archive's screenings
    (lineage rows): neutral training candidates from this parent come back larger (`escalations`).
    `served_seeds`: specialist -> (seeds file's sha256 prefix, seeds) of served failures; the
    data_engine candidate of such a role makes its fresh examples like them."""
    from macaronic.harness import load_bundle

    bundle = load_bundle(parent.harness["path"])
    out: list[Candidate] = []

    def add(op: str, steps: list, comps: tuple, note: str):
        steps = tuple(json.dumps(_versioned(s), sort_keys=True) if isinstance(s, dict) else s for s in steps)
        sig = signature(parent.id, steps)
        if sig in tried or any(signature(c.parent, c.steps) == sig for c in out):
            return False
        out.append(Candidate(f"cand-{start + len(out):02d}", op, parent.id, steps, comps, note))
        return True

    fails = _role_failures(clusters)
    if "prompt" in operators:
        seen_roles = set()
        for role, hint, (suite, label), n in hints_for(clusters):
            if role in seen_roles or role not in bundle.role_names:
                continue
            if hint in bundle.role(role).system_prompt:
                continue  # already there (an earlier generation's accepted variant)
            if add("prompt", [{"harness_edit": {"file": f"roles/{role}.md", "append": hint,
                                                "note": f"prompt variant from failure cluster {suite}/{label} ({n})"}}],
                   (f"prompt:{role}",), f"{role}: {label} x{n}"):
                seen_roles.add(role)  # screened already from this parent: the role's next cluster instead
            if len(seen_roles) >= 2:
                break
    if "decoding" in operators:
        for role, n in sorted(fails.items(), key=lambda kv: (-kv[1], kv[0])):
            if role not in bundle.role_names:
                continue
            dec = bundle.decoding_for(role)
            if float(dec.get("temperature", 0.0)) > 0:
                change, why = {"temperature": 0.0}, "greedy instead of sampling"
            elif clusters.get((role, "too_long")) or int(dec.get("max_tokens", 256)) > 256:
                change, why = {"max_tokens": max(64, int(dec.get("max_tokens", 256)) // 2)}, "half the token cap"
            else:
                continue
            add("decoding", [{"harness_edit": {"file": "decoding.json", "merge": {"roles": {role: change}},
                                               "note": f"{role} decoding: {why} ({n} failures)"}}],
                (f"decoding:{role}",), f"{role}: {why}")
            break
    for op, steps, comps, note in escalations(screens, parent.id, budget):
        if op in operators:
            add(op, steps, comps, note)
    if "router_refit" in operators:
        wrong = sum(n for (s, lb), n in clusters.items() if lb.startswith("wrong_route"))
        if served:
            add("router_refit", [{"router_refit": {"served": served[0]}}], ("router",),
                f"{wrong} wrongly routed turns, {served[1]} served corrections")
        else:
            add("router_refit", ["router_refit"], ("router",), f"{wrong} wrongly routed dev turns")
    if "rft" in operators and successes:
        ranked = sorted((r for r in successes if r in parent.adapters and len(successes[r]) >= budget.min_successes),
                        key=lambda r: (-fails.get(r, 0), -len(successes[r]), r))
        for role in ranked[:2]:  # one candidate per role (disjoint: they can stack)
            add("rft", [{"rft": {"roles": [role], "warm": True, "steps": budget.rft_steps}}], (f"adapter:{role}",),
                f"{role}: {len(successes[role])} graded successes, warm start")
    if "failure_data" in operators:
        for spec in all_specialists():  # the registry's order: the agent's candidates before GenUI's
            if spec.failure_data and spec.name in parent.adapters:
                data = resolve(spec.failure_data)
                (_stacked if data.stack else _alone)(spec.name, data.skills, parent, clusters, budget, harmful, add)
    if "data_engine" in operators:
        ranked = [(role, n, spec) for role, n in sorted(fails.items(), key=lambda kv: (-kv[1], kv[0]))
                  if (spec := find(role)) is not None and spec.data_engine and role in parent.adapters
                  and engine_ready(spec.data_engine)]
        for role, n, spec in ranked[:2]:  # the two roles with the most failures, one candidate each (they stack)
            seeds = (served_seeds or {}).get(role)
            like = {"served": seeds[0]} if seeds else {}
            add("data_engine", [{"data_engine": {"role": role, "examples": budget.engine_examples,
                                                 "steps": budget.rft_steps, **like, **_fresh_seed(parent, role, True)}}],
                (f"adapter:{role}",), f"{role}: {budget.engine_examples} fresh {spec.data_engine} examples "
                + (f"like {seeds[1]} served failures" if seeds else f"for {n} failures"))
    if "grpo" in operators and budget.grpo_steps > 0:
        for spec in all_specialists():
            if spec.grpo and spec.name in parent.adapters:
                add("grpo", [{"grpo": {"role": spec.name, "steps": budget.grpo_steps}}], (f"adapter:{spec.name}",),
                    f"{spec.name}: {budget.grpo_steps} GRPO steps on its suite's verifiable reward")
    return fair(out, screens, budget.candidates, start)


def fair(cands: list[Candidate], screens, n: int, start: int = 1) -> list[Candidate]:
    """At most `n` of `cands`, taken in turn from each operator kind, so no kind is starved by one
    that proposes more: the kinds the lineage screened least go first (ties: the order proposed),
    and within a kind the proposed order holds. Without this, cheap instruction candidates (listed
    first) filled every slot and no training candidate was ever screened. Renumbered from `start`."""
    count: dict[str, int] = {}
    for sc in screens:
        count[sc["operator"]] = count.get(sc["operator"], 0) + 1
    kinds: dict[str, list[Candidate]] = {}
    for c in cands:
        kinds.setdefault(c.operator, []).append(c)
    order = sorted(kinds, key=lambda k: count.get(k, 0))  # stable: ties keep the proposed order
    picked: list[Candidate] = []
    while len(picked) < n and any(kinds[k] for k in order):
        for k in order:
            if kinds[k] and len(picked) < n:
                picked.append(kinds[k].pop(0))
    return [replace(c, name=f"cand-{start + i:02d}") for i, c in enumerate(picked)]


def engine_ready(name: str) -> bool:
    """Whether a data engine can build here (the sampled engines need their committed rows)."""
    from macaronic.train.builders import build

    try:
        return len(build(name, 1, 0)) == 1
    except (ValueError, FileNotFoundError, OSError):
        return False


def _failing(role: str, skills, clusters) -> list[tuple[str, str, int]]:
    """(skill, what it teaches, failures) for each skill of `skills` whose clusters of `role` failed."""
    return [(skill, what, n) for skill, labels, what in skills
            if (n := sum(v for (s, lb), v in clusters.items() if s == role and lb in labels))]


def _alone(role: str, skills, parent, clusters, budget, harmful, add) -> None:
    """One candidate per failing skill, its data alone (a new draw once the adapter was trained on it)."""
    for skill, what, n in _failing(role, skills, clusters):
        extra = _fresh_seed(parent, role, skill in trained_skills(parent.data, role))
        add("failure_data", [{"failure_data": {"role": role, "skill": skill, "steps": budget.rft_steps, **extra}}],
            (f"adapter:{role}",), f"{role}: {what} data for {n} failures")


def _stacked(role: str, skills, parent, clusters, budget, harmful, add) -> None:
    """The failing skills together first, then each alone; from a parent already trained on failure
    data, on top of what it learnt, and last the union drawn anew."""
    failing = _failing(role, skills, clusters)
    known = trained_skills(parent.data, role)
    extra = _fresh_seed(parent, role, bool(known))
    comp = (f"adapter:{role}",)
    if known and failing:
        # a parent already trained on failure data (its file is replayed under every candidate)
        def alone(skill):
            return [{"failure_data": {"role": role, "skill": skill, "steps": budget.rft_steps, **extra}}]

        # first the failing skills it never learnt, together on top of what it learnt, leaving out
        # any whose data alone did harm from this parent (run-q3's generation 3: pick_tools -0.125)
        new = [(s, w, n) for s, w, n in failing if s not in known
               and signature(parent.id, alone(s)) not in harmful]
        if len(new) > 1:
            add("failure_data", [{"failure_data": {"role": role, "skills": [s for s, _, _ in new],
                                                   "steps": budget.rft_steps, **extra}}],
                comp, f"{role}: {' + '.join(w for _, w, _ in new)} data for "
                      f"{sum(n for _, _, n in new)} failures (on top of the skills it was trained on)")
        # then each failing skill it never learnt, alone on top of what it learnt
        for skill, what, n in failing:
            if skill not in known:
                add("failure_data", alone(skill), comp, f"{role}: {what} data for {n} failures (on top of the "
                                                        "skills it was trained on)")
        # last the union, the failing skills and the ones it learnt drawn anew (one skill's data alone
        # unlearnt the others: run-q2's generation 2); it retrains every old skill too, and one old
        # skill's data can push a dev family the wrong way (run-q3's generation 2: cancel-the-order
        # episodes made refund requests cancel), hence last
        names = [s for s, _, _ in skills if s in known or any(f[0] == s for f in failing)]
        whats = [w for s, _, w in skills if s in names]
        add("failure_data", [{"failure_data": {"role": role, "skills": names, "steps": budget.rft_steps, **extra}}],
            comp, f"{role}: {' + '.join(whats)} data for {sum(n for _, _, n in failing)} failures "
                  "(with the skills it was trained on)")
        failing = []
    if len(failing) > 1:  # every failing skill in one adapter: one skill's data alone can unlearn another's
        add("failure_data", [{"failure_data": {"role": role, "skills": [s for s, _, _ in failing],
                                               "steps": budget.rft_steps, **extra}}],
            comp, f"{role}: {' + '.join(w for _, w, _ in failing)} data for {sum(n for _, _, n in failing)} failures")
    for skill, what, n in failing:
        add("failure_data", [{"failure_data": {"role": role, "skill": skill, "steps": budget.rft_steps, **extra}}],
            comp, f"{role}: {what} data for {n} failures")


def _versioned(step: dict) -> dict:
    """A failure_data step names the generator version its skills last changed in (none: 1)."""
    fd = step.get("failure_data")
    if fd is None or (v := step_version(fd.get("skills") or [fd["skill"]])) == 1:
        return step
    return {**step, "failure_data": {**fd, "data": v}}


def explicit(parent_id: str, specs: tuple[dict, ...], start: int = 1) -> list[Candidate]:
    """Plan-given candidates (tests, hand-written proposals), components from their steps."""
    out = []
    for i, c in enumerate(specs):
        steps = tuple(c["steps"])
        comps = tuple(c.get("components") or components_of(steps))
        out.append(Candidate(f"cand-{start + i:02d}", c.get("operator", "harness_edit"), parent_id, steps, comps,
                             c.get("note", "")))
    return out


def components_of(steps) -> tuple[str, ...]:
    """What a list of steps touches (for stacking and for the suites screening re-runs)."""
    from macaronic.evolve.config import step_spec

    out = set()
    for s in steps:
        name, opts = step_spec(s)
        if name == "router_refit":
            out.add("router")
        elif name == "harness_edit":
            f = opts.get("file", "")
            if f.startswith("roles/"):
                out.add(f"prompt:{Path(f).stem}")
            elif f == "decoding.json" and set(opts.get("merge", {})) == {"roles"}:
                out |= {f"decoding:{r}" for r in opts["merge"]["roles"]}
            elif f == "router.json" or f.startswith("route/"):
                out.add("router")
            else:
                out.add("all")
        elif name in ("rft", "failure_data", "grpo", "data_engine"):
            roles = opts.get("roles") or ([opts["role"]] if opts.get("role") else [])
            out |= {f"adapter:{r}" for r in roles} if roles else {"all"}
        elif name == "adopt" and isinstance(opts.get("step"), (str, dict)):  # what the adopted step touched
            inner = opts["step"]
            out |= set(components_of((json.dumps(inner) if isinstance(inner, dict) else inner,)))
        else:
            out.add("all")
    return tuple(sorted(out))
