"""Data engines: procedural generators with verifiers that write the specialists' training data.

An engine samples a world or an intent, plans the gold answer from what it knows (the world's
state, the request's values), renders one of many phrasings, and keeps an example only when its
verifiers pass. Engines never emit a contract family or instance, nor an external-suite item
(`tests/datagen` proves it). The engines know nothing about models or training: they return
`macaronic.datagen.examples.Example`s. `examples.py` is the example format shared with train/ and
its encoding into ids + the current-turn loss mask (the renderer's one chat-template call, the
engine's turn rule); it sits here, below train/, so that both layers read one definition.

    macaronic.datagen.agent.examples(n, seed) -> list[Example]
    macaronic.datagen.chat.prompts(n, seed) -> list[dict]     (targets: macaronic.train.chat_rs, best of k)
    macaronic.datagen.coding.problems(n, seed) -> list[Problem]   (targets: train/rft.py, the base's own passing replies)
"""
