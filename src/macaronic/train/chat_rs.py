"""Rejection-sampled chat data: the bare base's own replies to the chat engine's prompts
(`macaronic.datagen.chat`) that pass every verifier (the data of the `chat_engine` generator).

    macaronic train sample-chat --base qwen2.5-coder-0.5b --prompts 3000 --k 4   (commands/train_sample_chat.py)

Why: the chat adapter must keep what the base knows and follow instructions better. Training on the
base's own replies that pass the checks moves probability toward following them without teaching
new (possibly wrong) facts. For each prompt: one greedy and k-1 sampled replies under the prompt
head the chat adapter is served with (`prompts.first_turn` on the full bundle: a pair with a chat
adapter keeps the chat instruction, `HarnessBundle.served`), each verified (`datagen.chat.verify`,
plus `complete`: not cut by the token cap); the first passing reply in sample order (greedy first)
is kept; failing that, the first that fails only mechanical kinds, repaired (`datagen.chat.repair`:
an opening or closing phrase, quotes or case added to the base's own words; the row names the kinds
in `repaired`, so they can be told apart). Identity prompts are answered from the harness's
identity text (`datagen.chat.identity_answer`), never sampled. Every prompt gets one row, kept or
not, appended as soon as its samples are graded, so a killed run resumes where it stopped (prompts
whose id or text is already in the file are skipped) and the summary covers the whole file.

On-policy rounds (`--adapter DIR`, a chat adapter): the same prompts answered by that adapter as it is
served (its role's layout under `HarnessBundle.served`: no instruction when it switches on at the
assistant header), into a file of their own (`chat_rs_<adapter id[:8]>.jsonl`); its rows carry the
adapter's id. The preference pairs of such a file are the adapter's own failed greedy reply against
its own passing or repaired one (`train.builders.chat_onpolicy_pairs`): the next round of DPO learns
from what the last round still gets wrong.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from pathlib import Path

DATA = Path(__file__).resolve().parent / "data" / "chat_rs.jsonl"


def served_role() -> str:
    """The specialist these rows train: the registry entry whose data engine is the chat engine."""
    from macaronic.specialist import BUILTIN

    return next(s.name for s in BUILTIN if s.data_engine == "chat_engine")


def onpolicy_path(adapter_id: str) -> Path:
    """Where an on-policy round's rows for the adapter `adapter_id` live (beside the bare base's)."""
    return DATA.with_name(f"chat_rs_{adapter_id[:8]}.jsonl")


def read(path: Path = DATA) -> list[dict]:
    path = Path(path)
    if not path.exists():
        return []
    rows = []
    for line in path.read_text().splitlines():
        try:
            rows.append(json.loads(line))
        except ValueError:  # a line cut by a kill mid-write: that prompt is simply redone
            continue
    return rows


def todo(prompts: list[dict], done: list[dict]) -> list[dict]:
    """The prompts not yet in `done`, by id or by text, each text once."""
    seen_ids, seen = {r["id"] for r in done}, {r["prompt"] for r in done}
    out = []
    for p in prompts:
        if p["id"] not in seen_ids and p["prompt"] not in seen:
            seen.add(p["prompt"])
            out.append(p)
    return out


CUTTING = {"bullets", "numbered", "sentences", "words"}  # repairs that keep only a reply's first sentences


def _repair(p: dict, s: dict) -> tuple[str, list[str]] | None:
    """`datagen.chat.repair` on a sample. A reply cut by the token cap is repaired only when a repair
    keeps just its first sentences or items (a count, a word limit), after its unfinished last
    sentence is dropped: what is kept was finished; the row's `repaired` then says `complete` too."""
    from macaronic.datagen.chat import repair

    if "complete" not in s["failed"]:
        return repair(p, s["text"])
    whole = s["text"][:max(s["text"].rfind(x) for x in ".!?") + 1]
    fixed = repair(p, whole) if whole else None
    if fixed is None or not CUTTING & set(fixed[1]):
        return None
    return fixed[0], fixed[1] + ["complete"]


def _select(p: dict, samples: list[dict]) -> dict:
    """The first passing sample (greedy first); else the first whose failures `repair` fixes."""
    keep, reply, repaired = next((s for s in samples if not s["failed"]), None), None, None
    if keep:
        reply = keep["text"]
    else:
        for s in samples:
            if (fixed := _repair(p, s)) is not None:
                keep, (reply, repaired) = s, fixed
                break
    row = {**p, "reply": reply, "k": keep["k"] if keep else None, "repaired": repaired,
           "samples": [{key: s[key] for key in ("k", "failed", "tokens")} for s in samples]}
    if samples and (keep is None or keep["k"] != 0 or repaired):
        row["greedy"] = samples[0]["text"]  # kept so a later repair (or a later rule) can use it
    return row


