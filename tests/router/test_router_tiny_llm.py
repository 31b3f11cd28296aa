"""End to end on a real tiny random model (macaronic.testing.tiny_llm) and the CLI."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from macaronic.router import Backbone, Router
from macaronic.router.bench import BenchConfig, bench_policies, markdown_table
from macaronic.router.data import load_routing_data


@pytest.fixture(scope="module")
def llm():
    from macaronic.testing import tiny_llm

    m = tiny_llm()
    yield m
    m.close()


@pytest.fixture(scope="module")
def tiny_router(llm):
    train = load_routing_data("train")[::4]  # a quarter keeps the test fast; still every role
    dev = load_routing_data("dev")[::4]
    return Router.fit(llm, train, dev)


def test_tiny_llm_is_a_backbone(llm):
    assert isinstance(llm, Backbone)


@pytest.mark.parametrize("policy", ["prompted", "embedding", "probe", "arrow", "cascade"])
def test_every_policy_end_to_end(tiny_router, policy):
    convo = [{"role": "user", "content": "Show me the weather in Oslo as a card."}]
    d = tiny_router.route(convo, policy=policy)
    assert d.role in ("chat", "agent", "coding", "genui")
    assert np.isclose(sum(d.probs.values()), 1.0) and 0 <= d.confidence <= 1


def test_arrow_reads_real_adapter_weights(tiny_router):
    arrow = tiny_router.state.arrow
    assert (arrow.counts > 0).all() and np.allclose(np.linalg.norm(arrow.prototypes[:, 0], axis=-1), 1, atol=1e-4)


def test_save_load_on_tiny(tmp_path, llm, tiny_router):
    sid = tiny_router.save(tmp_path)
    again = Router.load(tmp_path, llm)
    assert again.state.id == sid
    convo = [{"role": "user", "content": "Remind me to call mom at 6pm."}]
    assert again.route(convo, policy="probe").probs == pytest.approx(tiny_router.route(convo, policy="probe").probs)


def test_bench_policies_quick_runs(llm):
    import macaronic.router.bench as bench

    # A tiny slice of the data keeps this a smoke test of the wiring, not a measurement.
    data = bench.bench_data(quick=True)
    data = {k: (v[:: 10] if isinstance(v, list) else {s: rows[:: 6] for s, rows in v.items()})
            for k, v in data.items()}
    report = bench_policies(llm, config=BenchConfig(quick=True, latency_samples=2, prompted_samples=4), data=data)
    assert set(report["sets"]) == {"template", "hand"}
    for rows in report["sets"].values():
        assert set(rows) == {"prompted", "embedding", "probe", "head", "arrow", "cascade", "probe-template"}
        for m in rows.values():
            for key in ("accuracy", "macro_f1", "ece", "abstain_rate", "paraphrase_consistency", "bands",
                        "worst_group_accuracy", "injection_flip_rate", "switch_rate", "p50_ms", "p95_ms"):
                assert key in m
    assert markdown_table(report).startswith("| set | policy |")
    tools = report["tools_attached"]
    assert set(tools) == {"assistant", "unrelated"} and "| tools | turns |" in markdown_table(report)
    assert all(m["n"] == len([e for e in data["held_out"]["hand"] if e["kind"] != "tool_result"]) for m in tools.values())


def test_tools_attached_decides_like_the_server_the_rule_first_then_the_router(tiny_router):
    """A turn that names what an attached tool is about goes to the agent by the rule, whatever the
    head says; one that names none is the router's; the label stays the turn's own."""
    from macaronic.router.bench import tools_attached

    turns = [{"id": "a", "label": "agent", "kind": "hand", "messages": [{"role": "user", "content": "Set a reminder for 5pm."}]},
             {"id": "b", "label": "chat", "kind": "hand", "messages": [{"role": "user", "content": "Tell me a joke about cats."}]}]
    got = tools_attached(tiny_router, turns, tiny_router.bundle)
    assert got["assistant"]["rule_rate"] == 0.5 and got["assistant"]["accuracy_agent"] == 1.0
    assert got["unrelated"]["rule_rate"] == 0.0
    routed = tiny_router.route(turns[1]["messages"]).role
    assert got["unrelated"]["accuracy_other"] == got["assistant"]["accuracy_other"] == float(routed == "chat")


def test_classify_cli_round_trip(tmp_path, tiny_router):
    tiny_router.save(tmp_path / "state")  # tiny_llm() is deterministic: the state fits the child's model
    lines = [{"messages": [{"role": "user", "content": "Write a regex for emails"}]},
             {"messages": [{"role": "user", "content": "x"},
                           {"role": "assistant", "content": "", "specialist": "genui", "tool_calls": [{"id": "a"}]},
                           {"role": "tool", "tool_call_id": "a", "content": "{}"}]}]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    out = subprocess.run([sys.executable, "-m", "macaronic.cli", "route", "classify", "--tiny", "--policy", "probe",
                          "--state", str(tmp_path / "state")],
                         input="\n".join(json.dumps(x) for x in lines) + "\n", capture_output=True, text=True,
                         timeout=120, env=env)
    assert out.returncode == 0, out.stderr
    rows = [json.loads(l) for l in out.stdout.splitlines()]
    assert len(rows) == 2
    assert {"role", "confidence", "probs", "policy", "ms"} <= set(rows[0]) and rows[0]["policy"] == "probe"
    assert rows[1]["role"] == "genui" and rows[1]["policy"] == "sticky"


def test_head_at_an_early_layer_reads_that_layer_and_keeps_it_when_saved(tmp_path, llm, tiny_router):
    """head_depth: the head is fitted and scored on the residual entering that layer (one early-exit
    engine forward per view group), the layer is part of the saved state; a final-layer head's
    saved meta carries no layer (so states saved before layers existed keep their ids)."""
    from dataclasses import replace

    from macaronic.router.config import RouterConfig
    from macaronic.router.features import head_features

    assert tiny_router.state.head.layer == 2  # the bundle's head_depth 0.5 of the tiny model's 3 layers
    assert "layer" not in replace(tiny_router.state.head, layer=None).meta()
    train, dev = load_routing_data("train")[::8], load_routing_data("dev")[::8]
    cfg = replace(RouterConfig(), head_views=("chatmean", "chatlast"), head_depth=0.4)  # layer 1 of 3
    r = Router.fit(llm, train, dev, config=cfg)
    assert r.state.head.layer == 1 and r.state.head.meta()["layer"] == 1
    text = "Show me the weather in Oslo as a card."
    early = head_features(llm, [text], ("chatmean", "chatlast"), layer=1)
    assert not np.allclose(early, head_features(llm, [text], ("chatmean", "chatlast")))
    assert np.allclose(r.head_embed([text]), early, atol=1e-5)
    r.save(tmp_path)
    again = Router.load(tmp_path, llm)
    assert again.state.head.layer == 1 and again.state.id == r.state.id
    convo = [{"role": "user", "content": text}]
    assert again.route(convo, policy="head").probs == pytest.approx(r.route(convo, policy="head").probs)
    assert RouterConfig(head_depth=0.5).head_layer(30) == 15 and RouterConfig(head_depth=1.0).head_layer(30) is None
    assert RouterConfig(head_depth=0.5).head_layer(0) is None  # no layer access: the final state
    for bad in (0, 1.5, "half"):
        with pytest.raises(ValueError, match="head_depth"):
            RouterConfig.from_dict({"head_depth": bad})


def test_a_two_stage_head_answers_from_the_embeddings_when_sure_and_reads_its_layer_otherwise(tmp_path, llm, tiny_router):
    """fast_layer 0: a first stage of the head on the token embeddings (layer 0's views are a
    lookup, no forward). Its answer stands at its exit confidence or more; below it the text goes
    on to the head's own layer. The exit confidence is chosen on dev, the stage is saved with the
    state, and a state without one keeps its id."""
    from dataclasses import replace

    import torch

    from macaronic.router.config import RouterConfig
    from macaronic.router.features import chat_ids, head_features
    from macaronic.router.head import HeadPolicy
    from macaronic.router.state import RouterState

    text = "Show me the weather in Oslo as a card."
    ids = chat_ids(llm, text)
    mean, last = llm.hidden_views([ids], layer=0)
    emb = llm.base.model.embed[torch.tensor(ids)].float()
    assert torch.equal(mean[0], emb.mean(0)) and torch.equal(last[0], emb[-1])
    assert all(torch.equal(a, b) for a, b in zip(llm.hidden_views_direct([ids], layer=0), (mean, last)))

    train, dev = load_routing_data("train")[::8], load_routing_data("dev")[::8]
    cfg = replace(RouterConfig(), head_views=("chatmean", "chatlast"), head_depth=0.7, fast_layer=0)
    r = Router.fit(llm, train, dev, config=cfg)
    texts = [e["messages"][-1]["content"] for e in dev]
    fast = HeadPolicy.fit(head_features(llm, texts, fast_views := ("chatmean", "chatlast"), layer=0),
                          [e["label"] for e in dev], np.zeros((0, 2 * llm.args.dim), np.float32), [], fast_views, layer=0)
    state = replace(r.state, fast=replace(fast, exit_above=0.0))  # every text exits at the fast stage
    convo = [{"role": "user", "content": text}]
    everything = Router(llm, r.bundle, state, cfg)
    want = fast.predict(head_features(llm, [text], fast_views, layer=0))[0][0]
    got = everything.route(convo, policy="head").probs
    assert [got[k] for k in fast.routes] == pytest.approx(want.tolist())
    assert +everything.stages == {"fast": 1}
    nothing = Router(llm, r.bundle, replace(state, fast=replace(fast, exit_above=1.01)), cfg)
    one_stage = Router(llm, r.bundle, replace(r.state, fast=None), cfg)
    assert nothing.route(convo, policy="head").probs == pytest.approx(one_stage.route(convo, policy="head").probs)
    assert +nothing.stages == {"head": 1}
    # saved and loaded with the state; absent, the state id is what it was
    saved = RouterState(head=r.state.head, fast=replace(fast, exit_above=0.95))
    saved.save(tmp_path)
    again = RouterState.load(tmp_path)
    assert again.fast.exit_above == 0.95 and again.fast.layer == 0 and again.id == saved.id
    assert RouterState(head=r.state.head).id != saved.id and "exit_above" not in r.state.head.meta()
    assert r.state.fast is None or (r.state.fast.layer == 0 and r.state.fast.exit_above is not None)
    with pytest.raises(ValueError, match="fast_layer"):
        RouterConfig.from_dict({"fast_layer": -1})


def test_the_exit_confidence_is_the_lowest_that_loses_no_dev_turn():
    from macaronic.router.head import exit_threshold

    routes = ("a", "b")
    labels = ["a", "a", "b", "b"]
    fast = np.array([[0.99, 0.01], [0.92, 0.08], [0.85, 0.15], [0.2, 0.8]])  # third turn wrong at 0.85
    deep = np.array([[0.9, 0.1], [0.9, 0.1], [0.1, 0.9], [0.1, 0.9]])  # all right
    assert exit_threshold(fast, deep, routes, routes, labels) == 0.9
    assert exit_threshold(fast, deep, routes, routes, labels, grid=(0.8, 0.85)) is None
    assert exit_threshold(np.zeros((0, 2)), np.zeros((0, 2)), routes, routes, []) is None


def test_the_template_opening_is_computed_once_and_the_views_stay_the_same(llm):
    """head_prefix: the chat template's fixed opening (system prompt, user header) is the same for
    every request; its K/V and the sum of its states are kept, and a request runs only its own
    tokens. The views equal the whole-sequence ones within float noise; a sequence that does not
    start with the opening runs whole; a head read that way says so in its saved meta."""
    from dataclasses import replace

    from macaronic.router.features import chat_ids, head_features, template_prefix

    opening = template_prefix(llm)
    texts = ["Show me the weather in Oslo as a card.", "Write a Python function that adds two numbers."]
    ids = [chat_ids(llm, t) for t in texts]
    assert opening and all(x[:len(opening)] == opening for x in ids)
    assert llm.tokenizer.decode(opening).rstrip().endswith("user")
    for layer in (1, 2, None):
        whole = llm.hidden_views(ids, layer=layer)
        cut = llm.hidden_views(ids, layer=layer, prefix=opening)
        for a, b in zip(whole, cut):
            assert (a - b).abs().max() <= 1e-4 * a.abs().max()
    other = [llm.tokenizer.encode("no template here", add_special_tokens=False)]
    assert all((a - b).abs().max() == 0 for a, b in zip(llm.hidden_views(other, layer=2),
                                                       llm.hidden_views(other, layer=2, prefix=opening)))
    together = head_features(llm, texts, ("mean", "chatmean", "chatlast"), together=True, layer=2, prefix=True)
    plain = head_features(llm, texts, ("mean", "chatmean", "chatlast"), layer=2)
    assert np.abs(together - plain).max() <= 1e-4 * np.abs(plain).max()
    from macaronic.router.head import HeadPolicy

    h = HeadPolicy(("a",), ("chatmean",), np.zeros(1), np.ones(1), np.zeros((1, 1)), np.zeros(1))
    assert "prefix" not in h.meta() and replace(h, prefix=True).meta()["prefix"] is True
