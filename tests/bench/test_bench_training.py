"""The training section of `macaronic bench`: ours and transformers' Trainer + PEFT train one epoch of
the same examples (tiny model), every row measured, the ratios rendered."""

from __future__ import annotations

from macaronic.bench import sections as cli, training


def test_the_section_is_listed_and_every_recipe_trains_the_same_epoch(tiny_dirs, tmp_path):
    assert "training" in cli.SECTIONS and any(b[0] == "training" for b in cli.OWN_BLOCKS)
    r = training.run(str(tiny_dirs["llama"]), tmp_path, steps=2, batch=2, threads=1, precisions=("none", "bfloat16"))
    assert [(x["recipe"], x["precision"]) for x in r["rows"]] == [
        (k, p) for p in ("fp32", "bf16 autocast") for k in training.RECIPES]
    for row in r["rows"]:
        assert row["seconds"] > 0 and abs(row["examples_per_s"] * row["seconds"] / 4 - 1) < 0.05, row
    for p in ("fp32", "bf16 autocast"):
        hf = next(x for x in r["rows"] if x["recipe"] == "hf" and x["precision"] == p)
        assert hf["over_hf"] == 1.0
    assert r["examples"] == 4 and r["padded_over_real"] >= 1.0 and 0 < r["history_mean"] < r["tokens_mean"]
    text = "\n".join(training.markdown(r))
    assert "| fp32 | transformers + PEFT |" in text and "| bf16 autocast | ours, turn |" in text


def test_padding_counts_each_batch_at_its_longest():
    class E:
        def __init__(self, n):
            self.ids = (0,) * n

    enc = [E(3), E(5), E(2), E(2)]
    assert training.padded_tokens(enc, 2, [0, 1, 2, 3]) == 10 + 4
    assert training.padded_tokens(enc, 2, [0, 2, 1, 3]) == 6 + 10
