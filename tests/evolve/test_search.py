"""The search's pure parts: the dev verdict (paired bootstrap), stacking of disjoint positives,
the Pareto archive and parent choice, what a change reaches, failure clusters. Rows are made
here (unit tests); the loop itself runs on a tiny model in test_evolve.py."""

from __future__ import annotations

from macaronic.evolve import archive
from macaronic.evolve.failures import clusters, hints_for
from macaronic.evolve.search import Candidate, stack, verdict
from macaronic.pairs.reach import reached_suites


class Spec:
    def __init__(self, name, role, guard=None, report_only=False):
        self.name, self.role, self.guard, self.report_only, self.k, self.kind = name, role, guard, report_only, 1, name


class Contract:
    class G:
        resamples, confidence, seed = 500, 0.95, 0

    gate = G()
    suites = (Spec("chat", "chat", 0.2), Spec("coding", "coding", 0.2), Spec("mixed", None), Spec("bfcl", "agent", report_only=True))
    primary = ("chat", "coding", "mixed")

    def suite(self, name):
        return next(s for s in self.suites if s.name == name)


def rows(suite, passes):
    return [{"suite": suite, "task": f"t{i}", "sample": 0, "score": float(p), "passed": bool(p)} for i, p in enumerate(passes)]


def test_verdicts_positive_neutral_harmful():
    c = Contract()
    champ = rows("chat", [0] * 8) + rows("coding", [1] * 8) + rows("mixed", [0, 1] * 4)
    better = rows("chat", [1] * 6 + [0] * 2)
    v = verdict(_dc(c), better, champ, {"chat"}, 0.9)
    assert v["verdict"] == "positive" and v["suites"]["chat"]["delta"] == 0.75
    assert v["suites"]["coding"]["delta"] == 0 and not v["suites"]["coding"]["touched"]  # the champion's rows
    assert verdict(_dc(c), rows("chat", [0] * 8), champ, {"chat"}, 0.9)["verdict"] == "neutral"
    worse = rows("coding", [0] * 8)
    h = verdict(_dc(c), worse, champ, {"coding"}, 0.9)
    assert h["verdict"] == "harmful" and h["guard_breach"] == ["coding"]


def _dc(c):
    """The contract as a dataclass-like object `dataclasses.replace` accepts."""
    from dataclasses import dataclass, field

    @dataclass(frozen=True)
    class S:
        name: str
        role: str | None
        guard: float | None = None
        report_only: bool = False
        k: int = 1
        kind: str = ""

    @dataclass(frozen=True)
    class C:
        suites: tuple = field(default_factory=tuple)
        primary: tuple = ()
        gate: object = None

        def suite(self, name):
            return next(s for s in self.suites if s.name == name)

    return C(tuple(S(s.name, s.role, s.guard, s.report_only, 1, s.kind) for s in c.suites), c.primary, c.gate)


def test_stack_takes_disjoint_positives_from_the_champion_best_first():
    pos = lambda d: {"verdict": "positive", "pooled": {"delta": d}}  # noqa: E731
    a = Candidate("a", "prompt", "C", ("s1",), ("prompt:chat",))
    b = Candidate("b", "decoding", "C", ("s2",), ("decoding:chat",))
    c = Candidate("c", "prompt", "C", ("s3",), ("prompt:chat",))  # overlaps a
    d = Candidate("d", "router_refit", "P", ("s4",), ("router",))  # another parent: not stacked
    e = Candidate("e", "prompt", "C", ("s5",), ("prompt:coding",))
    chosen = stack([(a, pos(0.2)), (b, pos(0.1)), (c, pos(0.3)), (d, pos(0.5)), (e, {"verdict": "neutral", "pooled": {"delta": 0.4}})], "C")
    assert [x.name for x in chosen] == ["c", "b"]


