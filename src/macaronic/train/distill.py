"""Rejection-sampled coding data: the bare base's own solutions to TRAIN-family coding tasks that
pass the suite's unit tests (the data of the `coding_distill` generator, `builders.build`).

    macaronic train distill --out src/macaronic/train/data/coding_distill.jsonl   (commands/train_distill.py)

Why: SFT on the suite's reference solutions (the first shipped coding adapter) memorised twelve
one-liner shapes (loss 0.002) and then wrote confident, wrong one-liners for unseen functions,
losing to the base. Training on the base's own passing code keeps its idioms and only moves
probability toward answers that pass: for each distinct train prompt, one greedy and `samples`
sampled replies, each cut at its closing fence, graded in the sandbox, passing code kept (distinct
per prompt, at most `per_prompt`). The served prompt head (`prompts.first_turn`) is used for sampling
and, at build time, for training. The generator adds the reference solution for a few prompts of
each train family the base never solved (without them the adapter lost a base idiom on dev).
Dev and test families are never read.
"""

from __future__ import annotations

import json
from pathlib import Path


DATA = Path(__file__).resolve().parent / "data" / "coding_distill.jsonl"


def train_prompts(per_family: int, seed: int = 0) -> list:
    """Up to `per_family` tasks with distinct prompts for each train family of the coding suite."""
    from macaronic.suites.coding import FAMILIES, make_task

    out = []
    for fam, (split, _) in FAMILIES.items():
        if split != "train":
            continue
        seen = set()
        for i in range(50 * per_family):
            t = make_task(fam, i, seed)
            if t.prompt not in seen:
                seen.add(t.prompt)
                out.append(t)
            if len(seen) >= per_family:
                break
    return out


def sample(llm, tasks: list, samples: int, *, temperature: float = 0.8, top_p: float = 0.95,
           max_tokens: int = 160, seed: int = 0) -> list[dict]:
    """One greedy (k=0) and `samples` sampled replies per task from the bare base, graded."""
    from macaronic.engine.sampling import SamplingParams
    from macaronic.suites.coding import extract_code, grade
    from macaronic.harness import load_bundle
    from macaronic.prompts import first_turn

    handles = []
    for j, t in enumerate(tasks):
        ids = llm.encode_chat(first_turn(load_bundle(), "coding", t.prompt))
        for k in range(samples + 1):
            sp = SamplingParams(max_tokens=max_tokens, temperature=0.0 if k == 0 else temperature, top_p=top_p,
                                seed=None if k == 0 else seed * 1_000_003 + 1000 * j + k, stop=("\n```",))
            handles.append((t, k, llm.submit(ids, None, sp)))
    recs = []
    for t, k, h in handles:
        text, last = h.result()
        if last.finish_reason == "error":
            raise RuntimeError(last.error)
        g = grade(t, text)
        recs.append({"task": t.id, "family": t.family, "prompt": t.prompt, "k": k, "passed": bool(g["passed"]),
                     "code": extract_code(text).strip()})
    return recs


def select(recs: list[dict], per_prompt: int = 3) -> list[dict]:
    """Passing, distinct code per prompt (greedy first, then in sample order), at most `per_prompt`."""
    kept, seen = [], {}
    for r in sorted(recs, key=lambda r: (r["task"], r["k"])):
        codes = seen.setdefault(r["prompt"], set())
        if r["passed"] and r["code"] and r["code"] not in codes and len(codes) < per_prompt:
            codes.add(r["code"])
            kept.append({k: r[k] for k in ("task", "family", "prompt", "k", "code")})
    return kept


def read(path: Path = DATA) -> list[dict]:
    return [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]


def write(path: Path, rows: list[dict]) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n" for r in rows))
    return path