def reselect(rows: list[dict]) -> list[dict]:
    """The rows under today's verifiers and repairs: a kept reply that fails a check added since is
    dropped (`reply` None, `dropped` set); a row not kept gets another chance by `repair` on its
    stored greedy reply (rows sampled before greedy replies were stored stay as they are)."""
    from macaronic.datagen.chat import verify

    out = []
    for r in rows:
        if r.get("reply") is not None and r["category"] != "identity" and (now := verify(r, r["reply"])):
            out.append({**r, "reply": None, "dropped": now})
            continue
        g = r.get("greedy")
        if r.get("reply") is None and g is not None \
                and (fixed := _repair(r, {"text": g, "failed": r["samples"][0]["failed"]})) is not None:
            r = {**r, "reply": fixed[0], "k": 0, "repaired": fixed[1]}
        out.append(r)
    return out


def sample(llm, prompts: list[dict], k: int, *, base: str | None = None, temperature: float = 0.8,
           top_p: float = 0.95, max_tokens: int = 300, seed: int = 0, batch: int = 4, adapter: str | None = None):
    """Yield one row per prompt, in order, `batch` prompts in flight at a time: one greedy (k=0)
    and k-1 sampled replies each, verified; identity prompts answered from the harness. `adapter`:
    the name of an adapter loaded in `llm` that answers (in its served layout), else the bare base."""
    from macaronic.datagen.chat import identity_answer, verify
    from macaronic.engine.sampling import SamplingParams
    from macaronic.harness import load_bundle
    from macaronic.prompts import first_turn

    from macaronic.engine.bases import registered

    tag = registered(base) or str(base)  # which base the replies (and identity lines) are from
    bundle = load_bundle()  # the full bundle: the chat instruction stays when the chat adapter serves
    layout = bundle
    extra = {}
    if adapter is not None:
        from macaronic.contract.runner import served_bundle

        layout, extra = served_bundle(bundle, llm), {"adapter": llm.adapters.get(adapter).id}
    for start in range(0, len(prompts), batch):
        chunk, handles = prompts[start:start + batch], []
        for p in chunk:
            if p["category"] == "identity":
                handles.append([])
                continue
            ids = llm.encode_chat(first_turn(layout, "chat", p["prompt"]))
            salt = int(p["id"].rsplit("-", 1)[-1])
            handles.append([llm.submit(ids, adapter, SamplingParams(
                max_tokens=max_tokens, temperature=0.0 if j == 0 else temperature, top_p=1.0 if j == 0 else top_p,
                seed=None if j == 0 else seed * 1_000_003 + 1000 * salt + j)) for j in range(k)])
        for p, hs in zip(chunk, handles):
            if p["category"] == "identity":
                reply = identity_answer(bundle, base, p["prompt"])
                yield {**p, "reply": reply, "k": None, "samples": [], "base": tag, **extra}
                continue
            samples = []
            for j, h in enumerate(hs):
                text, last = h.result()
                if last.finish_reason == "error":
                    raise RuntimeError(last.error)
                failed = verify(p, text) + (["complete"] if last.finish_reason == "length" else [])
                samples.append({"k": j, "text": text.strip(), "failed": failed,
                                "tokens": (last.usage or {}).get("completion_tokens")})
            yield {**_select(p, samples), "base": tag, **extra}


def run(llm, prompts: list[dict], out: Path, k: int, *, on_row=None, **kw) -> int:
    """Sample every prompt not yet in `out`, appending each row as it is done; returns rows written."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    if out.exists() and (data := out.read_bytes()) and not data.endswith(b"\n"):
        out.write_bytes(data[:data.rfind(b"\n") + 1])  # a row cut by a kill: drop it, it is redone
    n = 0
    with out.open("a") as f:
        for row in sample(llm, todo(prompts, read(out)), k, **kw):
            f.write(json.dumps(row, ensure_ascii=False, sort_keys=True) + "\n")
            f.flush()
            n += 1
            if on_row:
                on_row(row)
    return n


def summary(rows: list[dict]) -> dict:
    """Kept prompts per category, and per check kind the share of samples that passed it."""
    seen, passed = Counter(), Counter()
    cats = defaultdict(lambda: [0, 0])
    for r in rows:
        cats[r["category"]][0] += 1
        cats[r["category"]][1] += r["reply"] is not None
        kinds = [c[0] for c in r["checks"]] + ["complete"]
        for s in r["samples"]:
            for kind in kinds:
                seen[kind] += 1
                passed[kind] += kind not in s["failed"]
    return {"prompts": len(rows), "kept": sum(r["reply"] is not None for r in rows),
            "repaired": dict(Counter(k for r in rows for k in r.get("repaired") or [])),
            "samples": sum(len(r["samples"]) for r in rows),
            "categories": {c: {"prompts": a, "kept": b} for c, (a, b) in sorted(cats.items())},
            "kinds": {kd: {"samples": seen[kd], "passed": passed[kd], "rate": round(passed[kd] / seen[kd], 3)}
                      for kd in sorted(seen)}}