def test_archive_keeps_dominated_members_and_they_can_parent():
    ms = [archive.Member("champ", {"chat": 0.5, "mixed": 0.5}, "reference", 0),
          archive.Member("dom", {"chat": 0.5, "mixed": 0.2}, "neutral", 1),
          archive.Member("side", {"chat": 0.7, "mixed": 0.1}, "neutral", 1),
          archive.Member("bad", {"chat": 0.9, "mixed": 0.0}, "harmful", 1)]
    assert {m.pair_id for m in archive.front(ms)} == {"champ", "side", "bad"}
    assert archive.summary(ms)["dominated"] == ["dom"]
    assert archive.parents(ms, "champ", {}, 2) == ["champ", "side"]  # front first; harmful never
    assert archive.parents(ms, "champ", {}, 3) == ["champ", "side", "dom"]  # dominated can parent
    # a pair the gate rejected against this champion parents after every other member
    assert archive.parents(ms, "champ", {}, 2, frozenset({"side"})) == ["champ", "dom"]
    assert archive.parents(ms, "champ", {}, 3, frozenset({"side"})) == ["champ", "dom", "side"]
    # a pair whose files are gone (a workdir restored from a checkpoint without adapter weights)
    # never parents, and still holds its place in the front
    assert archive.parents(ms, "champ", {}, 3, absent=frozenset({"side"})) == ["champ", "dom"]
    assert "side" in {m.pair_id for m in archive.front(ms)}


def test_what_a_change_reaches():
    c = _dc(Contract())
    assert reached_suites(c, ["prompt:chat"]) == {"chat", "mixed"}
    assert reached_suites(c, ["router"]) == {"mixed"}
    assert reached_suites(c, ["all"]) == {"chat", "coding", "mixed"}  # never report-only suites


def test_failure_clusters_and_hints():
    call = '<tool_call>{"name": "create_note", "arguments": {"title": "x", "body": "y"}}</tool_call>'
    fake = '<tool_call>{"name": "make_note", "arguments": {}}</tool_call>'
    rs = [{"suite": "agent", "passed": False, "detail": {"state_match": False},
           "messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": call}]},
          {"suite": "agent", "passed": False, "detail": {},
           "messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": fake}]},
          {"suite": "mixed", "passed": False, "detail": {"turns": [{"gold": "chat", "route_ok": False, "answer_ok": False}]},
           "messages": []},
          {"suite": "chat", "passed": True, "detail": {}, "messages": []}]
    c = clusters(rs)
    assert c == {("agent", "act_without_lookup"): 1, ("agent", "invented_tool"): 1, ("mixed", "wrong_route:chat"): 1}
    assert {h[0] for h in hints_for(c)} == {"agent"}


def test_a_screened_prompt_variant_gives_way_to_the_roles_next_cluster(tmp_path):
    """From the same parent, an instruction already screened (whatever its note's count) is not
    proposed again; the role's next failure cluster is."""
    import shutil
    from collections import Counter

    from macaronic.evolve import operators
    from macaronic.evolve.config import Budget
    from macaronic.harness import DEFAULT_BUNDLE
    from macaronic.pairs import PairManifest

    h = shutil.copytree(DEFAULT_BUNDLE, tmp_path / "h", ignore=shutil.ignore_patterns("__pycache__"))
    parent = PairManifest.build(None, {}, h, base_fp="f" * 64)
    found = Counter({("chat", "wrong_answer"): 5, ("chat", "too_long"): 2})
    first = operators.propose(parent, found, ("prompt",), Budget(), set())
    assert [c.note for c in first] == ["chat: wrong_answer x5"]
    tried = {operators.signature(c.parent, c.steps) for c in first}
    found[("chat", "wrong_answer")] = 7  # the count moved, the edit is the same
    again = operators.propose(parent, found, ("prompt",), Budget(), tried)
    assert [c.note for c in again] == ["chat: too_long x2"]


