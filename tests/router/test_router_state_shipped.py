"""The hand-written routing data, the band table, deterministic state files, the binding check,
and the state shipped with the specialists."""

import json
import os
import subprocess
import sys
from collections import Counter
from dataclasses import replace

import numpy as np
import pytest

from macaronic.router.bands import BandTable, sign_test_p
from macaronic.router.conversation import request_text
from macaronic.router.data import load_routing_data
from macaronic.router.handwritten import load_handwritten, load_intents, parse, parse_intents
from macaronic.router.shipped import SHIPPED_DIR
from macaronic.router.state import RouterState, StateMismatch


def test_handwritten_data_has_600_turns_split_by_writer():
    data = load_handwritten()
    assert len(data) >= 600
    split_of = {}
    for e in data:
        assert split_of.setdefault(e["writer"], e["split"]) == e["split"]  # a writer lives in one split
        assert e["label"] in ("chat", "agent", "coding", "genui")
    for split in ("train", "dev", "test"):
        part = [e for e in data if e["split"] == split]
        assert set(Counter(e["label"] for e in part)) == {"chat", "agent", "coding", "genui"}
        assert {"hand", "injection", "multiturn"} <= {e["kind"] for e in part}
    ids = {e["id"] for e in data}
    assert all(e["twin"] in ids for e in data if e["kind"] == "injection")


def test_handwritten_test_turns_are_not_in_any_training_data():
    from macaronic.router.data import router_fit_data

    test = {request_text(e["messages"]) for e in load_handwritten("test")}
    train, dev = router_fit_data()  # what the shipped states are fitted on, the hand-written turns' twins too
    seen = {request_text(e["messages"]) for e in train + dev + load_routing_data("train") + load_routing_data("dev")}
    assert not test & seen
    assert not any(e["writer"] in {t["writer"] for t in load_handwritten("test")} for e in train + dev if "writer" in e)


def test_every_single_hand_written_train_turn_has_one_injected_twin_with_its_label():
    from macaronic.router.data import HAND_TWIN, hand_twins, router_fit_data
    from macaronic.router.families import INJECTIONS, MORE_INJECTIONS

    hand = load_handwritten("train")
    twins = hand_twins(hand)
    plain = {e["id"]: e for e in hand if e["kind"] == "hand"}
    assert len(twins) == len(plain) > 400 and len({t["id"] for t in twins}) == len(twins)
    for t in twins:
        e = plain[t["twin"]]
        assert t["id"] == e["id"] + HAND_TWIN and t["kind"] == "injection" and t["split"] == "train"
        assert t["label"] == e["label"] and t["writer"] == e["writer"]
        text, clean = t["messages"][-1]["content"], e["messages"][-1]["content"]
        assert clean in text and text != clean
        extra = text.replace(clean, "", 1).strip()
        assert any(extra == p.format(target=r) for p in INJECTIONS + MORE_INJECTIONS
                   for r in ("chat", "agent", "coding", "genui") if r != e["label"])
    assert hand_twins(hand) == twins  # seeded
    train, dev = router_fit_data()
    assert sum(e["id"].endswith(HAND_TWIN) for e in train) == len(twins)
    assert not any(e["id"].endswith(HAND_TWIN) for e in dev)


def test_handwritten_parser_reports_every_error_at_once():
    text = "@writer w1 train | x\nchat| fine\nbogus| no\nagent inj| no separator\n@writer w2 nowhere | y\n"
    with pytest.raises(ValueError) as e:
        parse(text)
    msg = str(e.value)
    assert ":3:" in msg and ":4:" in msg and ":5:" in msg


def test_handwritten_intents_cover_every_turn_with_40_routes_trained_on_train_writers():
    intents = load_intents()
    data = load_handwritten()
    assert set(intents) == {e["id"] for e in data}
    for e in data:
        assert intents[e["id"]].split(".")[0] == e["label"]
        if e["kind"] == "injection":
            assert intents[e["id"]] == intents[e["twin"]]
    routes = set(intents.values())
    assert len(routes) == 40
    trained = {intents[e["id"]] for e in load_handwritten("train") if e["kind"] == "hand"}
    assert trained == routes  # every route has plain train turns
    tested = {intents[e["id"]] for e in load_handwritten("test")}
    assert len(tested) >= 35


