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
    """head_layer: the head is fitted and scored on the residual entering that layer (one early-exit
    engine forward per view group), the layer is part of the saved state; a final-layer head's
    saved meta carries no layer (so states saved before layers existed keep their ids)."""
    from dataclasses import replace

    from macaronic.router.config import RouterConfig
    from macaronic.router.features import head_features

    assert "layer" not in tiny_router.state.head.meta()
    train, dev = load_routing_data("train")[::8], load_routing_data("dev")[::8]
    cfg = replace(RouterConfig(), head_views=("chatmean", "chatlast"), head_layer=1)
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
    with pytest.raises(ValueError, match="head_layer"):
        RouterConfig.from_dict({"head_layer": 0})