def test_failure_data_proposes_one_candidate_per_failing_skill(tmp_path):
    """Lookup clusters ask for lookup-then-act data, missing_facts for state-the-facts data; a
    cluster with no skill asks for none."""
    import json
    import shutil
    from collections import Counter

    from macaronic.evolve import operators
    from macaronic.evolve.config import Budget
    from macaronic.harness import DEFAULT_BUNDLE
    from macaronic.pairs import PairManifest

    h = shutil.copytree(DEFAULT_BUNDLE, tmp_path / "h", ignore=shutil.ignore_patterns("__pycache__"))
    parent = PairManifest.build(None, {"agent": str(tmp_path / "a")}, h, base_fp="f" * 64)

    def skills(found):
        return skills_of(parent, found)

    def skills_of(parent, found, harmful=frozenset()):
        cands = operators.propose(parent, Counter(found), ("failure_data",), Budget(), set(), harmful=harmful)
        return [(lambda o: o.get("skills") or o["skill"])(json.loads(c.steps[0])["failure_data"]) for c in cands]

    # two failing skills: one candidate with both skills' data first, then each alone
    assert skills({("agent", "wrong_state"): 8, ("agent", "missing_facts"): 4}) == [
        ["lookup_then_act", "state_facts"], "lookup_then_act", "state_facts"]
    assert skills({("agent", "missing_facts"): 4}) == ["state_facts"]
    assert skills({("agent", "invented_tool"): 3, ("chat", "wrong_answer"): 2}) == []
    # a parent already trained on failure data draws new episodes (a seed from its adapter), one not yet: seed 0
    (cand,) = operators.propose(parent, Counter({("agent", "missing_facts"): 4}), ("failure_data",), Budget(), set())
    assert "seed" not in json.loads(cand.steps[0])["failure_data"]
    trained = PairManifest.build(None, {"agent": str(tmp_path / "a")}, h, base_fp="f" * 64,
                                 data=(str(tmp_path / "failure-agent-state_facts.jsonl"),))
    (cand,) = operators.propose(trained, Counter({("agent", "missing_facts"): 4}), ("failure_data",), Budget(), set())
    assert json.loads(cand.steps[0])["failure_data"]["seed"] == int(trained.adapters["agent"]["id"][:6], 16) > 0
    # ... each failing skill it never learnt, alone on top (its own data file replayed), and last the
    # skills it was trained on beside the failing ones, drawn anew, in one candidate
    twice = PairManifest.build(None, {"agent": str(tmp_path / "a")}, h, base_fp="f" * 64,
                               data=(str(tmp_path / "failure-agent-fill_placeholders+state_facts.jsonl"),))
    assert operators.trained_skills(twice.data) == ["fill_placeholders", "state_facts"]
    assert skills_of(twice, {("agent", "wrong_state"): 7, ("agent", "missing_facts"): 2}) == [
        "lookup_then_act", ["fill_placeholders", "lookup_then_act", "state_facts"]]
    assert skills_of(twice, {("agent", "missing_facts"): 2}) == [["fill_placeholders", "state_facts"]]
    # several it never learnt: first those together on top, then each alone, the union last (it
    # retrains the old skills too); Budget().candidates cuts the list
    assert skills_of(twice, {("agent", "empty_lookup"): 3, ("agent", "answered_after_lookup"): 2}) == [
        ["lookup_then_act", "pick_tools", "find_person", "order_writes"],
        "lookup_then_act", "pick_tools", "find_person"]
    assert skills_of(twice, {("agent", "answered_after_lookup"): 2}) == [
        ["lookup_then_act", "pick_tools", "order_writes"], "lookup_then_act", "pick_tools", "order_writes"]
    # a skill whose data alone screened harmful from this parent is left out of the together-candidate
    extra = {"seed": int(twice.adapters["agent"]["id"][:6], 16)}
    hurt = frozenset(operators.signature(twice.id, [{"failure_data": {"role": "agent", "skill": s, "steps": Budget().rft_steps,
                                                                      **extra}}]) for s in ("lookup_then_act", "pick_tools"))
    assert skills_of(twice, {("agent", "empty_lookup"): 3, ("agent", "answered_after_lookup"): 2}, hurt)[0] == [
        "find_person", "order_writes"]
    assert skills_of(twice, {("chat", "wrong_answer"): 2}) == []
    # a step over a skill whose generator changed names the data version; one over unchanged skills
    # does not, so its signature (and what the archive says was tried) stays the same
    steps = [json.loads(c.steps[0])["failure_data"] for c in operators.propose(
        twice, Counter({("agent", "empty_lookup"): 3, ("agent", "answered_after_lookup"): 2}), ("failure_data",),
        Budget(candidates=6), set())]
    assert [s.get("data", 1) for s in steps] == [2, 1, 1, 2, 1, 2]
    assert [s.get("skills") or s["skill"] for s in steps][-1] == [
        "fill_placeholders", "lookup_then_act", "state_facts", "pick_tools", "find_person", "order_writes"]
    # GenUI cards that leave values out: cards showing every value, for the genui adapter
    both = PairManifest.build(None, {"agent": str(tmp_path / "a"), "genui": str(tmp_path / "g")}, h, base_fp="f" * 64)
    cands = operators.propose(both, Counter({("genui", "missing_content"): 4}), ("failure_data",), Budget(), set())
    assert [json.loads(c.steps[0])["failure_data"] for c in cands] == [{"role": "genui", "skill": "show_values",
                                                                       "steps": Budget().rft_steps, "data": 3}]
    assert cands[0].components == ("adapter:genui",)
    again = PairManifest.build(None, {"genui": str(tmp_path / "g")}, h, base_fp="f" * 64,
                               data=(str(tmp_path / "failure-genui-show_values.jsonl"),))
    assert operators.trained_skills(again.data, "genui") == ["show_values"] and not operators.trained_skills(again.data)
    (cand,) = operators.propose(again, Counter({("genui", "missing_content"): 4}), ("failure_data",), Budget(), set())
    assert json.loads(cand.steps[0])["failure_data"]["seed"] == int(again.adapters["genui"]["id"][:6], 16)


