"""Serving: the per-turn MoL harness (`mol.MoL`) and the OpenAI-compatible HTTP layer (`app`).

    harness.py   route -> answer -> summary for one turn; HTTP-free (the evaluator calls it too)
    views.py     what each adapter sees: the prompt layout, own views, summaries folded in
    backends.py  the local engine behind one small interface
    remote.py    the same interface over a remote OpenAI-compatible multi-LoRA engine
    store.py     SQLite: Responses API state and which adapter produced each assistant message
    store_check.py  is a store file whole (header, -wal frames, integrity, schema, row checksums)
    store_cli.py    `macaronic store check|backup`
    metrics.py   Prometheus text exposition
    api.py       OpenAI request schemas and response/SSE builders
    app.py       FastAPI app and web chat
    build.py     `macaronic serve`: command line, assembly (router fitted in the background), uvicorn
"""
