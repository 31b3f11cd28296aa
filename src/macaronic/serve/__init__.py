"""Serving: the per-turn MoL harness (`mol.MoL`) and the OpenAI-compatible HTTP layer (`app`).

    harness.py   route -> answer -> summary for one turn; HTTP-free (the evaluator calls it too)
    views.py     what each adapter sees: the prompt layout, own views, summaries folded in
    backends.py  the local engine behind one small interface
    remote.py    the same interface over a remote OpenAI-compatible multi-LoRA engine
    store.py     SQLite: Responses API state and which adapter produced each assistant message
    store_check.py  is a store file whole (header, -wal frames, integrity, schema, row checksums)
    metrics.py   Prometheus text exposition
    api.py       OpenAI request schemas and response/SSE builders
    app.py       FastAPI app and web chat

The commands `macaronic serve` and `macaronic store` are in `macaronic.commands` (serve.py, store.py).
"""
