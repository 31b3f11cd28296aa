"""The serving and routing benchmarks run end to end on a tiny model and fill every field (no timing asserted)."""

from __future__ import annotations

import json

import pytest

from macaronic.bench import routing, sections, serving
from macaronic.commands import bench as bench_command

MACHINE = {"cpu": "x", "cores": 2, "memory_gb": 1, "memory_bandwidth_gbs": 1, "torch": "t", "torch_threads": 2}


@pytest.mark.long  # over 15 s on 2 cores: the long CI step keeps the default suite under 15 minutes
def test_serving_variants_fill_every_field_and_render(tiny_dirs, tmp_path):
    variants = [("default", [], {}, 2), ("budget 8", [], {"MACARONIC_PREFILL_CHUNK_BUSY": "8"}, 2)]
    sv = serving.serving_variants(variants, streams=4, tokens=4, server_args=["--base", str(tiny_dirs["llama"])])
    assert [v["label"] for v in sv["variants"]] == ["default", "budget 8"]
    for v in sv["variants"]:
        assert v["models"] == ["macaronic"] and len(v["rss_mb"]) == 3 and len(v["per_round"]) == 2
        for k in ("ttft_p50_ms", "ttft_p99_ms", "gap_p50_ms", "gap_p99_ms", "gap_max_ms", "chunks_per_s", "tok_s"):
            assert v[k] is not None and v[k] >= 0, k
        assert v["ttft_p99_ms"] >= v["ttft_p50_ms"] and v["rss_peak_mb"] >= v["rss_start_mb"] > 0
        assert all(r["tokens"] >= r["chunks"] > 0 for r in v["per_round"])
    r = {"command": "macaronic bench --only serve", "seconds": 1.0, "quick": True, "router": None, "serve": sv,
         "machine": MACHINE, "base": {"id": "b", "params": 1e6}}
    text = sections.own_markdown(json.loads(json.dumps(r)), "serve")
    assert "Serving under 4 concurrent streams" in text and "RSS plateau (default)" in text and "| budget 8 | 2 |" in text
    doc = tmp_path / "B.md"
    doc.write_text("# B\n\n<!-- bench:start -->\nengine figures\n<!-- bench:end -->\n")
    sections.write_markdown(doc, r)  # an --only serve run rewrites its own block, not the engine's
    assert "engine figures" in doc.read_text() and "<!-- bench-serve:start -->" in doc.read_text()


def test_bench_refuses_an_unknown_section(tmp_path):
    with pytest.raises(SystemExit):
        bench_command.main(["--json", str(tmp_path / "x.json"), "--only", "serve,nonsense"])


@pytest.fixture(scope="module")
def tiny_routed():
    from macaronic.router import Router
    from macaronic.router.data import load_routing_data
    from macaronic.testing import tiny_llm

    llm = tiny_llm()
    router = Router.fit(llm, load_routing_data("train")[::16], load_routing_data("dev")[::16])
    yield llm, router
    llm.close()


def test_routing_cost_runs_every_variant_and_renders(tiny_routed):
    llm, router = tiny_routed
    engine_backbone = router.backbone
    r = {"threads": 1, "state": "s", "policy": router.config.policy,
         "ttft": routing.ttft(llm, router, turns=4), "stall": routing.stall(llm, router, streams=3, tokens=24, reps=1, turns=4),
         "tools_ttft": routing.tools_ttft(llm, router, turns=4)}
    assert router.backbone is engine_backbone  # the direct twin was put back
    assert r["ttft"]["turns"] == 4 and r["ttft"]["route_p50_ms"] > 0
    for v in routing.VARIANTS:
        x = r["stall"]["variants"][v]
        assert x["gaps"] > 0 and (x["routes"] > 0) == (v != "none")
    text = "\n".join(routing.markdown(json.loads(json.dumps(r))))
    assert "| direct |" in text and "| engine |" in text and "added by routing" in text
    tt = r["tools_ttft"]
    assert tt["turns"] == 4 and tt["tools"] and 0 <= tt["took"] <= tt["decided"] <= 4 and tt["added_p50_ms"] is not None
    assert "Tools attached (create_event" in text


def test_routing_through_the_mol_on_the_answers_prefill_splits_what_it_continued():
    """`mol_ttft` with a prefill head: a route the bare base answers continues the prefill the head
    read (`upper_tokens`); one whose adapter starts at the user header prefills its own turn."""
    from dataclasses import replace

    from macaronic.harness import load_bundle
    from macaronic.router import Router
    from macaronic.router.config import RouterConfig
    from macaronic.router.data import load_routing_data
    from macaronic.testing import tiny_llm

    llm = tiny_llm(n_adapters=2)  # chat and agent adapters: coding answers as the bare base
    try:
        bundle = load_bundle()
        cfg = replace(RouterConfig.from_dict(bundle.router), head_depth=0.5, head_prefill=True)
        router = Router.fit(llm, load_routing_data("train")[::16], load_routing_data("dev")[::16], bundle, cfg)
        m = routing.mol_ttft(llm, router, turns=6)
    finally:
        llm.close()
    assert m["prefill_head"] and m["turns"] == 6 == m["resumed"]["turns"] + m["not_resumed"]["turns"]
    for row in m["rows"]:
        bare = row["adapter"] is None and bundle.role(row["specialist"]).without_adapter == "base"  # no instruction
        assert row["resumed"] == (row["policy"] == "prefill" and bare), str(row)
    text = "\n".join(routing.markdown({"threads": 1, "state": "s", "policy": "cascade", "ttft": {
        "turns": 0, "prompt_tokens_p50": None, **{k: None for k in ("forced_ttft_p50_ms", "routed_ttft_p50_ms",
                                                                     "added_p50_ms", "added_p95_ms", "route_p50_ms",
                                                                     "route_p95_ms")}},
        "stall": {"streams": 0, "tokens": 0, "reps": 0, "variants": {v: {k: None for k in (
            "routes", "gap_p50_ms", "gap_p99_ms", "gap_max_ms", "route_p50_ms", "route_p95_ms")} for v in routing.VARIANTS}},
        "mol_ttft": m}))
    assert "Through the MoL" in text and "answer continued the route's prefill" in text
