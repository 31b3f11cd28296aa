"""The serving benchmark runs end to end on a tiny model and fills every field (no timing asserted)."""

from __future__ import annotations

import json

from macaronic.bench import cli, serving


def test_serving_load_fills_every_field_and_renders(tiny_dirs, tmp_path):
    sv = serving.serving_load(streams=4, tokens=4, rounds=2, server_args=["--base", str(tiny_dirs["llama"])])
    assert sv["models"] == ["macaronic"] and len(sv["rss_mb"]) == 3 and len(sv["per_round"]) == 2
    for k in ("ttft_p50_ms", "ttft_p99_ms", "gap_p50_ms", "gap_p99_ms", "gap_max_ms", "chunks_per_s"):
        assert sv[k] is not None and sv[k] >= 0, k
    assert sv["ttft_p99_ms"] >= sv["ttft_p50_ms"] and sv["rss_peak_mb"] >= sv["rss_start_mb"] > 0
    r = {"command": "macaronic bench --only serve", "seconds": 1.0, "quick": True, "router": None, "serve": sv,
         "machine": {"cpu": "x", "cores": 2, "memory_gb": 1, "memory_bandwidth_gbs": 1, "torch": "t", "torch_threads": 2},
         "base": {"id": "b", "params": 1e6}}
    text = cli.markdown(json.loads(json.dumps(r)))
    assert "Serving under 4 concurrent streams" in text and "Server RSS (MB)" in text