def test_a_copied_placeholder_is_its_own_cluster():
    """A write that carries the request's <...> placeholder instead of the looked-up value."""
    from macaronic.evolve.failures import hint, label

    def row(title):
        call = '<tool_call>{"name": "add_reminder", "arguments": {"due": "2025-01-12", "title": "%s"}}</tool_call>' % title
        return {"suite": "agent", "passed": False, "detail": {"state_match": False, "facts_missing": []},
                "messages": [{"role": "user", "content": "Add a reminder 'Boots: <status>' with my boots order's status."},
                             {"role": "assistant", "content": '<tool_call>{"name": "list_orders", "arguments": {"query": "Boots"}}</tool_call>'},
                             {"role": "tool", "content": '{"orders": [{"id": 3, "item": "Boots", "status": "placed"}]}'},
                             {"role": "assistant", "content": call}]}

    assert label(row("Boots: <status>")) == ["copied_placeholder"] and hint("agent", "copied_placeholder")
    assert label(row("Boots: lost")) == ["wrong_state"]
    # a lookup that searches for the placeholder text is not the fault: only a write carrying it is
    looked_up = row("Boots: lost")
    looked_up["messages"][1]["content"] = '<tool_call>{"name": "list_orders", "arguments": {"query": "<status>"}}</tool_call>'
    assert label(looked_up) == ["wrong_state"]


