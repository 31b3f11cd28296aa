"""The grammar constraint applied by the real engine: every sampled output parses and fits the contract."""

from __future__ import annotations

import json

from macaronic.engine.sampling import SamplingParams
from macaronic.genui.grammar import GrammarBudget, GrammarConstraint
from macaronic.genui.validate import schema_errors
from macaronic.testing import tiny_llm


def test_engine_decodes_valid_contract_json_under_the_grammar(tmp_path):
    llm = tiny_llm(n_adapters=4, workdir=tmp_path)
    try:
        grammar = GrammarConstraint(llm.tokenizer, llm.args.vocab_size, budget=GrammarBudget.from_name("tiny"),
                                    stop_token_ids=list(llm.engine.default_stop_ids))
        ids = llm.encode_chat([{"role": "user", "content": "show a card"}])
        outs = []
        for seed in range(3):
            h = llm.submit(ids, "genui", SamplingParams(max_tokens=1500, temperature=1.0, seed=seed),
                           logits_processor=grammar.processor())
            text, last = h.result()
            assert last.finish_reason == "stop", (last.finish_reason, last.error, text[-200:])
            obj = json.loads(text)
            assert set(obj) == {"text_response", "a2ui"}
            assert schema_errors(obj) == [], schema_errors(obj)
            outs.append(text)
        unconstrained, _ = llm.submit(ids, "genui", SamplingParams(max_tokens=200, temperature=1.0, seed=0)).result()
        try:
            json.loads(unconstrained)
            parsed = True
        except ValueError:
            parsed = False
        assert not parsed  # the random model alone does not write JSON: the grammar did
        assert len(set(outs)) > 1
    finally:
        llm.close()
