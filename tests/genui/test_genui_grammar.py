"""Constrained decoding: a tiny random Llama with a small offline BPE tokenizer, under the
contract grammar, always emits parseable JSON that passes the validator's schema layers."""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")
xgr = pytest.importorskip("xgrammar")

from macaronic.genui.grammar import (  # noqa: E402
    GrammarBudget, GrammarConstraint, contract_schema, generate_constrained,
)
from macaronic.genui.shared import example_files  # noqa: E402
from macaronic.genui.validate import schema_errors  # noqa: E402

SEEDS = (0, 1, 2, 3)


def corpus() -> list[str]:
    """A few hundred JSON strings shaped like the contract, to train the tokenizer on."""
    texts = [json.dumps({"text_response": "", "a2ui": json.loads(p.read_text())}) for p in example_files()]
    texts += [json.dumps({"text_response": f"item {i}", "a2ui": [{"deleteSurface": {"surfaceId": f"s{i}"}}]})
              for i in range(200)]
    return texts


@pytest.fixture(scope="module")
def tokenizer():
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(unk_token=None))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=600, special_tokens=["<eos>"], show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(corpus(), trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<eos>")


@pytest.fixture(scope="module")
def model(tokenizer):
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=len(tokenizer) + 8, hidden_size=32, intermediate_size=64,
                         num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                         max_position_embeddings=8192, eos_token_id=tokenizer.eos_token_id)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # a 32-wide model gains nothing from threads; shared CPUs lose a lot
    yield LlamaForCausalLM(config).eval()
    torch.set_num_threads(threads)


def decode(model, tokenizer, constraint, seed: int, max_new_tokens: int) -> str:
    state = {"past": None}
    prompt = torch.tensor([tokenizer.encode('{"')[:1] or [0]])

    @torch.no_grad()
    def next_logits(last):
        ids = prompt if last is None else torch.tensor([[last]])
        out = model(input_ids=ids, cache=state["past"], use_cache=True)
        state["past"] = getattr(out, "cache", None) or out.past_key_values
        return out.logits[0, -1]  # [V]

    ids = generate_constrained(next_logits, constraint, max_new_tokens,
                               generator=torch.Generator().manual_seed(seed))
    assert constraint.is_terminated(), "decoding did not finish within the token budget"
    return tokenizer.decode([i for i in ids if i != tokenizer.eos_token_id])


def test_schema_compiles_for_default_budget(tokenizer):
    constraint = GrammarConstraint(tokenizer, len(tokenizer))
    assert constraint.schema == contract_schema()
    assert not constraint.is_terminated()


def test_random_model_decodes_valid_contract_json(model, tokenizer):
    constraint = GrammarConstraint(tokenizer, model.config.vocab_size, budget=GrammarBudget.from_name("tiny"))
    lengths = []
    for seed in SEEDS:
        constraint.reset()
        text = decode(model, tokenizer, constraint, seed, max_new_tokens=3000)
        obj = json.loads(text)  # always parseable
        assert set(obj) == {"text_response", "a2ui"}
        assert schema_errors(obj) == [], text
        lengths.append(len(text))
    assert len(set(lengths)) > 1  # different seeds really sampled different outputs


def test_fork_shares_grammar_but_not_state(tokenizer):
    first = GrammarConstraint(tokenizer, len(tokenizer), budget=GrammarBudget.from_name("tiny"))
    second = first.fork()
    assert second.compiled is first.compiled
    for token in tokenizer.encode('{"text_response":"'):
        assert first.accept_token(token)
    zeros = torch.zeros(len(tokenizer))
    assert not torch.equal(torch.isfinite(first.mask_logits(zeros)), torch.isfinite(second.mask_logits(zeros)))


def test_mask_logits_blocks_disallowed_tokens(tokenizer):
    constraint = GrammarConstraint(tokenizer, len(tokenizer) + 8)
    logits = torch.zeros(len(tokenizer) + 8)
    masked = constraint.mask_logits(logits)
    allowed = torch.isfinite(masked).nonzero().flatten().tolist()
    assert allowed and len(allowed) < len(tokenizer)
    assert all(tokenizer.decode([i]).startswith("{") or tokenizer.decode([i]) == "" for i in allowed)
    assert torch.equal(logits, torch.zeros_like(logits))  # the input is left untouched