def test_a_write_after_an_empty_lookup_and_an_answer_after_a_lookup_are_their_own_clusters():
    """A write that follows a lookup which found nothing (looked in the wrong place), and a lookup
    followed by an answer where the state shows a change was asked for: each is named, has a
    hint, and asks for pick-the-tool data (the first also for find-the-person, the second also for
    lookup-then-act)."""
    from collections import Counter

    from macaronic.evolve.failures import hint, label
    from macaronic.evolve.operators import FAILURE_SKILLS

    def row(lookup, result, write=None):
        msgs = [{"role": "user", "content": "Look up Kemi Sato's phone and save a note 'Call Kemi Sato' with it."},
                {"role": "assistant", "content": '<tool_call>{"name": "%s", "arguments": {"query": "Kemi Sato"}}</tool_call>' % lookup},
                {"role": "tool", "content": result}]
        if write:
            msgs.append({"role": "assistant", "content": '<tool_call>{"name": "create_note", "arguments": '
                                                         '{"title": "Call Kemi Sato", "body": "%s"}}</tool_call>' % write})
        msgs.append({"role": "assistant", "content": "Done."})
        return {"suite": "agent", "passed": False, "detail": {"state_match": False, "facts_missing": []}, "messages": msgs}

    found = '{"contacts": [{"id": 11, "name": "Kemi Sato", "phone": "+1-555-302-1414"}]}'
    assert label(row("list_events", '{"events": [], "truncated": false}', "Kemi Sato")) == ["empty_lookup"]
    assert label(row("search_contacts", found, "kemi@lumen.example")) == ["wrong_state"]  # found it, wrote the wrong value
    assert label(row("search_contacts", found)) == ["answered_after_lookup"]
    assert label(row("search_contacts", "<tool_response>" + found + "</tool_response>")) == ["answered_after_lookup"]
    assert hint("agent", "empty_lookup") and hint("agent", "answered_after_lookup")
    skills = {s for s, labels, _ in FAILURE_SKILLS if "answered_after_lookup" in labels}
    assert skills == {"lookup_then_act", "pick_tools", "order_writes"}
    assert [s for s, labels, _ in FAILURE_SKILLS if "empty_lookup" in labels] == ["pick_tools", "find_person"]


def test_the_gate_skips_children_of_a_pair_it_already_rejected():
    """A positive child of a gate-rejected pair is not gated against the same champion (its dev
    gain is its parent's, refuted on test); the next positive is; none left: nothing is gated."""
    from macaronic.evolve.search import Candidate, gate_pick

    def cs(name, parent, delta, verdict="positive"):
        return Candidate(name, "prompt", parent, (), ("prompt:chat",), ""), {"verdict": verdict,
                                                                            "pooled": {"delta": delta}}

    screened = [cs("cand-01", "champ", 0.1), cs("cand-02", "rejected", 0.3), cs("cand-03", "champ", 0.2, "neutral")]
    assert gate_pick(screened, {"rejected"})[0].name == "cand-01"
    assert gate_pick(screened, set())[0].name == "cand-02"
    assert gate_pick(screened[1:], {"rejected"}) is None


def test_the_gate_skips_every_descendant_of_a_rejected_pair():
    """A grandchild through an archived child re-claims the refuted gain too; a pair whose line
    never passes through the rejected one stays eligible."""
    from macaronic.evolve.search import Candidate, gate_pick, refuted_line

    parent_of = {"rejected": "champ", "child": "rejected", "grandchild": "child", "other": "champ", "nephew": "other"}
    line = refuted_line({"rejected"}, parent_of)
    assert line == {"rejected", "child", "grandchild"}
    assert refuted_line(set(), parent_of) == frozenset()
    assert refuted_line({"x"}, {"a": "b", "b": "a"}) == {"x"}  # a malformed cycle ends
    screened = [(Candidate(n, "prompt", p, (), ("prompt:chat",), ""), {"verdict": "positive", "pooled": {"delta": d}})
                for n, p, d in (("c1", "grandchild", 0.4), ("c2", "nephew", 0.1))]
    assert gate_pick(screened, line)[0].name == "c2"
    assert gate_pick(screened[:1], line) is None


def test_a_gated_grandchild_names_what_it_inherits(tmp_path):
    """The gate's record of a child of an archive member lists the member's changes (marked as
    inherited, oldest first) before its own; a child of the champion inherits nothing."""
    import json

    from macaronic.evolve.loop import gen_dir, inherited_changes
    from macaronic.evolve.transfer import _change

    def member(g, name, pair, parent, changes):
        d = gen_dir(tmp_path, g) / name
        d.mkdir(parents=True)
        (d / "changes.json").write_text(json.dumps({"changes": changes, "training_config": {}}))
        return {"pair_id": pair, "parent_id": parent, "generation": g, "detail": {"candidate": {"name": name}}}

    fd = {"step": "failure_data", "role": "agent", "skill": "lookup_then_act", "train_steps": 20}
    edit = {"step": "harness_edit", "file": "roles/genui.md", "note": "prompt variant"}
    screens = [member(1, "cand-04", "p1" * 32, "c0" * 32, [fd]), member(2, "cand-03", "p2" * 32, "p1" * 32, [edit])]
    got = inherited_changes(tmp_path, screens, "p2" * 32, "c0" * 32)
    assert [c["step"] for c in got] == ["failure_data", "harness_edit"]
    assert [c["inherited_from"] for c in got] == ["p1" * 32, "p2" * 32]
    assert inherited_changes(tmp_path, screens, "c0" * 32, "c0" * 32) == []
    assert _change(got[0]) == "failure_data agent: lookup_then_act, 20 steps (inherited from `p1p1p1p1`)"


