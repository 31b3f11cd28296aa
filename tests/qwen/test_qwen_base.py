"""Qwen2.5-Coder-0.5B-Instruct through the engine: logits against transformers on the same import,
its chat template and stop tokens, and `macaronic serve --base` with its shipped specialists."""

from __future__ import annotations

import openai
import pytest
import torch

from serve_helpers import ServerProcess

pytestmark = pytest.mark.qwen_base


def test_logits_and_greedy_text_match_transformers(qwen_dir):
    from transformers import AutoModelForCausalLM

    from macaronic.engine.llm import load_llm
    from macaronic.engine.sampling import SamplingParams

    llm = load_llm(str(qwen_dir), [])
    try:
        assert llm.base.name == "qwen2.5-coder-0.5b" and llm.args.family == "qwen2"
        assert (llm.args.n_layers, llm.args.dim, llm.args.n_heads, llm.args.n_kv_heads) == (24, 896, 14, 2)
        assert llm.args.vocab_size == 151936 and not llm.args.tie_embeddings
        ids = llm.encode_chat([{"role": "user", "content": "Write a Python function that reverses a string."}])
        hf = AutoModelForCausalLM.from_pretrained(str(qwen_dir), dtype=torch.float32).eval()
        with torch.no_grad():
            ref = hf(torch.tensor([ids])).logits[0]
        ours = llm.score(ids, None)
        diff = (ours - ref).abs().max().item()
        print(f"qwen logits: max abs difference {diff:.2e} over {len(ids)} positions")
        assert diff <= 5e-4  # the issue measured about 5e-5
        assert torch.equal(ours.argmax(-1), ref.argmax(-1))
        with torch.no_grad():
            hf_out = hf.generate(torch.tensor([ids]), max_new_tokens=12, do_sample=False)[0, len(ids):].tolist()
        del hf
        h = llm.submit(ids, None, SamplingParams(max_tokens=12))
        text, _ = h.result()
        stops = set(llm.engine.default_stop_ids)
        assert {llm.tokenizer.convert_tokens_to_ids(t) for t in ("<|im_end|>", "<|endoftext|>")} <= stops
        cut = next((i for i, t in enumerate(hf_out) if t in stops), len(hf_out))
        assert h.output_ids == hf_out[:cut] and "reverse" in text
    finally:
        llm.close()


def test_serve_with_the_base_name_answers_with_its_specialists(qwen_dir, tmp_path):
    s = ServerProcess(["--base", "qwen2.5-coder-0.5b", "--quant", "int4", "--store", str(tmp_path / "s.sqlite")],
                      timeout=600)
    try:
        c = openai.OpenAI(base_url=s.url + "/v1", api_key="x", max_retries=0, timeout=600)
        ids = {m.id for m in c.models.list().data}
        assert {"macaronic", "chat", "agent", "coding", "genui"} <= ids
        r = c.chat.completions.create(model="macaronic", messages=[{"role": "user", "content": "What is 2 + 3?"}],
                                      max_tokens=16, temperature=0)
        meta = r.model_extra["macaronic"]
        assert meta["specialist"] in {"chat", "agent", "coding", "genui"} and "5" in r.choices[0].message.content
    finally:
        s.stop()


def test_agent_training_turn_contains_the_tool_call(qwen_dir):
    """Qwen's template renders tool results as user messages: the trained turn of every agent
    episode still starts at the request, so the tool calls are inside the trained span."""
    from transformers import AutoTokenizer

    from macaronic.train.builders import build
    from macaronic.datagen.examples import encode_all

    tok = AutoTokenizer.from_pretrained(qwen_dir)
    examples = [e for e in build("agent", 64) if any(m["role"] == "tool" for m in e.messages)]
    assert examples
    enc, _ = encode_all(tok, examples, 4096)
    for e, x in zip(examples, enc):
        trained = tok.decode([i for i, l in zip(x.ids, x.labels) if l])
        assert "<tool_call>" in trained, e.source
        user = next(m["content"] for m in reversed(e.messages) if m["role"] == "user")
        assert tok.decode(list(x.ids[x.turn_start:])).startswith("<|im_start|>user\n" + user[:20])
        assert "<tool_response>\n<tool_response>" not in tok.decode(list(x.ids))
        # the call markers are spelled in ordinary tokens: the added ones have untrained rows
        assert not {tok.convert_tokens_to_ids("<tool_call>"), tok.convert_tokens_to_ids("</tool_call>")} & set(x.ids)


def test_the_added_call_marker_rows_are_untrained(qwen_dir):
    """Why the call markers are spelled out on this base (`prompts.spelled_markers`): the rows of the
    added `<tool_call>` and `</tool_call>` tokens are one vector in both the embedding and the output
    head, and close to `<|im_start|>`'s, so a LoRA over the frozen base cannot tell them apart."""
    from safetensors import safe_open
    from torch.nn.functional import cosine_similarity as cos
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(qwen_dir)
    open_, close, start = (tok.convert_tokens_to_ids(t) for t in ("<tool_call>", "</tool_call>", "<|im_start|>"))
    with safe_open(str(qwen_dir / "model.safetensors"), "pt") as f:
        for name in ("model.embed_tokens.weight", "lm_head.weight"):
            w = f.get_slice(name)
            a, b, c = (w[i:i + 1][0] for i in (open_, close, start))
            assert cos(a, b, dim=0) > 0.9999, name
            assert cos(a, c, dim=0) > 0.9, name
    from macaronic.prompts import spelled_markers

    assert set(spelled_markers(tok)) == {open_, close}


def test_qwen_routes_with_its_own_bare_base_and_no_second_model(qwen_dir):
    """The default base's shipped router state is fitted on its own states (head at layer 16 of 24,
    a first stage on the token embeddings, the template's opening computed once): loading it keeps
    one model in memory, and plain requests go where a reader would send them."""
    from macaronic.engine.llm import EngineConfig, load_default_llm
    from macaronic.router.shipped import load_shipped

    llm = load_default_llm(EngineConfig(dtype="bfloat16", quant="int4"), base="qwen2.5-coder-0.5b")
    try:
        router = load_shipped(llm)
        assert router.backbone is llm and router.state.head.layer == 16 and router.state.head.prefix
        assert router.state.fast is not None and router.state.fast.layer == 0
        turns = {"Write a Python function that returns the n-th Fibonacci number.": "coding",
                 "Make me a sign-up form with name, email and a submit button.": "genui",
                 "Book a table for two at Luigi's tomorrow at 7pm using the reservation tool.": "agent",
                 "Could you proofread this sentence: their going to the park tomorow.": "chat"}
        got = {t: router.route([{"role": "user", "content": t}]).role for t in turns}
        assert got == turns
        assert sum(router.stages.values()) == len(turns)
    finally:
        llm.close()