def test_handwritten_intents_parser_reports_every_error_at_once():
    examples = parse("@writer w1 train | x\nchat| a\nagent| b\ngenui| c\n")
    text = "chat\nw1/0 fact; w1/1 cal.add\nw1/9 x\nagent\nw1/1 cal.add; oops\n"
    with pytest.raises(ValueError) as e:
        parse_intents(text, examples)
    msg = str(e.value)
    assert "w1/1 is a agent turn, listed under chat" in msg and "no hand-written turn w1/9" in msg
    assert "'oops'" in msg and "no intent for w1/2" in msg


def test_sign_test():
    assert sign_test_p(0, 0) == 1.0
    assert sign_test_p(5, 0) == pytest.approx(1 / 32)
    assert sign_test_p(3, 3) > 0.5


def test_band_table_defers_only_to_an_option_dev_shows_better():
    rng = np.random.default_rng(0)
    conf = rng.uniform(0.3, 1.0, 400)
    keep = rng.uniform(size=400) < conf  # a calibrated primary
    worse = keep & (rng.uniform(size=400) < 0.5)  # never right where the primary is wrong
    better_low = np.where(conf < 0.6, True, keep)  # right on every low-confidence turn
    table = BandTable.fit("head", conf, {"keep": keep, "default": np.zeros(400, bool),
                                         "worse": worse, "better": better_low})
    chosen = dict(zip(map(tuple, zip(table.edges[:-1], table.edges[1:])), table.decide((table.edges[:-1] + table.edges[1:]) / 2)))
    assert "worse" not in chosen.values() and "default" not in chosen.values()
    assert chosen[(0.0, 0.5)] == "better" and chosen[(0.5, 0.6)] == "better"
    assert all(v == "keep" for (lo, _), v in chosen.items() if lo >= 0.6)


def test_state_files_are_the_same_bytes_each_save(fitted, tmp_path):
    a, b = fitted.save(tmp_path / "a"), fitted.save(tmp_path / "b")
    assert a == b == fitted.state.id
    for f in sorted((tmp_path / "a").iterdir()):
        assert f.read_bytes() == (tmp_path / "b" / f.name).read_bytes(), f.name


def test_a_state_bound_to_another_base_is_refused(fitted, tmp_path):
    from macaronic.router import Router

    assert fitted.state.mismatches(fitted.backbone) == []
    other = replace(fitted.state, binding={**fitted.state.binding, "base": "0" * 64})
    other.save(tmp_path / "s")
    with pytest.raises(StateMismatch, match="fitted on base 0000"):
        Router.load(tmp_path / "s", fitted.backbone, fitted.bundle)
    moved = replace(fitted.state, binding={**fitted.state.binding, "adapters": {"chat": "f" * 64}})
    assert any("adapter 'chat'" in m for m in moved.mismatches(fitted.backbone))
    moved.save(tmp_path / "m")
    # Head, probe and embedding read the bare base: other adapters do not invalidate them ...
    Router.load(tmp_path / "m", fitted.backbone, fitted.bundle, replace(fitted.config, policy="probe"))
    # ... but a config that routes through the adapter-derived Arrow prototypes is refused.
    with pytest.raises(StateMismatch, match="adapter 'chat'"):
        Router.load(tmp_path / "m", fitted.backbone, fitted.bundle, replace(fitted.config, policy="arrow"))


def test_the_shipped_state_is_small_complete_and_bound():
    state = RouterState.load(SHIPPED_DIR)
    assert state.head is not None and state.bands is not None and state.probe is not None
    assert state.bands.primary == "head"
    assert sum(f.stat().st_size for f in SHIPPED_DIR.iterdir()) < 2 << 20
    b = state.binding
    assert len(b["base"]) == 64 and set(b["adapters"]) == {"chat", "agent", "coding", "genui"}
    from macaronic.engine.adapters import dir_sha256
    from macaronic.router.shipped import shipped_dir

    for name, adapter_id in b["adapters"].items():
        assert dir_sha256(SHIPPED_DIR.parent / name) == adapter_id
    # the default base's state is bound to the specialists it ships with (chat, agent and genui carry
    # adapters; coding answers as the bare base)
    qwen = shipped_dir("qwen2.5-coder-0.5b")
    bound = RouterState.load(qwen).binding["adapters"]
    assert set(bound) == {"chat", "agent", "genui"}
    for name, adapter_id in bound.items():
        assert dir_sha256(qwen.parent / name) == adapter_id, f"refit: macaronic route fit --base qwen2.5-coder-0.5b --adapters-only"
    from macaronic.router.data import data_hash, router_fit_data

    assert b["data"] == data_hash(*router_fit_data())  # refit after changing the routing data
    prov = json.loads((SHIPPED_DIR / "provenance.json").read_text())
    assert prov["state_id"] == state.id


