"""`macaronic eval` as its own process: per-task JSONL as tasks finish, resume after SIGKILL
with nothing lost or repeated, then the report with exactly the published fields."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter

from macaronic.commands.eval import main as eval_main

REPORT_KEYS = {"contract", "pair", "parent", "suites", "strata", "decision", "failed_rules", "cost"}


def eval_cmd(pair, contract, out, *extra):
    return [sys.executable, "-m", "macaronic.cli", "eval", "--pair", str(pair), "--contract", str(contract),
            "--json", str(out), "--quiet", "--audit", str(out.parent / "audit.jsonl"), *extra]


def lines(path):
    return path.read_text().splitlines() if path.exists() else []


def test_eval_resumes_after_sigkill(contract_file, pair_file, tmp_path):
    out = tmp_path / "report.json"
    tasks = tmp_path / "report.json.tasks.jsonl"
    proc = subprocess.Popen(eval_cmd(pair_file, contract_file, out), stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, start_new_session=True)
    deadline = time.monotonic() + 240
    while len(lines(tasks)) < 2 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL, proc.stderr.read().decode()[-2000:]
    before = [json.loads(l) for l in lines(tasks) if l.endswith("}")]
    assert len(before) >= 2 and not out.exists()

    # The rerun may be any process: here, this one (the killed one was a real subprocess).
    assert eval_main(eval_cmd(pair_file, contract_file, out)[4:]) == 0
    rows = [json.loads(l) for l in lines(tasks)]
    keys = Counter((r["suite"], r["task"], r["sample"]) for r in rows)
    assert len(rows) == 3 * 2 + 3 + 2  # agent: 3 tasks x k=2; mixed: 3; humaneval: 2
    assert max(keys.values()) == 1  # nothing evaluated twice
    assert rows[: len(before)] == before  # nothing lost: the rows written before the kill stay
    report = json.loads(out.read_text())
    assert set(report) == REPORT_KEYS
    assert report["decision"] == "reference" and report["pair"]["id"] == rows[0]["pair"]
    assert {k: v["n"] for k, v in report["suites"].items()} == {"agent": 3, "mixed": 3, "humaneval": 2}
    assert report["cost"]["tokens"] == sum(r["tokens"] for r in rows)

    # A third run has nothing left to do and writes the same report.
    assert eval_main(eval_cmd(pair_file, contract_file, out)[4:]) == 0 and len(lines(tasks)) == len(rows)
    assert json.loads(out.read_text()) == report


def test_torn_last_line_is_cut_on_reopen(tmp_path):
    from macaronic.contract.evaluate import ResultLog

    p = tmp_path / "t.jsonl"
    row = {"pair": "p", "suite": "s", "task": "t0", "sample": 0, "score": 1.0, "contract_sha256": "c"}
    p.write_text(json.dumps(row) + "\n" + '{"pair": "p", "suite": "s", "ta')
    log = ResultLog(p, "c")
    assert len(log.rows) == 1
    assert log.add({**row, "task": "t1"}) and not log.add(row)
    log.close()
    assert [json.loads(l)["task"] for l in lines(p)] == ["t0", "t1"]
