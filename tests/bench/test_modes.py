"""`macaronic bench modes`: the training commands, the zero-step conversion, the default rule."""

from __future__ import annotations

import json

from macaronic.bench import modes
from macaronic.bench.modes import RULES, Rule, choose_default, convert, markdown, train_cmd


def test_every_rule_trains_from_the_shipped_adapter_at_the_same_fraction(tmp_path):
    ship = json.loads((modes.shipped_dir("agent") / "macaronic.json").read_text())["training"]["config"]
    cmds = {r.tag: train_cmd("agent", r, tmp_path / r.tag, 0.1) for r in RULES}
    assert set(cmds) == {"full", "turn", "upper4", "upper8", "upper15"}
    for tag, cmd in cmds.items():
        arg = lambda k: cmd[cmd.index(k) + 1]  # noqa: E731
        assert arg("--steps") == str(round(ship["steps"] * 0.1)) and arg("--rank") == str(ship["rank"])
        assert arg("--init-adapter") == str(modes.shipped_dir("agent"))
        assert arg("--mode") == ("upper" if tag.startswith("upper") else tag)
        assert ("--top-k" in cmd) == tag.startswith("upper")
    assert cmds["upper8"][cmds["upper8"].index("--top-k") + 1] == "8"


def test_zero_step_conversion_keeps_the_top_layers(tmp_path):
    from macaronic.engine.adapters import read_adapter
    from macaronic.engine.config import ModelArgs

    out = tmp_path / "genui"
    convert("genui", Rule("upper-4", "upper", 4), out, n_layers=30)
    meta = json.loads((out / "macaronic.json").read_text())
    assert (meta["mode"], meta["top_k"]) == ("upper", 4)
    cfg = json.loads((out / "adapter_config.json").read_text())
    assert cfg["layers_to_transform"] == [26, 27, 28, 29] and "alora_invocation_tokens" not in cfg
    args = ModelArgs()  # the default base's shapes (SmolLM2-135M: 30 layers)
    info, _ = read_adapter(out, args, load_tensors=False)
    assert (info.mode, info.top_k, info.layers) == ("upper", 4, (26, 27, 28, 29))


def _q(deltas: dict) -> dict:
    return {"rules": {n: {"mixed": {"score": 0.5, "delta_vs_best": d, "delta_ci95": ci, "ci95": [0.3, 0.7], "n": 18}}
                      for n, (d, ci) in deltas.items()}, "best": {"mixed": "full"}}


def _cost(ttft: dict) -> dict:
    return {"rows": [{"rule": n, "history_tokens": 4096, "ttft_ms": t, "bytes_per_token": 46080, "prompt_tokens": 4110,
                      "reused_tokens": 0, "upper_tokens": 0, "prefill_tokens": 10} for n, t in ttft.items()]}


def test_the_default_is_the_cheapest_rule_within_the_best_ones_interval():
    q = _q({"full": (0.0, [0.0, 0.0]), "turn/cached": (-0.2, [-0.4, -0.05]), "upper-8": (-0.1, [-0.3, 0.1])})
    cost = _cost({"full": 9000, "turn/cached": 300, "upper-8": 2500})
    d = choose_default(q, cost)
    assert d["rule"] == "upper-8" and sorted(d["eligible"]) == ["full", "upper-8"]
    q = _q({"full": (0.0, [0.0, 0.0]), "turn/cached": (-0.1, [-0.3, 0.0])})
    assert choose_default(q, cost)["rule"] == "turn/cached"  # an interval that reaches zero is within
    q["rules"]["turn/cached"]["mixed"]["n"] = 11  # still being scored: not eligible until every task is in
    assert choose_default(q, cost)["rule"] == "full"


def test_the_table_has_one_row_per_rule_measured():
    doc = {"switch_cost": _cost({"full": 9000, "turn/cached": 300}),
           "quality": _q({"full": (0.0, [0.0, 0.0]), "turn/cached": (-0.1, [-0.3, 0.0])})}
    lines = markdown(doc).splitlines()
    assert len(lines) == 4 and lines[2].startswith("| full |") and "9,000" in lines[2]
    assert "0.500, n 18 (-0.100 [-0.300, +0.000])" in lines[3] and "(best)" in lines[2]


def test_the_dev_diagnostic_is_a_column_outside_the_default_rule(tmp_path):
    q = _q({"full": (0.0, [0.0, 0.0]), "turn/cached": (-0.1, [-0.3, 0.0])})
    q["dev"] = {"rules": {"full": {"agent": {"score": 0.2, "delta_vs_best": -0.3, "delta_ci95": [-0.5, -0.1],
                                             "ci95": [0.0, 0.4], "n": 12}},
                          "turn/cached": {"agent": {"score": 0.5, "delta_vs_best": 0.0, "delta_ci95": [0.0, 0.0],
                                                    "ci95": [0.2, 0.8], "n": 12}}}, "best": {"agent": "turn/cached"}}
    cost = _cost({"full": 9000, "turn/cached": 300})
    # full is below the best on dev, but the rule reads the test suites only: both stay eligible
    assert sorted(choose_default(q, cost)["eligible"]) == ["full", "turn/cached"]
    lines = markdown({"switch_cost": cost, "quality": q}).splitlines()
    assert "agent on the dev split (diagnostic)" in lines[0]
    assert "0.200, n 12 (-0.300 [-0.500, -0.100])" in lines[2] and "0.500, n 12 (best)" in lines[3]
    modes.plot({"switch_cost": cost, "quality": q}, tmp_path / "p.png")
    assert (tmp_path / "p.png").stat().st_size > 0


def test_eval_commands_answer_the_dev_split_into_its_own_task_log(tmp_path):
    rule = next(r for r in RULES if r.name == "turn/base")
    for role in ("chat", "agent", "coding", "genui"):  # the pair manifest hashes the adapter set
        convert(role, rule, tmp_path / rule.tag / role)
    cmds = modes.eval_cmds(rule, tmp_path, modes.ROOT / "contracts/macaronic-core-v4.yaml", 4, "head")
    assert [out.name for _, out in cmds] == ["turn-base.mixed.json", "turn-base.agent.json", "turn-base.agent-dev.json"]
    arg = lambda cmd, k: cmd[cmd.index(k) + 1]  # noqa: E731
    assert [arg(c, "--tasks").rsplit("/", 1)[1] for c, _ in cmds] == ["turn-base.tasks.jsonl"] * 2 + ["turn-base.dev.tasks.jsonl"]
    assert "--split" not in cmds[0][0] and arg(cmds[2][0], "--split") == "dev"
    assert all(arg(c, "--history") == "base" for c, _ in cmds)