def test_serving_a_tiny_model_with_the_shipped_state_is_refused():
    from macaronic.harness import load_bundle
    from macaronic.router.shipped import router_for
    from macaronic.testing import tiny_llm

    llm = tiny_llm()
    try:
        with pytest.raises(StateMismatch, match="does not match this backbone.*macaronic route fit"):
            router_for(llm, load_bundle(), None, None)
        router = router_for(llm, load_bundle(), "prompted", None)  # needs no fitted state
        assert router.config.policy == "prompted"
    finally:
        llm.close()


ENV = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}


def test_route_classify_refuses_a_mismatched_state_with_the_reason():
    p = subprocess.run([sys.executable, "-m", "macaronic.cli", "route", "classify", "--tiny"],
                       input='{"messages": [{"role": "user", "content": "hi"}]}\n',
                       capture_output=True, text=True, timeout=300, env=ENV)
    assert p.returncode == 2 and "does not match this backbone" in p.stderr, p.stderr[-2000:]


def test_route_classify_routes_from_the_shipped_state_on_the_real_base():
    turns = [("Who are you?", "chat"), ("remind me to call mum at 6", "agent"),
             ("why does my python say IndentationError", "coding")]
    lines = "".join(json.dumps({"messages": [{"role": "user", "content": t}]}) + "\n" for t, _ in turns)
    p = subprocess.run([sys.executable, "-m", "macaronic.cli", "route", "classify"], input=lines,
                       capture_output=True, text=True, timeout=600, env=ENV)
    assert p.returncode == 0, p.stderr[-2000:]
    out = [json.loads(l) for l in p.stdout.splitlines()]
    assert [o["role"] for o in out] == [label for _, label in turns]
    assert all(o["policy"] in ("head", "probe", "embedding", "arrow") for o in out)


def test_hand_scaling_datasets_keep_the_writer_split():
    from macaronic.router.bench import scaling_dataset

    for n in (40, 400):
        adapters, train, dev, test = scaling_dataset(n, data="hand")
        assert len(adapters) == n == len({e["label"] for e in train})
        writers = [{e["writer"] for e in part} for part in (train, dev, test)]
        assert not (writers[0] & writers[2]) and not (writers[1] & writers[2])
        assert {e["label"] for e in test} <= {a.name for a in adapters}
    modded = [e for e in test if e["id"].endswith("@lab")]
    assert modded and all(request_text(e["messages"]).endswith("(It's for my research lab.)") for e in modded)
    assert all(e["label"].endswith(".lab") for e in modded)
    with pytest.raises(ValueError, match="4, 40 or 400"):
        scaling_dataset(10, data="hand")


def test_refitting_only_the_adapter_parts_keeps_the_bare_base_parts_byte_for_byte(splits, tmp_path):
    """`route fit --adapters-only`: after a specialist changes, only the Arrow prototypes (from its
    weights), their temperature and the band table are refitted; the same adapters give the same state."""
    from macaronic.router import Router
    from macaronic.router.data import data_hash
    from macaronic.router.shipped import refit_adapter_parts
    from macaronic.testing.router_fakes import ROLE_KEYWORDS, FakeBackbone

    data = (splits["train"], splits["dev"])
    fitted = Router.fit(FakeBackbone(), *data, data_hash=data_hash(*data))
    fitted.save(tmp_path / "s")
    same = refit_adapter_parts(FakeBackbone(), tmp_path / "s", fitted.bundle, data=data)
    assert same.state.id == fitted.state.id
    moved = {**ROLE_KEYWORDS, "genui": ("table", "layout", "button", "slider", "panel", "dashboard", "toggle")}
    changed = refit_adapter_parts(FakeBackbone(keywords=moved), tmp_path / "s", fitted.bundle, data=data)
    changed.save(tmp_path / "c")
    for name in ("embedding.npz", "probe.npz", "head.npz"):
        assert (tmp_path / "c" / name).read_bytes() == (tmp_path / "s" / name).read_bytes(), name
    k = changed.state.arrow.routes.index("genui")
    assert not np.allclose(changed.state.arrow.prototypes[k], fitted.state.arrow.prototypes[k])
    assert np.array_equal(changed.state.arrow.center, fitted.state.arrow.center)
    with pytest.raises(ValueError, match="routing data changed"):
        refit_adapter_parts(FakeBackbone(), tmp_path / "s", fitted.bundle, data=(splits["train"][1:], splits["dev"]))
