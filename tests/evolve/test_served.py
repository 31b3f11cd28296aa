"""`macaronic evolve --experience` (issue 38 item 2): the loop reads served experience. A real `macaronic
serve --experience FILE` on loopback (tiny models) records turns; feedback through POST /v1/feedback
corrects a route and turns answers down; a regenerate and a tool error follow. The reading step
(`evolve.served.read`, and `macaronic evolve served`) gives the clusters, the routing rows and the
data-engine seeds; a request that is a contract dev task gives neither a seed nor a routing row."""

from __future__ import annotations

import json
import sqlite3
import sys
import time
from collections import Counter
from pathlib import Path

import httpx
import openai
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "serve"))  # serve_helpers: the real server

from serve_helpers import ServerProcess, model_args  # noqa: E402

DRAFT = """\
contract: tiny-served
version: 1
primary: [agent, mixed]
suites:
  agent: {grader: agent.state_hash@1, role: agent, per_family: 1, max_tokens: 8, max_steps: 1}
  mixed: {grader: mixed.route_answer@1, per_family: 1, max_tokens: 6}
gate: {resamples: 200}
"""
LEVEL = {"type": "function", "function": {
    "name": "set_level", "description": "Set the alarm level",
    "parameters": {"type": "object", "properties": {"level": {"type": "string", "enum": ["low", "high"]}},
                   "required": ["level"], "additionalProperties": False}}}
FORM = "show me a signup form for the pottery club newsletter"
HAIKU = "write a haiku about the tide coming in"
STORY = "tell me a story about a lighthouse keeper"