def test_a_plan_candidate_that_adopts_a_step_touches_what_that_step_touched():
    """A hand-written plan that rebuilds an archived candidate by adopting its step (generation 10 of
    run-q3) needs no components by hand: an adopt step touches the adopted step's components, in
    either spelling of the step; a step nobody knows still counts as touching everything."""
    import json

    from macaronic.evolve.operators import components_of, explicit

    fd = {"failure_data": {"role": "agent", "skills": ["find_person"], "steps": 20, "data": 2}}
    adopt = {"adopt": {"dir": "runs/w/gen-009/cand-01", "step": json.dumps(fd, sort_keys=True)}}
    assert components_of((json.dumps(adopt),)) == ("adapter:agent",)
    assert components_of((json.dumps({"adopt": {"dir": "d", "step": fd}}),)) == ("adapter:agent",)
    router = {"adopt": {"dir": "d", "step": "router_refit"}}
    assert components_of((json.dumps(router), json.dumps(adopt))) == ("adapter:agent", "router")
    assert components_of((json.dumps({"adopt": {"dir": "d"}}),)) == ("all",)
    (c,) = explicit("p" * 64, ({"operator": "failure_data", "steps": [json.dumps(adopt)]},))
    assert c.components == ("adapter:agent",)


def test_a_neutral_training_candidate_comes_back_twice_as_large_up_to_the_budget(tmp_path):
    """A dev-neutral RFT or failure-data candidate is proposed again from the same parent with twice
    its training (steps; examples too for failure data), level by level up to `escalate`; a harmful or
    positive one is not, nor one from another parent, nor one whose operator the plan leaves out."""
    import json
    import shutil
    from collections import Counter

    from macaronic.evolve import operators
    from macaronic.evolve.config import Budget
    from macaronic.harness import DEFAULT_BUNDLE
    from macaronic.pairs import PairManifest

    h = shutil.copytree(DEFAULT_BUNDLE, tmp_path / "h", ignore=shutil.ignore_patterns("__pycache__"))
    parent = PairManifest.build(None, {"agent": str(tmp_path / "a")}, h, base_fp="f" * 64)
    budget = Budget(rft_steps=12, escalate=2)
    (cand,) = operators.propose(parent, Counter({("agent", "missing_facts"): 4}), ("failure_data",), budget, set())

    def screen(c, verdict, parent_id=parent.id):
        return {"verdict": verdict, "parent_id": parent_id, "operator": c.operator, "components": list(c.components),
                "detail": {"steps": list(c.steps), "candidate": c.to_dict()}}

    def grown(screens, ops=("failure_data",)):
        tried = {operators.signature(s["parent_id"], s["detail"]["steps"]) for s in screens}
        return [c for c in operators.propose(parent, Counter(), ops, budget, tried, screens=screens)]

    (up,) = grown([screen(cand, "neutral")])
    fd = json.loads(up.steps[0])["failure_data"]
    assert (fd["steps"], fd["examples"], fd["escalation"], fd["skill"]) == (24, 48, 1, "state_facts")
    assert up.components == cand.components and up.note.startswith("escalated x2 after a neutral screen")
    (up2,) = grown([screen(cand, "neutral"), screen(up, "neutral")])  # level 1 screened too: level 2
    fd2 = json.loads(up2.steps[0])["failure_data"]
    assert (fd2["steps"], fd2["examples"], fd2["escalation"]) == (48, 96, 2)
    assert grown([screen(cand, "neutral"), screen(up, "neutral"), screen(up2, "neutral")]) == []  # the budget's end
    assert grown([screen(cand, "harmful")]) == [] and grown([screen(cand, "positive")]) == []
    assert grown([screen(cand, "neutral", parent_id="e" * 64)]) == []
    assert grown([screen(cand, "neutral")], ops=("prompt",)) == []
    # RFT grows its steps (the budget's when the step names none)
    rft = operators.Candidate("cand-01", "rft", parent.id, (json.dumps({"rft": {"roles": ["agent"], "warm": True}}),),
                              ("adapter:agent",))
    (up,) = grown([screen(rft, "neutral")], ops=("rft",))
    assert json.loads(up.steps[0])["rft"] == {"roles": ["agent"], "warm": True, "steps": 24, "escalation": 1}


