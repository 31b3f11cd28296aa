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
            srv.post("/completion", {"prompt": prompt, "n_predict": 1,
                                      "lora": [{"id": 0, "scale": 1.0}, {"id": 1, "scale": 1.0}]})
        assert srv.complete(prompt, 1)["timings"]["prompt_n"] >= 1  # one bad request hurt nothing
    # aLoRA: only the new turn (from its user header) is computed again; plain LoRA: everything
    assert switched <= len(prompt) - len(hist) + 1, (switched, len(prompt), len(hist))
    assert cleared == len(prompt), (cleared, len(prompt))


def test_the_agreement_table_lists_each_precision():
    from macaronic.bench import llamacpp_agreement

    r = {"base": "qwen2.5-coder-0.5b", "gguf": "q.gguf", "prompts": 2, "tokens": 64, "threads": 2, "llamacpp": "0.3.36",
         "rows": {"fp32": {"identical": 1, "first_differences": [17], "identical_fa_off": 2, "first_differences_fa_off": []},
                  "int4": {"identical": 0, "first_differences": [2, 4], "identical_fa_off": 0,
                           "first_differences_fa_off": [2, 5]},
                  "llama.cpp -fa off": {"identical": 1, "first_differences": [30]}}}
    text = "\n".join(llamacpp_agreement.markdown(r))
    assert "| fp32 | 1 / 2 | 2 / 2 | 17 |" in text and "| int4 | 0 / 2 | 0 / 2 | 2, 4 |" in text
    assert "| llama.cpp -fa off | 1 / 2 |  | 30 |" in text


def test_agreement_counts_identical_replies_and_where_the_others_part():
    from macaronic.bench import llamacpp_agreement

    ours = [[1, 2, 3], [1, 2], [5, 6, 7]]
    row = llamacpp_agreement._compare(ours, {"default": [[1, 2, 3], [1, 2, 9], [5, 0, 7]], "fa-off": ours})
    assert row == {"identical": 1, "first_differences": [2, 1], "parted": [1, 2], "identical_fa_off": 3,
                   "first_differences_fa_off": [], "parted_fa_off": []}


@pytest.mark.long
def test_the_small_base_decodes_what_llama_cpp_decodes_from_its_q4_1_file(tmp_path):
    """SmolLM2's GGUF is Q4_1, which int4 repacks exactly and gguf reads as stored: on two coding
    prompts all three of our precisions decode llama.cpp's greedy tokens (16 of 16 on this project's
    machines; llama.cpp rounds activations to 8 bits in its dot products, so the test asks for the
    first 8, where a wrong weight or layout parts at once)."""
    from macaronic.bench import llamacpp_agreement

    r = llamacpp_agreement.run("smollm2-135m-instruct", tmp_path, prompts=2, tokens=16)
    assert {name: all(f >= 8 for f in x["first_differences"]) for name, x in r["rows"].items()} == {
        "fp32": True, "int4": True, "gguf": True, "llama.cpp -fa off": True}, r["rows"]