def wait_turns(path: Path, n: int, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        db = sqlite3.connect(path)
        try:
            if db.execute("SELECT COUNT(*) FROM turns").fetchone()[0] >= n:
                return
        except sqlite3.OperationalError:
            pass
        finally:
            db.close()
        time.sleep(0.05)
    raise AssertionError(f"fewer than {n} turns recorded in {path}")


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """The recorded file, the contract, what was sent, and the reading step's result."""
    from macaronic.contract import spec as cspec
    from macaronic.contract.sealed import SplitLoader
    from macaronic.evolve.config import Budget
    from macaronic.evolve.served import read
    from macaronic.testing import make_role_models

    d = tmp_path_factory.mktemp("served")
    (d / "draft.yaml").write_text(DRAFT)
    contract_path = cspec.seal(d / "draft.yaml", d / "contract.yaml")
    contract = cspec.parse(contract_path)
    trainer = SplitLoader(contract, "trainer", d / "audit.jsonl")
    dev_task = trainer.tasks("agent", "dev", per_family=1)[0]

    exp = d / "experience.sqlite"
    s = ServerProcess([*model_args(*make_role_models(d / "models")), "--router-policy", "prompted",
                       "--store", str(d / "state.sqlite"), "--experience", str(exp), "--max-tokens-limit", "256"])
    c = openai.OpenAI(base_url=s.url + "/v1", api_key="x", max_retries=0)

    def ask(text, **kw):
        return c.chat.completions.create(model="macaronic", messages=[{"role": "user", "content": text}],
                                         max_tokens=kw.pop("max_tokens", 6), **kw)

    def feedback(rid, **kw):
        r = httpx.post(s.url + "/v1/feedback", json={"response_id": rid, **kw})
        assert r.status_code == 200 and r.json()["linked"] is True, r.text

    try:
        sent = {}
        r = ask(FORM)  # routed by the router, answered down: "should have been genui"
        sent["form"] = (r.id, r.model_extra["macaronic"])
        feedback(r.id, rating="down", expected_specialist="genui", comment="I wanted a card")
        r = ask(HAIKU)  # a thumbs-down
        sent["haiku"] = (r.id, r.model_extra["macaronic"])
        feedback(r.id, rating="down")
        r = ask(dev_task.text)  # a contract dev task, corrected: no seed, no routing row
        sent["dev"] = (r.id, r.model_extra["macaronic"])
        feedback(r.id, rating="down", expected_specialist="agent" if sent["dev"][1]["specialist"] != "agent"
                 else "chat")
        r = ask(STORY)  # regenerated, then kept with a thumbs-up on the second answer
        again = ask(STORY)
        sent["story"], sent["story2"] = (r.id, r.model_extra["macaronic"]), (again.id, again.model_extra["macaronic"])
        feedback(again.id, rating="up")
        convo = [{"role": "user", "content": "set the alarm"}]
        r1 = c.chat.completions.create(model="macaronic", messages=convo, tools=[LEVEL], tool_choice="required",
                                       parallel_tool_calls=False, max_tokens=160, temperature=0)
        msg = r1.choices[0].message
        assert msg.tool_calls, r1
        sent["alarm"] = (r1.id, r1.model_extra["macaronic"])
        feedback(r1.id, expected_specialist="chat")  # a correction of a tools-forced route: no routing row
        convo += [msg.model_dump(exclude_none=True),
                  {"role": "tool", "tool_call_id": msg.tool_calls[0].id, "content": '{"error": "the alarm is offline"}'}]
        c.chat.completions.create(model="macaronic", messages=convo, tools=[LEVEL], max_tokens=6)
        wait_turns(exp, 7)
    finally:
        s.stop()
    doc = read(exp, contract, trainer, SplitLoader(contract, "check", d / "audit.jsonl"), Budget(dev_per_family=1))
    return {"file": exp, "contract": contract_path, "sent": sent, "doc": doc, "dev_task": dev_task, "dir": d}


def test_served_failures_are_clustered_beside_the_contracts(served):
    sent, doc = served["sent"], served["doc"]
    role = {k: v[1]["specialist"] for k, v in sent.items()}
    want = Counter()
    assert role["form"] != "genui"
    want["served/wrong_route:genui"] += 1
    want[f"served/down:{role['form']}"] += 1
    want[f"served/down:{role['haiku']}"] += 1
    want[f"served/down:{role['dev']}"] += 1
    want[f"served/wrong_route:{'agent' if role['dev'] != 'agent' else 'chat'}"] += 1
    want[f"served/regenerate:{role['story']}"] += 1  # the first story answer; the kept second one is no failure
    assert role["alarm"] == "agent" and sent["alarm"][1]["policy"] == "tools"
    want["served/wrong_route:chat"] += 1
    want["served/tool_error:agent"] += 1  # the tool result reported an error
    assert doc["turns"] == 7
    assert Counter(doc["clusters"]) == want
    # the operators' shape: (suite, label) -> count, role after the colon
    from macaronic.evolve.operators import _role_failures
    from macaronic.evolve.served import counter

    c = counter(doc)
    assert c[("served", "tool_error:agent")] == 1 and _role_failures(c)["agent"] >= 1


def test_a_routing_correction_becomes_a_routing_row_and_a_dev_task_does_not(served):
    sent, doc = served["sent"], served["doc"]
    rows = doc["routing"]
    assert sent["form"][1]["specialist"] != "genui"  # the seeded tiny router sends it elsewhere: a correction
    (row,) = rows  # not the dev task's, not the tools-forced one
    assert row == {"id": f"served/{sent['form'][0]}", "messages": [{"role": "user", "content": FORM}],
                   "label": "genui", "family": "served", "split": "train", "group": f"served/{sent['form'][0]}",
                   "kind": "served", "source": "served", "routed": sent["form"][1]["specialist"]}
    dropped = {x["id"]: x for x in doc["dropped"]}
    rid = f"served/{sent['dev'][0]}"
    assert dropped[rid]["overlaps"] == [f"agent/dev/{served['dev_task'].id}"]
    assert {x["what"] for x in doc["dropped"]} == {"routing", "seed"}


def test_failed_requests_become_engine_seeds_without_their_text(served):
    from macaronic.datagen.examples import Example
    from macaronic.evolve.served import INTENT, like

    sent, doc = served["sent"], served["doc"]
    by = {s["response_id"]: s for s in doc["seeds"]}
    assert set(by) == {sent[k][0] for k in ("form", "haiku", "story", "alarm")}  # not the dev task, not the kept one
    form = by[sent["form"][0]]
    assert (form["specialist"], form["engine"], form["intent"]) == ("genui", "datagen.genui", {"intent": "form"})
    assert form["labels"] == ["wrong_route:genui", f"down:{sent['form'][1]['specialist']}"]
    alarm = by[sent["alarm"][0]]  # corrected to chat: a chat seed
    assert (alarm["specialist"], alarm["engine"]) == ("chat", "datagen.chat")
    haiku = by[sent["haiku"][0]]  # no correction: a seed for the specialist that answered
    assert haiku["specialist"] == sent["haiku"][1]["specialist"] and haiku["labels"] == [f"down:{haiku['specialist']}"]
    assert haiku["intent"] == INTENT[haiku["engine"]](HAIKU.lower(), {"next": []})
    text = json.dumps(doc["seeds"])
    assert all(t not in text for t in (FORM, HAIKU, STORY, "set the alarm"))
    # "more like this": the GenUI engine's verified form cards, not the served text
    made = like(form, 3)
    assert len(made) == 3 and all(isinstance(e, Example) and e.source == "engine/genui/form/served" for e in made)
    assert all(FORM not in m["content"] for e in made for m in e.messages)
    prompts = like(alarm, 4)
    assert len(prompts) == 4 and all(p["category"] == alarm["intent"]["category"] for p in prompts)


def test_the_reading_command_writes_the_same_result(served, tmp_path):
    from macaronic.commands.evolve import main

    out = tmp_path / "served.json"
    assert main(["served", str(served["file"]), "--contract", str(served["contract"]), "--audit",
                 str(tmp_path / "audit.jsonl"), "--budget", "dev_per_family=1", "--json", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert doc["clusters"] == served["doc"]["clusters"] and doc["seeds"] == served["doc"]["seeds"]
    assert doc["routing"] == served["doc"]["routing"]
    audit = [json.loads(line) for line in (tmp_path / "audit.jsonl").read_text().splitlines()]
    assert {(a["purpose"], a["split"]) for a in audit} == {("trainer", "dev"), ("check", "test")}
    assert main(["served", str(tmp_path / "none.sqlite"), "--contract", str(served["contract"]),
                 "--json", str(out)]) == 2


def test_held_out_overlap_in_both_directions():
    from macaronic.contract.sealed import HeldOut

    h = HeldOut([("t/1", "Move my dentist appointment to Friday at 3pm please"), ("t/2", "hi")], n=8, min_words=5)
    assert h.overlap("could you move my dentist appointment to friday at 3pm please, thanks") == ["t/1"]
    assert h.overlap("dentist appointment to Friday at 3pm") == ["t/1"]  # a long enough piece of one
    assert h.overlap("Friday at 3pm") == []  # too short to say
    assert h.overlap("hi") == ["t/2"] and h.overlap("this") == []
    assert h.overlap("a b c d e f g h", "x move my dentist appointment to friday at 3pm y") == ["t/1"]


def test_seed_intents_and_engine_items_for_each_engine():
    from macaronic.datagen.coding import Problem
    from macaronic.evolve import served

    assert served.engine_of("genui") == "datagen.genui" and served.engine_of("nobody") is None  # from the registry
    turn = {"next": []}
    assert served.coding_intent("please fix my function that merges overlapping intervals", turn) == \
        {"style": "fix", "family": "merge_intervals"}
    assert served.coding_intent("zzz", turn)["family"] is None
    assert served.agent_intent("cancel my order for the lamp", turn) == {"pattern": "delete"}
    assert served.agent_intent("x", {"next": [{"kind": "tool_results", "detail": {"errors": 1}}]}) == {"pattern": "error"}
    assert served.genui_intent("a checklist for packing", turn) == {"intent": "checklist"}
    seed = {"id": "served/x", "specialist": "coding", "engine": "datagen.coding",
            "intent": {"style": "fix", "family": "merge_intervals"}}
    ps = served.like(seed, 2)
    assert all(isinstance(p, Problem) and p.family == "merge_intervals" for p in ps)
    ag = served.like({"id": "served/y", "specialist": "agent", "engine": "datagen.agent",
                      "intent": {"pattern": "lookup_answer"}}, 2)
    assert len(ag) == 2 and all(e.source.startswith("engine/agent/lookup_answer/") for e in ag)
    with pytest.raises(ValueError):
        served.like({"id": "s", "specialist": "mine", "engine": None, "intent": {}}, 1)


def test_served_seeds_make_training_examples_of_their_kind():
    """What the data_engine step trains on when a role has served failures: new verified items of
    each seed's kind (agent, GenUI), or the engine's committed verified rows of that kind (chat, coding)."""
    from macaronic.evolve.served import training_examples

    ag = training_examples([{"id": "served/a", "specialist": "agent", "engine": "datagen.agent",
                             "intent": {"pattern": "delete"}},
                            {"id": "served/b", "specialist": "agent", "engine": "datagen.agent",
                             "intent": {"pattern": "conditional"}}], "agent_engine", 5)
    assert [e["source"].split("/")[2] for e in ag] == ["delete", "conditional", "delete", "conditional", "delete"]
    assert all(e["role"] == "agent" and e["messages"][-1]["role"] == "assistant" for e in ag)
    ui = training_examples([{"id": "served/c", "specialist": "genui", "engine": "datagen.genui",
                             "intent": {"intent": "checklist"}}], "genui_engine", 3)
    assert [e["source"] for e in ui] == ["engine/genui/checklist/served"] * 3 and len({json.dumps(e) for e in ui}) == 3
    chat = training_examples([{"id": "served/d", "specialist": "chat", "engine": "datagen.chat",
                               "intent": {"category": "formats"}}], "chat_engine", 6, base="qwen2.5-coder-0.5b")
    assert [e["source"] for e in chat] == ["engine/chat/formats"] * 6 and len({json.dumps(e) for e in chat}) == 6
    code = training_examples([{"id": "served/e", "specialist": "coding", "engine": "datagen.coding",
                               "intent": {"family": "no_such_family", "style": "fix"}}], "coding_engine", 4)
    assert {e["source"].split("/")[-1] for e in code} == {"fix"}  # no family matched: the seed's style
    with pytest.raises(ValueError, match="cannot feed"):
        training_examples([{"id": "s", "specialist": "mine", "engine": None, "intent": {}}], "agent_engine", 1)


def test_a_role_with_served_seeds_gets_a_data_engine_candidate_made_like_them(tmp_path):
    from macaronic.evolve.config import Budget
    from macaronic.evolve.operators import propose
    from macaronic.harness import DEFAULT_BUNDLE
    from macaronic.pairs import PairManifest

    for r in ("agent", "genui"):
        (tmp_path / r).mkdir()
        (tmp_path / r / "adapter_config.json").write_text(json.dumps({"r": 8, "role": r}))
    parent = PairManifest.build(None, {r: str(tmp_path / r) for r in ("agent", "genui")}, DEFAULT_BUNDLE,
                                base_fp="f" * 64)
    c = Counter({("served", "down:genui"): 3, ("agent", "wrong_state"): 2})
    genui, agent = propose(parent, c, ("data_engine",), Budget(engine_examples=16), set(),
                           served_seeds={"genui": ("cd" * 8, 3)})
    assert json.loads(genui.steps[0])["data_engine"]["served"] == "cd" * 8 and "like 3 served failures" in genui.note
    assert "served" not in json.loads(agent.steps[0])["data_engine"]


def test_a_served_correction_is_proposed_as_a_router_refit_on_its_rows(tmp_path):
    from types import SimpleNamespace

    from macaronic.evolve.config import Budget
    from macaronic.evolve.operators import propose
    from macaronic.harness import DEFAULT_BUNDLE

    parent = SimpleNamespace(id="p" * 64, harness={"path": str(DEFAULT_BUNDLE)}, adapters={}, data=())
    c = Counter({("served", "wrong_route:genui"): 2})
    (cand,) = propose(parent, c, ("router_refit",), Budget(), set(), served=("ab" * 8, 2))
    assert json.loads(cand.steps[0]) == {"router_refit": {"served": "ab" * 8}}
    assert cand.components == ("router",) and "2 served corrections" in cand.note
    (plain,) = propose(parent, c, ("router_refit",), Budget(), set())
    assert plain.steps == ("router_refit",)


@pytest.mark.long  # over 15 s on 2 cores: the long CI step keeps the default suite under 15 minutes
def test_a_generation_reads_the_file_and_refits_the_router_on_its_corrections(served):
    """One generation of `macaronic evolve --experience` on a tiny pair: the served failures join the
    clusters, the router refit is proposed on the served rows and trained on them."""
    import shutil

    from macaronic.commands.evolve import main as evolve_main
    from macaronic.engine.config import ModelArgs
    from macaronic.harness import DEFAULT_BUNDLE
    from macaronic.pairs import PairManifest
    from macaronic.testing import make_random_adapter, make_tiny_model_dir

    root = served["dir"] / "loop"
    base = make_tiny_model_dir(root / "base", seed=3, max_position_embeddings=16384)
    args = ModelArgs.from_dir(base)
    ads = {r: make_random_adapter(root / "adapters" / r, args, seed=i + 1, mode="turn", role=r)
           for i, r in enumerate(["chat", "agent", "coding", "genui"])}
    shutil.copytree(DEFAULT_BUNDLE, root / "harness")
    pair = PairManifest.build(base, ads, root / "harness").save(root / "pair.json")
    work = root / "work"
    assert evolve_main(["--contract", str(served["contract"]), "--generations", "1", "--workdir", str(work),
                        "--experience", str(root / "missing.sqlite"), "--quiet"]) == 2
    assert evolve_main(["--contract", str(served["contract"]), "--generations", "1", "--workdir", str(work),
                        "--pair", str(pair), "--operators", "router_refit", "--experience", str(served["file"]),
                        "--budget", "per_family=1,dev_per_family=1,candidates=1", "--quiet"]) == 0
    g1 = work / "gen-001"
    doc = json.loads((g1 / "served.json").read_text())
    assert doc["clusters"] == served["doc"]["clusters"] and doc["routing_rows"] == 1 and "routing" not in doc
    assert FORM not in (g1 / "served.json").read_text()  # the seeds and counts, never the served text
    clusters = json.loads((g1 / "clusters.json").read_text())
    assert {k: n for k, n in clusters.items() if k.startswith("served/")} == doc["clusters"]
    (cand,) = json.loads((g1 / "candidates.json").read_text())
    sha = doc["routing_sha256"][:16]
    assert cand["operator"] == "router_refit" and json.loads(cand["steps"][0]) == {"router_refit": {"served": sha}}
    rows = [json.loads(x) for x in (work / "served" / f"routing-{sha}.jsonl").read_text().splitlines()]
    assert rows == served["doc"]["routing"]
    # the seeds a data engine can make more of, kept for the data_engine step, without served text
    seeds = [json.loads(x) for x in (work / "served" / f"seeds-{doc['seeds_sha256'][:16]}.jsonl").read_text().splitlines()]
    assert seeds == [x for x in doc["seeds"] if x["engine"]] and len(seeds) == 4
    assert FORM not in json.dumps(seeds)
    (change,) = json.loads((g1 / cand["name"] / "changes.json").read_text())["changes"]
    assert change["served_examples"] == 1 and change["refit"] is True
    trained = [json.loads(x) for x in (g1 / cand["name"] / "data" / "router-train.jsonl").read_text().splitlines()]
    assert rows[0] in trained
    # the served reading reads test texts only as the `check` purpose, never as trainer or collector
    from macaronic.contract.sealed import read_audit

    audit = read_audit(work / "audit.jsonl")
    assert any(a["purpose"] == "check" and a["split"] == "test" for a in audit)
    assert not [a for a in audit if a["purpose"] in ("collector", "trainer") and a["split"] == "test"]