def test_every_operator_kind_gets_a_slot_before_any_gets_a_second(tmp_path):
    """Instruction candidates are listed first and are many; with 3 slots they used to fill every one,
    so no training candidate was ever screened (run-r1, generations 1-2). Now the kinds take turns,
    the ones the lineage screened least first; within a kind the proposed order holds."""
    import shutil
    from collections import Counter

    from macaronic.evolve import operators
    from macaronic.evolve.config import Budget
    from macaronic.harness import DEFAULT_BUNDLE
    from macaronic.pairs import PairManifest

    h = shutil.copytree(DEFAULT_BUNDLE, tmp_path / "h", ignore=shutil.ignore_patterns("__pycache__"))
    parent = PairManifest.build(None, {"agent": str(tmp_path / "a")}, h, base_fp="f" * 64)
    found = Counter({("agent", "wrong_state"): 8, ("agent", "missing_facts"): 4, ("chat", "wrong_answer"): 5})
    ops = ("prompt", "router_refit", "failure_data")

    def kinds(screens=(), n=3):
        cands = operators.propose(parent, found, ops, Budget(candidates=n), set(), screens=screens, start=4)
        assert [c.name for c in cands] == [f"cand-{i:02d}" for i in range(4, 4 + len(cands))]
        return [c.operator for c in cands]

    assert kinds() == ["prompt", "router_refit", "failure_data"]
    assert kinds(n=5) == ["prompt", "router_refit", "failure_data", "prompt", "failure_data"]
    seen = [{"operator": op, "verdict": "neutral", "parent_id": "e" * 64} for op in ["prompt"] * 4 + ["router_refit"]]
    assert kinds(seen, n=2) == ["failure_data", "router_refit"]
    assert kinds(seen, n=4) == ["failure_data", "router_refit", "prompt", "failure_data"]
    assert operators.fair([], seen, 3) == []


def test_a_pair_whose_files_are_gone_is_not_present_to_parent(tmp_path):
    """The loop's check behind `absent`: a lineage pair (real SQLite) is present while its files match
    their ids, and not once an adapter is deleted, as in a workdir restored without weights."""
    import shutil
    from types import SimpleNamespace

    from macaronic.engine.config import ModelArgs
    from macaronic.evolve.loop import Run
    from macaronic.harness import DEFAULT_BUNDLE
    from macaronic.pairs import Lineage, PairManifest
    from macaronic.testing import make_random_adapter, make_tiny_model_dir

    base = make_tiny_model_dir(tmp_path / "base", seed=5)
    args = ModelArgs.from_dir(base)
    ads = {r: make_random_adapter(tmp_path / r, args, seed=i, mode="turn", role=r) for i, r in enumerate(["chat", "agent"])}
    m = PairManifest.build(base, ads, DEFAULT_BUNDLE)
    with Lineage(tmp_path / "lineage.sqlite") as lin:
        pid = lin.add_pair(m)
        run = SimpleNamespace(lin=lin)
        assert Run._present(run, pid)
        shutil.rmtree(tmp_path / "agent")
        assert not Run._present(run, pid)
        assert not Run._present(run, "0" * 64)  # not in this lineage


