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
