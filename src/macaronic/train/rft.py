"""Rejection-sampled coding data from the coding engine (`macaronic.datagen.coding`): the bare base's
own replies to generated problems, kept when the problem's tests pass (RFT).

    macaronic train sample-coding --base qwen2.5-coder-0.5b --problems N --k 4   (commands/train_sample_coding.py)

For each problem: one greedy and k-1 sampled replies from the bare base under the prompt head the
coding adapter is served with (`prompts.first_turn` on the whole bundle: with a coding adapter the
role keeps its instruction; `builders.coding_engine_examples` trains under the same head), each
graded by running the problem's tests in the sandbox. Passing replies with distinct code are kept,
greedy first, at most `per_problem`. A kept reply is the base's own text: the code in its fenced
block and, where the base wrote one, its explanation; a trailing explanation longer than three
sentences, or one the token cap cut, is trimmed to its first complete sentences (`target_reply`).

Rows are appended as each problem finishes (`OUT`), with one progress row per problem beside it
(`OUT.progress.jsonl`: family, style, replies passed); a killed run resumes where it stopped.
Knows the engine's submit API and the sandbox; knows nothing about training.
"""

from __future__ import annotations

import json
import re
import time
import zlib
from collections import defaultdict
from pathlib import Path

DATA = Path(__file__).resolve().parent / "data" / "coding_rft.jsonl"
MAX_SENTENCES = 3

_BLOCK = re.compile(r"```(?:python|py|Python)?[ \t]*\n(.*?)```", re.S)  # the grader's first block, closed
_OPEN = re.compile(r"```[\w+-]*[ \t]*\n", re.S)
_SENTENCE_END = re.compile(r"(?<=[a-z0-9)\]`'\"*][.!?])(?=\s|$)")


def _sentences_end(text: str, n: int) -> int:
    """Where the first `n` complete sentences of `text` end (0: none complete). A numbered list
    marker ("1.") does not end a sentence; a list item without a full stop is not one."""
    ends = [m.end() for m in _SENTENCE_END.finditer(text) if not re.search(r"(^|\n)\s*\d+\.$", text[:m.end()])]
    return ends[n - 1] if len(ends) >= n else (ends[-1] if ends else 0)


def _count_sentences(text: str) -> int:
    return len([m for m in _SENTENCE_END.finditer(text) if not re.search(r"(^|\n)\s*\d+\.$", text[:m.end()])])


def target_reply(text: str, finished: bool = True) -> str:
    """The reply to train on: the base's text up to the end of its first code block, then its
    explanation when it has at most `MAX_SENTENCES` sentences and no further code, else the first
    complete sentences of it (none when the cap cut the first). A reply with no closed block is
    its code in one fenced block (what the grader ran)."""
    from macaronic.suites.coding import extract_code

    m = _BLOCK.search(text)
    if m is None:
        return f"```python\n{extract_code(text).strip()}\n```"
    head, tail = text[:m.end()].strip(), text[m.end():]
    prose = tail[:_OPEN.search(tail).start()] if _OPEN.search(tail) else tail
    if finished and prose == tail and _count_sentences(tail) <= MAX_SENTENCES and (
            not tail.strip() or _sentences_end(tail, 1)):
        return (head + tail).rstrip()
    cut = _sentences_end(prose, MAX_SENTENCES)
    return (head + prose[:cut]).rstrip() if cut else head


