"""llama.cpp's server as the exact-switch peer: our turn adapters converted to its Activated LoRA GGUF,
and its server keeping the history's cache across an aLoRA switch (plain LoRA clears it).

The converter and the server are llama.cpp's own, from the pinned llama-cpp-python source
(`macaronic.llamacpp`): the first test downloads that source from the package index, the second
builds llama-server from it (minutes, once per MACARONIC_HOME). Both are `long` (CI's own step)."""

from __future__ import annotations

import json

import pytest
import torch

from macaronic.bench import alora_peer


def test_the_table_names_every_variant_and_the_ratios():
    r = {"base": "smollm2-135m-instruct", "gguf": "x.gguf", "threads": 2, "reps": 3, "llamacpp": "0.3.36",
         "rows": [{"history_tokens": 512, "ours_ms": 20.0, "ours_prefill": 14, "alora_ms": 30.0, "alora_prompt_ms": 25.0,
                   "alora_prefill": 14, "plain_ms": 300.0, "plain_prefill": 526, "alora_over_ours": 1.5,
                   "plain_over_ours": 15.0}]}
    text = "\n".join(alora_peer.markdown(r))
    assert "| 512 | 20.0 | 14 | 30.0 | 25.0 | 14 | 300.0 | 526 | 1.5x | 15.0x |" in text
    assert "llama.cpp aLoRA" in text and "plain LoRA" in text


@pytest.mark.long
def test_a_turn_adapter_converts_to_an_activated_lora_at_the_user_header(tmp_path):
    import gguf
    from safetensors.torch import load_file

    from macaronic import llamacpp
    from macaronic.engine.base import load_base, resolve_base
    from macaronic.engine.llm import load_tokenizer, user_marker_ids
    from macaronic.testing import make_random_adapter

    b = load_base("smollm2-135m-instruct")
    inv = user_marker_ids(load_tokenizer(b.path))
    peft = make_random_adapter(tmp_path / "a", b.args, rank=4, seed=1, mode="turn", scale=0.05)
    out = llamacpp.convert_adapter(peft, resolve_base("smollm2-135m-instruct"), tmp_path / "a.gguf",
                                   invocation_tokens=inv)
    r = gguf.GGUFReader(str(out))
    assert r.fields["adapter.type"].contents() == "lora"
    assert r.fields["adapter.alora.invocation_tokens"].contents() == inv
    tensors = {t.name: t for t in r.tensors}
    assert len(tensors) == b.args.n_layers * 7 * 2
    # an unpermuted projection keeps its values: PEFT's lora_A of layer 3's down_proj
    ours = load_file(str(peft / "adapter_model.safetensors"))
    key = next(k for k in ours if ".layers.3.mlp.down_proj.lora_A" in k)
    theirs = torch.from_numpy(tensors["blk.3.ffn_down.weight.lora_a"].data.copy()).reshape(ours[key].shape)
    assert torch.equal(theirs, ours[key].float())
    plain = llamacpp.convert_adapter(peft, resolve_base("smollm2-135m-instruct"), tmp_path / "p.gguf",
                                     invocation_tokens=[])
    assert "adapter.alora.invocation_tokens" not in gguf.GGUFReader(str(plain)).fields
    assert json.loads((peft / "adapter_config.json").read_text()).get("alora_invocation_tokens") is None  # untouched


@pytest.mark.long
def test_llama_server_keeps_the_history_across_an_alora_switch_and_plain_lora_does_not(tmp_path):
    from macaronic import llamacpp
    from macaronic.bench.suite import conversation
    from macaronic.engine.base import base_gguf, load_base, resolve_base
    from macaronic.engine.llm import load_tokenizer, user_marker_ids
    from macaronic.testing import make_random_adapter

    binary = llamacpp.build()
    b = load_base("smollm2-135m-instruct")
    tok = load_tokenizer(b.path)
    inv = user_marker_ids(tok)
    hf = resolve_base("smollm2-135m-instruct")
    loras = []
    for n, mark in (("a", inv), ("b", inv), ("a", []), ("b", [])):
        peft = make_random_adapter(tmp_path / n, b.args, rank=4, seed=ord(n), mode="turn", scale=0.05)
        loras.append(llamacpp.convert_adapter(peft, hf, tmp_path / f"{n}-{len(mark)}.gguf", invocation_tokens=mark))
    msgs, nxt = conversation(tok, 300)
    def ids(m, **kw):
        return tok.encode(tok.apply_chat_template(m, tokenize=False, **kw), add_special_tokens=False)

    hist, prompt = ids(msgs), ids(msgs + nxt, add_generation_prompt=True)
    assert prompt[:len(hist)] == hist
    with llamacpp.Server(base_gguf("smollm2-135m-instruct"), loras, threads=2, ctx=2048, binary=binary,
                         log=tmp_path / "server.log") as srv:
        srv.complete(hist, 0)
        switched = srv.complete(prompt, 1)["timings"]["prompt_n"]
        srv.erase()
        srv.complete(hist, 2)
        cleared = srv.complete(prompt, 3)["timings"]["prompt_n"]
        with pytest.raises(llamacpp.LlamaCppError):
            srv._post("/completion", {"prompt": prompt, "n_predict": 1,
                                      "lora": [{"id": 0, "scale": 1.0}, {"id": 1, "scale": 1.0}]})
        assert srv.complete(prompt, 1)["timings"]["prompt_n"] >= 1  # one bad request hurt nothing
    # aLoRA: only the new turn (from its user header) is computed again; plain LoRA: everything
    assert switched <= len(prompt) - len(hist) + 1, (switched, len(prompt), len(hist))
    assert cleared == len(prompt), (cleared, len(prompt))
