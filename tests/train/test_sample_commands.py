"""The sampling stages (`macaronic train sample-chat`, `sample-coding`) run end to end through their
`main` on the small base: the shared part (commands/sampling.py: the common flags, the bare base
loaded and closed) under each stage's own flags, sampler and report."""

from __future__ import annotations

import json

import pytest

from macaronic.engine.bases import SMALL_BASE


def test_sample_chat_writes_rows_and_resumes(tmp_path, capsys):
    from macaronic.commands import train_sample_chat
    from macaronic.train.chat_rs import read

    out = tmp_path / "rs.jsonl"
    argv = ["--out", str(out), "--prompts", "2", "--k", "1", "--max-tokens", "8", "--base", SMALL_BASE, "--quiet"]
    assert train_sample_chat.main(argv) == 0
    rows = read(out)
    assert len(rows) == 2 and all(r["base"] == SMALL_BASE and len(r["samples"]) == 1 for r in rows)
    assert "sample-chat: 2 new prompts (0 already done)" in capsys.readouterr().err
    assert train_sample_chat.main(argv) == 0  # nothing left: the base is not loaded, the file stays
    assert read(out) == rows and "sample-chat: 0 new prompts (2 already done)" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        train_sample_chat.main(["--k", "0", "--out", str(out)])


def test_sample_coding_samples_the_generated_problems(tmp_path, capsys):
    from macaronic.commands import train_sample_coding
    from macaronic.train.rft import progress_path

    out = tmp_path / "rft.jsonl"
    assert train_sample_coding.main(["--out", str(out), "--problems", "2", "--k", "1", "--max-tokens", "8",
                                     "--window", "2", "--base", SMALL_BASE, "--no-progress"]) == 0
    progress = [json.loads(x) for x in progress_path(out).read_text().splitlines()]
    assert len(progress) == 2  # one row per problem, kept or not
    err = capsys.readouterr().err
    assert "replies kept from 2 problems" in err and f"-> {out}" in err


def test_sample_chat_on_policy_samples_a_chat_adapter_as_served(tmp_path, capsys):
    """`--adapter DIR`: the adapter answers (its rows name its id) in its served layout; the rows go
    to a file of their own, and anything but a chat adapter is refused before the base loads."""
    from macaronic.commands import train_sample_chat
    from macaronic.engine.adapters import dir_sha256
    from macaronic.engine.llm import shipped_adapters_dir
    from macaronic.train.chat_rs import read

    chat = shipped_adapters_dir(SMALL_BASE) / "chat"
    out = tmp_path / "onpolicy.jsonl"
    argv = ["--adapter", str(chat), "--out", str(out), "--prompts", "2", "--k", "1", "--max-tokens", "8",
            "--base", SMALL_BASE, "--quiet"]
    assert train_sample_chat.main(argv) == 0
    rows = read(out)
    assert len(rows) == 2 and all(r["adapter"] == dir_sha256(chat) for r in rows)
    bare = tmp_path / "bare.jsonl"
    assert train_sample_chat.main(["--out", str(bare), *argv[4:]]) == 0
    assert all("adapter" not in r for r in read(bare))
    # the adapter answered: its greedy replies differ from the bare base's on these prompts
    texts = lambda rs: [r.get("reply") or r.get("greedy") for r in rs]  # noqa: E731
    assert texts(rows) != texts(read(bare))
    for wrong in (shipped_adapters_dir(SMALL_BASE) / "agent", tmp_path):
        with pytest.raises(SystemExit):
            train_sample_chat.main(["--adapter", str(wrong), *argv[2:]])
    assert "sample-chat samples a chat adapter" in capsys.readouterr().err