def test_a_planned_candidate_whose_parent_lost_its_files_is_not_built():
    """A generation's plan (candidates.json) written while a screened parent still had its adapters,
    resumed from a checkpoint without weights: its children of that parent are left out (unless already
    built); the champion's are kept."""
    from types import SimpleNamespace as C

    from macaronic.evolve.loop import buildable

    champ, gone, there = "c" * 64, "g" * 64, "t" * 64
    cands = [C(name="cand-01", parent=champ), C(name="cand-02", parent=gone), C(name="cand-03", parent=there),
             C(name="cand-04", parent=gone)]
    keep, lost = buildable(cands, champ, lambda pid: pid != gone, lambda c: c.name == "cand-04")
    assert [c.name for c in keep] == ["cand-01", "cand-03", "cand-04"] and [c.name for c in lost] == ["cand-02"]
    # even the champion's own files gone: its children are kept (nothing else could run)
    keep, lost = buildable(cands[:1], champ, lambda pid: False, lambda c: False)
    assert [c.name for c in keep] == ["cand-01"] and lost == []


def test_a_built_candidate_whose_weights_are_gone_counts_as_not_built(tmp_path):
    """A workdir restored from a checkpoint keeps a built candidate's pair.json, not the adapters it
    trained into its directory: built_here says it is not built (the loop builds it again instead of
    screening or gating files that are not there). Files outside the candidate's directory (a parent's
    adapter it kept) are not its to judge."""
    import shutil
    from pathlib import Path

    from macaronic.evolve.loop import built_here
    from macaronic.pairs.ids import PairManifest

    harness = Path(__file__).resolve().parents[2] / "src" / "macaronic" / "harness" / "default"
    out = tmp_path / "cand-01"
    kept = tmp_path / "shipped" / "genui"
    for d in (out / "adapters" / "chat", kept):
        d.mkdir(parents=True)
        (d / "adapter_config.json").write_text("{}")
        (d / "adapter_model.safetensors").write_bytes(b"weights")
    assert built_here(tmp_path / "cand-02") is None  # nothing there
    m = PairManifest.build("smollm2-135m-instruct", {"chat": out / "adapters" / "chat", "genui": kept}, harness,
                           base_fp="f" * 64)
    m.save(out / "pair.json")
    assert built_here(out) == m
    (kept / "adapter_model.safetensors").write_bytes(b"changed")  # not the candidate's own: still built
    assert built_here(out) == m
    shutil.rmtree(out / "adapters")  # restored without its weights
    assert built_here(out) is None
    (out / "pair.json").write_text("{not json")
    assert built_here(out) is None


def test_the_dev_diff_script_counts_changed_scores_and_transcripts(tmp_path, capsys, monkeypatch):
    """scripts/evolve_dev_diff.py: against the first pair in the file, each later pair's shared units,
    the units whose score changed and those whose transcript changed at all."""
    import json
    import runpy
    import sys
    from pathlib import Path

    def unit(pair, task, score, text):
        return json.dumps({"pair": pair * 12, "suite": "agent", "task": task, "sample": 0, "score": score,
                           "messages": [{"role": "assistant", "content": text}]})

    dev = tmp_path / "dev.jsonl"
    dev.write_text("\n".join([unit("a", "t1", 1.0, "x"), unit("a", "t2", 0.0, "y"), unit("b", "t1", 1.0, "x2"),
                              unit("b", "t2", 1.0, "y2"), unit("c", "t1", 1.0, "x")]) + "\n")
    monkeypatch.setattr(sys, "argv", ["evolve_dev_diff.py", str(dev)])
    runpy.run_path(str(Path(__file__).resolve().parents[2] / "scripts" / "evolve_dev_diff.py"), run_name="__main__")
    rows = [line.split() for line in capsys.readouterr().out.splitlines()[1:]]
    assert rows == [["b" * 12, "2", "1", "2"], ["c" * 12, "1", "0", "0"]]
