"""Adapter loading: every problem reported at once, naming the file; the registry never half-changes."""

from __future__ import annotations

import json
import shutil

import pytest

from macaronic.engine.adapters import AdapterError
from macaronic.engine.llm import load_llm
from macaronic.testing import make_random_adapter, make_tiny_model_dir


@pytest.fixture()
def llm(tiny_dirs, tmp_path):
    m = load_llm(tiny_dirs["llama"], [])
    m.add_adapter(make_random_adapter(tmp_path / "good", m.args, seed=1), "good")
    yield m
    m.close()


def snapshot(llm):
    return [(i.name, i.id) for i in llm.adapters.infos()]


def _good_copy(llm, tmp_path, name):
    d = tmp_path / name
    shutil.copytree(llm.adapters.get("good").path, d)
    return d


def test_truncated_safetensors(llm, tmp_path):
    d = _good_copy(llm, tmp_path, "trunc")
    f = d / "adapter_model.safetensors"
    f.write_bytes(f.read_bytes()[: f.stat().st_size // 2])
    before = snapshot(llm)
    with pytest.raises(AdapterError, match="adapter_model.safetensors"):
        llm.add_adapter(d)
    assert snapshot(llm) == before


def test_bad_config_json_and_missing_weights_reported_together(llm, tmp_path):
    d = _good_copy(llm, tmp_path, "broken")
    (d / "adapter_config.json").write_text("{not json")
    (d / "adapter_model.safetensors").unlink()
    before = snapshot(llm)
    with pytest.raises(AdapterError) as e:
        llm.add_adapter(d)
    msg = str(e.value)
    assert "adapter_config.json: not valid JSON" in msg and "adapter_model.safetensors: missing" in msg
    assert snapshot(llm) == before


def test_adapter_for_another_base_is_rejected_with_every_shape(llm, tmp_path):
    from macaronic.engine.config import ModelArgs

    other = ModelArgs.from_dir(make_tiny_model_dir(tmp_path / "other", hidden_size=32, intermediate_size=48))
    d = make_random_adapter(tmp_path / "foreign", other, seed=2)
    before = snapshot(llm)
    with pytest.raises(AdapterError) as e:
        llm.add_adapter(d)
    assert str(e.value).count("expected") >= 7  # all mismatched tensors listed, not just the first
    assert snapshot(llm) == before


def test_other_base_fingerprint_is_rejected(llm, tmp_path):
    d = _good_copy(llm, tmp_path, "otherfp")
    (d / "macaronic.json").write_text(json.dumps({"mode": "turn", "base_fingerprint": "0" * 64}))
    with pytest.raises(AdapterError, match="trained for base"):
        llm.add_adapter(d)


@pytest.mark.parametrize("name", ["../evil", "a/b", "..", "x" * 65, ".hidden", "a b"])
def test_unsafe_names(llm, name):
    before = snapshot(llm)
    with pytest.raises(AdapterError, match="invalid adapter name"):
        llm.add_adapter(llm.adapters.get("good").path, name)
    assert snapshot(llm) == before


def test_nan_weights_and_unknown_keys(llm, tmp_path):
    import torch
    from safetensors.torch import load_file, save_file

    d = _good_copy(llm, tmp_path, "nan")
    f = d / "adapter_model.safetensors"
    t = load_file(str(f))
    k = next(iter(t))
    t[k][0, 0] = float("nan")
    t["base_model.model.model.layers.0.self_attn.rotary.lora_A.weight"] = torch.zeros(2, 2)
    save_file(t, str(f))
    with pytest.raises(AdapterError) as e:
        llm.add_adapter(d)
    assert "NaN" in str(e.value) and "unknown target 'rotary'" in str(e.value)


def test_pickle_weights_are_refused(llm, tmp_path):
    d = _good_copy(llm, tmp_path, "pickled")
    (d / "adapter_model.safetensors").rename(d / "adapter_model.bin")
    with pytest.raises(AdapterError, match="convert it to safetensors"):
        llm.add_adapter(d)


def test_replacing_an_adapter_changes_its_id_and_output(llm, tmp_path):
    from macaronic.engine.sampling import SamplingParams

    ids = llm.encode_chat([{"role": "user", "content": "hi"}])
    sp = SamplingParams(max_tokens=8, stop_token_ids=())
    h = llm.submit(ids, "good", sp)
    h.result()
    old_id = llm.adapters.get("good").id
    llm.add_adapter(make_random_adapter(tmp_path / "v2", llm.args, seed=5), "good")
    assert llm.adapters.get("good").id != old_id
    h2 = llm.submit(ids, "good", sp)
    h2.result()
    assert h2.output_ids != h.output_ids


def test_slot_loads_skip_revalidation_but_catch_changed_files(llm, tmp_path):
    """Loading into a slot reads unchanged files in one pass, with the same tensors as a full read."""
    import os

    import torch

    from macaronic.engine.adapters import load_pairs, read_adapter

    d = _good_copy(llm, tmp_path, "fast")
    info = llm.add_adapter(d, "fast")
    full = read_adapter(d, llm.args, name="fast")[1]
    fast = load_pairs(info, llm.args)
    assert full.keys() == fast.keys()
    assert all(torch.equal(full[k][0], fast[k][0]) and torch.equal(full[k][1], fast[k][1]) for k in full)
    # a different adapter written over it: the stamp changes, the content check refuses the load
    other = make_random_adapter(tmp_path / "other", llm.args, rank=4, seed=99, mode="full")
    shutil.copy(other / "adapter_model.safetensors", d / "adapter_model.safetensors")
    os.utime(d / "adapter_model.safetensors", ns=(1, 1))
    with pytest.raises(AdapterError, match="changed on disk"):
        load_pairs(info, llm.args)
    with pytest.raises(AdapterError, match="changed on disk"):
        llm.adapters.acquire("fast")
