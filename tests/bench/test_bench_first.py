"""The first-request section of `macaronic bench`: wired in, measured on real servers (tiny models),
rendered with first / warm side by side."""

from __future__ import annotations

import pytest

from macaronic.bench import first, sections as cli


def test_the_section_is_listed_and_renders_the_ratio():
    assert "first-request" in cli.SECTIONS
    assert any(b[0] == "first_request" for b in cli.OWN_BLOCKS)
    row = {"ready_s": 20.0, "warmup_s": 9.5, "first_ttft_ms": 300.0, "warm_ttft_ms": 200.0, "first_over_warm": 1.5}
    r = {"tokens": 8, "warm_requests": 4, "server_args": ["--base", "b"], "threads": 1,
         "rows": [{"kind": "card", "warmup": True, **row}, {"kind": "card", "warmup": False, **row, "warmup_s": None},
                  {"kind": "tools", "warmup": True, "error": "server did not start:\nout of memory"}]}
    text = "\n".join(first.markdown(r))
    assert "| card | warm-up | 20.0 | 9.5 | 300.0 | 200.0 | 1.5x |" in text
    assert "| card | `--no-warmup` | 20.0 | n/a |" in text
    assert "| tools | warm-up | did not run: out of memory |" in text


@pytest.mark.long  # over 15 s on 2 cores: the long CI step keeps the default suite under 15 minutes
def test_fresh_servers_report_first_and_warm_ttft(tiny_dirs):
    r = first.run(["--base", str(tiny_dirs["llama"]), "--router-policy", "none"], warm=1, kinds=("chat",), threads=1)
    on, off = r["rows"]
    assert "error" not in on and "error" not in off, r
    assert on["warmup"] and on["warmup_s"] > 0 and "turns" in on["warmup_steps"]
    assert not off["warmup"] and off["warmup_s"] is None
    for row in (on, off):
        assert row["first_ttft_ms"] > 0 and row["warm_ttft_ms"] > 0 and len(row["warm_ttft_all_ms"]) == 1
        assert row["first_over_warm"] == round(row["first_ttft_ms"] / row["warm_ttft_ms"], 2)
