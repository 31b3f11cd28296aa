"""Data engines: procedural generators with verifiers that write the specialists' training data.

An engine samples a world or an intent, plans the gold answer from what it knows (the world's
state, the request's values), renders one of many phrasings, and keeps an example only when its
verifiers pass. Engines never emit a contract family or instance, nor an external-suite item
(`tests/datagen` proves it). Knows nothing about models or training: it returns
`macaronic.train.examples.Example`s.

    macaronic.datagen.agent.examples(n, seed) -> list[Example]
"""
