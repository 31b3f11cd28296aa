"""The constrained-decoding bench section on a tiny model: every figure is measured (not None),
grammar work is actually counted, and the table renders."""

from __future__ import annotations

from macaronic.bench.structured import markdown, structured_cost


def test_structured_cost_measures_every_cell(tiny_dirs):
    r = structured_cost(tiny_dirs["llama"], tokens=6, reps=1)
    for k in (1, 16):
        assert r[f"free_{k}"]["tok_s"] > 0 and r[f"free_{k}"]["mask_us_per_token"] is None
        for name in ("json_schema", "tools_required"):
            assert r[f"{name}_{k}"]["tok_s"] > 0 and r[f"{name}_{k}"]["mask_us_per_token"] > 0
    assert r["ttft_cold_grammar_ms"] > 0 and r["ttft_cached_grammar_ms"] > 0 and r["genui_compile_ms"] > 0
    assert r["mask_engines_us_per_token"]["xgrammar_16"] > 0
    table = "\n".join(markdown(r))
    assert "Constrained decoding cost" in table and "| 16 |" in table
