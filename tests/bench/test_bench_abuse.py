"""The load-and-abuse section is wired into `macaronic bench` and renders its own block."""

from __future__ import annotations

from macaronic.bench import abuse, sections as cli


def test_the_section_is_listed_and_renders_ratios():
    assert "load-and-abuse" in cli.SECTIONS
    assert any(b[0] == "abuse" for b in cli.OWN_BLOCKS)
    row = {"requests": 4, "errors": 0, "attack_requests": 3, "ttft_p50_ms": 100.0, "ttft_p99_ms": 200.0,
           "gap_p99_ms": 50.0, "ttft_p50_x": 1.0, "ttft_p99_x": 1.0, "gap_p99_x": 1.0}
    r = {"base": "b", "context": 8192, "long_prompt_tokens": 7592, "victim_requests": 4, "victim_tokens": 24,
         "closed_499": 2.0, "phases": [{**row, "phase": p} for p in ("baseline", *abuse.ATTACKS, "baseline again")]}
    text = "\n".join(abuse.markdown(r))
    for p in abuse.ATTACKS:
        assert f"| {p} |" in text
    assert "7,592 tokens" in text
