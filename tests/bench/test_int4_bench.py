"""`macaronic bench --only int4` on a tiny model: every variant timed, the ratios and the memory
probe filled in, the table rendered."""

from __future__ import annotations

import pytest

from macaronic.bench import int4
from macaronic.engine import native


def test_int4_bench_fields_and_table(tiny_dirs, tmp_path):
    if native.ops() is None:
        pytest.skip("the native kernels cannot be built or run on this machine")
    k = int4.kernels(tiny_dirs["llama"], reps=1, rows=(1, 5))
    assert [r["rows"] for r in k["step"]] == [1, 5] and set(k["shapes"]) == set(int4.SHAPES)
    for s in k["step"]:
        assert s["native_ms"] > 0 and s["copy_path_ms"] > 0 and s["native_over_copy"] > 0
    st = int4.steps(tiny_dirs["llama"], tmp_path, reps=1, streams=(1, 3))
    for key in ("streams1", "streams3"):
        assert set(st[key]) == {"bf16", "int4_copy", "int4"} and st[key]["int4"]["over_int4_copy"] > 0
    mem = int4.memory(tiny_dirs["llama"], {"int4_copy": int4.MEMORY_PRECISIONS["int4_copy"],
                                           "int4": int4.MEMORY_PRECISIONS["int4"]})
    assert mem["int4"]["weights_mb"] < mem["int4_copy"]["weights_mb"]  # no bf16 copy beside the nibbles
    md = "\n".join(int4.markdown({"kernels": k, "steps": st, "memory": mem}))
    assert "| 5 |" in md and "| int4 |" in md and "| 3 | int4_copy |" in md