def _fix_tail(path: Path) -> list[dict]:
    """The file's complete JSON rows; a line cut by a kill is dropped (and the file rewritten)."""
    if not path.exists():
        return []
    rows, bad = [], False
    for line in path.read_text().splitlines():
        if not line.strip():
            continue
        try:
            rows.append(json.loads(line))
        except ValueError:
            bad = True
    if bad:
        path.write_text("".join(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n" for r in rows))
    return rows


def progress_path(out: Path) -> Path:
    out = Path(out)
    return out.with_name(out.stem + ".progress.jsonl")


def resume(out: Path) -> tuple[list[dict], list[dict]]:
    """(kept rows, progress rows) of an earlier run; kept rows of a problem whose progress row
    never got written (a kill between the two writes) are dropped, so it is sampled again."""
    out = Path(out)
    done = _fix_tail(progress_path(out))
    ids = {r["id"] for r in done}
    rows = _fix_tail(out)
    if any(r["id"] not in ids for r in rows):
        rows = [r for r in rows if r["id"] in ids]
        out.write_text("".join(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n" for r in rows))
    return rows, done


def select(problem, replies: list[tuple[int, str, bool, bool]], per_problem: int) -> list[dict]:
    """Kept rows from (k, text, finished, passed), greedy first: passing, distinct code."""
    from macaronic.suites.coding import extract_code

    kept, codes = [], set()
    for j, text, finished, passed in sorted(replies):
        code = extract_code(text).strip()
        reply = target_reply(text, finished)
        same = extract_code(reply).strip() == code  # the target's code is the code that passed
        if passed and same and code and code not in codes and len(kept) < per_problem:
            codes.add(code)
            kept.append({"id": problem.id, "family": problem.family, "style": problem.style, "k": j,
                         "prompt": problem.prompt, "reply": reply})
    return kept


def sample_coding(llm, problems: list, out: Path, *, k: int = 4, per_problem: int = 2, temperature: float = 0.8,
                  top_p: float = 0.95, max_tokens: int = 384, seed: int = 0, window: int = 8, base: str = "",
                  progress: bool = True, give_up: int = 0) -> list[dict]:
    """Sample, grade and append, resuming `out`; returns every progress row (earlier runs' too).
    `give_up` > 0: a family whose first `give_up` problems had no passing reply gets no more (its
    problems are left unsampled, so a later run without it still can)."""
    from macaronic.datagen.coding import run_tests
    from macaronic.engine.sampling import SamplingParams
    from macaronic.harness import load_bundle
    from macaronic.prompts import first_turn
    from macaronic.suites.coding import extract_code

    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    _, done = resume(out)
    others = {r.get("base") for r in done} - {base, "", None}
    if base and others:  # RFT data is one base's own replies
        raise ValueError(f"{out} holds replies of {sorted(others)}, not {base}: choose another --out")
    seen = {r["id"] for r in done}
    todo = [p for p in problems if p.id not in seen]
    bundle = load_bundle()

    def submit(p):
        ids = llm.encode_chat(first_turn(bundle, "coding", p.prompt))
        handles = []
        for j in range(k):
            sp = SamplingParams(max_tokens=max_tokens, temperature=0.0 if j == 0 else temperature, top_p=top_p,
                                seed=None if j == 0 else (seed * 1_000_003 + zlib.crc32(p.id.encode()) * 31 + j) % 2**31)
            handles.append(llm.submit(ids, None, sp))
        return p, handles

    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=len(problems), initial=len(problems) - len(todo), desc="sample-coding", dynamic_ncols=True)
    tried: dict[str, list[int]] = defaultdict(lambda: [0, 0])  # family -> [problems, passing replies]
    for r in done:
        tried[r["family"]][0] += 1
        tried[r["family"]][1] += r["passed"]

    def hopeless(fam: str) -> bool:
        n, passed = tried[fam]
        return give_up > 0 and n >= give_up and not passed

    pending, nxt, t_last = [], 0, time.time()

    def refill():
        nonlocal nxt
        while len(pending) < window and nxt < len(todo):
            p = todo[nxt]
            nxt += 1
            if hopeless(p.family):
                if bar is not None:
                    bar.total -= 1
                continue
            pending.append(submit(p))

    refill()
    while pending:
        p, handles = pending.pop(0)
        refill()
        replies = []
        for j, h in enumerate(handles):
            text, last = h.result()
            if last.finish_reason == "error":
                raise RuntimeError(last.error)
            passed = run_tests(extract_code(text), p.tests) == (len(p.tests), len(p.tests))
            replies.append((j, text, last.finish_reason != "length", passed))
        kept = select(p, replies, per_problem)
        for r in kept:
            r["base"] = base
        now = time.time()
        row = {"id": p.id, "family": p.family, "style": p.style, "k": k, "passed": sum(r[3] for r in replies),
               "greedy_passed": replies[0][3], "kept": len(kept), "seconds": round(now - t_last, 2), "base": base}
        t_last = now
        if kept:
            with out.open("a") as f:
                f.write("".join(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n" for r in kept))
        with progress_path(out).open("a") as f:
            f.write(json.dumps(row, sort_keys=True) + "\n")
        done.append(row)
        tried[p.family][0] += 1
        tried[p.family][1] += row["passed"]
        if bar is not None:
            bar.update(1)
            bar.set_postfix(kept=sum(r["kept"] for r in done))
    if bar is not None:
        bar.close()
    return done


def summary(rows: list[dict], key: str = "family") -> dict[str, dict]:
    """Per family (or style): problems, replies, pass rate of replies, greedy pass rate, problems solved."""
    acc: dict[str, dict] = defaultdict(lambda: {"problems": 0, "replies": 0, "passed": 0, "greedy": 0, "solved": 0})
    for r in rows:
        a = acc[r[key]]
        a["problems"] += 1
        a["replies"] += r["k"]
        a["passed"] += r["passed"]
        a["greedy"] += bool(r["greedy_passed"])
        a["solved"] += r["passed"] > 0
    for a in acc.values():
        a["pass_rate"] = round(a["passed"] / max(1, a["replies"]), 3)
        a["greedy_rate"] = round(a["greedy"] / max(1, a["problems"]), 3)
    return dict(sorted(acc.items()))


def read(path: Path = DATA) -> list[dict]:
    return [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]
