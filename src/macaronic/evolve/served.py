"""Served experience -> what the loop learns from it: failure clusters beside the contract's, routing
rows from the user's corrections, and seeds for the data engines (`macaronic evolve --experience`).

A served turn (one record of `serve.experience.records`) fails when the user or the client said so:
  wrong_route:<role>  feedback names another specialist ("should have been coding"; <role> is the
                      one named, as the mixed suite's label names the gold role)
  down:<role>         a thumbs-down (<role> answered)
  regenerate:<role>   the client asked for the same request again
  edit:<role>         the client changed the last user message and asked again
  tool_error:<role>   the harness refused or cut a tool call, or a tool result came back as an error
  repaired:<role>     the harness repaired, closed or cut the reply (a card, a loop, a cut call)
A thumbs-up (the latest verdict) clears regenerate and edit: the user kept that answer. Clusters are
keyed ("served", label), the shape of `evolve.failures.clusters`, so the operators count them with
the contract's (`operators._role_failures` reads the role after the colon).

Routing rows: a correction on a turn the router decided (its last message a user message, policy not
forced / sticky / tools) becomes {"id", "messages", "label", "family", "split", "group", "kind"}, the
shape of `router.data` examples; `router_refit` trains on them beside the contract's. Recording with
`--experience` is the user's consent to this use of the conversation.

Seeds: every failed turn gives one seed for the data engine of the specialist that should have
answered (the corrected one, else the routed one): the engine's own vocabulary for "more like this"
(agent pattern, chat category, coding family and style, GenUI intent), read off the request. A seed
keeps the request's sha256, never its text; `like(seed, n)` asks the engine for new items of that
kind. Seeds and routing rows whose text overlaps a contract dev or test task or an external-suite
prompt are dropped (`contract.sealed.overlaps`); test texts are read by the `check` purpose, as the
contract's own hash check reads them, which the sealed-read count leaves out.

Pure over a file and a contract: no model, no writes.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
from collections import Counter

SUITE = "served"
ROUTED_POLICIES_EXCLUDED = ("forced", "sticky", "tools")  # decisions the router did not make


# ---- labels and clusters --------------------------------------------------------------------

def verdict(turn: dict) -> dict:
    """The user's latest word on a turn: {"rating", "expected", "comment"} (None where unsaid)."""
    out = {"rating": None, "expected": None, "comment": None}
    for f in sorted(turn.get("feedback") or [], key=lambda f: f["created"]):
        if f.get("rating"):
            out["rating"] = f["rating"]
        if f.get("expected_specialist"):
            out["expected"] = f["expected_specialist"]
        if f.get("comment"):
            out["comment"] = f["comment"]
    return out


def label(turn: dict) -> list[str]:
    """The failure labels of one served turn (empty: nothing said it failed)."""
    role = turn["route"]["role"] or turn["route"]["adapter"] or "base"
    v = verdict(turn)
    kinds = {e["kind"] for e in turn.get("next") or []}
    out = []
    if v["expected"] and v["expected"] != role:
        out.append(f"wrong_route:{v['expected']}")
    if v["rating"] == "down":
        out.append(f"down:{role}")
    if v["rating"] != "up":
        out += [f"{k}:{role}" for k in ("regenerate", "edit") if k in kinds]
    if turn.get("tool_error") or any(e["kind"] == "tool_results" and (e.get("detail") or {}).get("errors")
                                     for e in turn.get("next") or []):
        out.append(f"tool_error:{role}")
    if turn.get("closed"):
        out.append(f"repaired:{role}")
    return out


def clusters(turns: list[dict]) -> Counter:
    """("served", label) -> number of served turns with it."""
    c: Counter = Counter()
    for t in turns:
        for lb in label(t):
            c[(SUITE, lb)] += 1
    return c


# ---- routing rows -----------------------------------------------------------------------------

def routing_rows(turns: list[dict], roles) -> list[dict]:
    """Corrected routing decisions as routing examples (router.data's shape), oldest first, one per
    (conversation, label); corrections naming no known specialist are left out."""
    out, seen = [], set()
    for t in turns:
        expected, r = verdict(t)["expected"], t["route"]
        msgs = t["request"]
        if (not expected or expected == r["role"] or expected not in roles or r["policy"] in ROUTED_POLICIES_EXCLUDED
                or not msgs or msgs[-1]["role"] != "user"):
            continue
        convo = [{k: m[k] for k in ("role", "content") if k in m} for m in msgs if m["role"] in ("user", "assistant")]
        key = (json.dumps(convo, sort_keys=True), expected)
        if key in seen:
            continue
        seen.add(key)
        rid = t["response_id"]
        out.append({"id": f"served/{rid}", "messages": convo, "label": expected, "family": SUITE, "split": "train",
                    "group": f"served/{rid}", "kind": SUITE, "source": SUITE, "routed": r["role"]})
    return out


def rows_sha(rows: list[dict]) -> str:
    return hashlib.sha256("".join(json.dumps(r, sort_keys=True) + "\n" for r in rows).encode()).hexdigest()


# ---- seeds ------------------------------------------------------------------------------------

def _last_user(msgs: list[dict]) -> str:
    return next((m.get("content") or "" for m in reversed(msgs) if m["role"] == "user"), "")


def _has(text: str, *words: str) -> bool:
    return any(re.search(rf"\b{w}", text) for w in words)


def agent_intent(text: str, turn: dict) -> dict:
    """The agent engine's pattern a request is like."""
    if any(e["kind"] == "tool_results" and (e.get("detail") or {}).get("errors") for e in turn.get("next") or []):
        return {"pattern": "error"}
    if _has(text, "if ", "unless", "only when"):
        return {"pattern": "conditional"}
    if _has(text, "delete", "remove", "cancel"):
        return {"pattern": "delete"}
    if _has(text, "create", "add ", "new ", "schedule", "make a"):
        return {"pattern": "direct_create"}
    if text.rstrip().endswith("?") or _has(text, "what", "when", "who", "which", "find", "show", "list"):
        return {"pattern": "lookup_answer"}
    return {"pattern": "lookup_act"}


def chat_intent(text: str, turn: dict) -> dict:
    """The chat engine's category."""
    if _has(text, "summar", "tl;dr", "shorten"):
        return {"category": "summarise"}
    if _has(text, "json", "title", "dialogue", "one word", "template", "table"):
        return {"category": "formats"}
    if _has(text, "poem", "haiku", "story", "essay", "letter", "write", "limerick"):
        return {"category": "writing"}
    if re.search(r"\d", text) and _has(text, "how many", "how much", "calculate", "what time", "what day", "total"):
        return {"category": "reasoning"}
    return {"category": "knowledge"}


def _coding_words() -> dict[str, set[str]]:
    from macaronic.datagen.coding_families import FAMILIES

    out = {}
    for name, fam in FAMILIES.items():
        spec = fam(random.Random(0))
        out[name] = set(re.findall(r"[a-z]{4,}", f"{name.replace('_', ' ')} {spec.doc}".lower()))
    return out


def coding_intent(text: str, turn: dict) -> dict:
    """The coding engine's style and the family whose task shares the most words (None: no word)."""
    style = "fix" if _has(text, "fix", "bug", "broken", "error", "doesn't work", "wrong") else \
        "signature" if "def " in text else "request"
    words = set(re.findall(r"[a-z]{4,}", text))
    best = max(_coding_words().items(), key=lambda kv: (len(kv[1] & words), -len(kv[1])), default=None)
    return {"style": style, "family": best[0] if best and best[1] & words else None}


GENUI_WORDS = (("form", ("form", "survey", "signup", "sign up", "application", "register")),
               ("checklist", ("checklist", "todo", "to-do", "to do", "tick")),
               ("settings", ("setting", "preference", "slider", "volume", "brightness")),
               ("choice", ("choose", "option", "plan", "pricing", "pick")),
               ("tabs", ("tabs", "tabbed")),
               ("slot_picker", ("slot", "book", "appointment", "reserve")),
               ("stats", ("stats", "dashboard", "metric", "kpi", "summary")),
               ("list", ("list", "rows", "table")))


def genui_intent(text: str, turn: dict) -> dict:
    """The GenUI engine's intent."""
    return {"intent": next((name for name, words in GENUI_WORDS if _has(text, *words)), "info_card")}


# data engine (a macaronic.datagen module) -> how a request names the kind of item it makes
INTENT = {"datagen.agent": agent_intent, "datagen.chat": chat_intent, "datagen.coding": coding_intent,
          "datagen.genui": genui_intent}


def engine_of(name: str) -> str | None:
    """The data engine of specialist `name`: its registry entry's `engine`, when macaronic.datagen
    has an engine of that name (None: a user specialist, or no specialist of that name)."""
    from macaronic.specialist import get

    try:
        engine = get(name).engine
    except KeyError:
        return None
    return f"datagen.{engine}" if f"datagen.{engine}" in INTENT else None


def seeds(turns: list[dict]) -> list[dict]:
    """One seed per failed turn: the specialist that should have answered, its engine (None: no data
    engine), the kind of item to make more of, why, and the request's sha256 (not its text)."""
    out = []
    for t in turns:
        labels = label(t)
        if not labels:
            continue
        target = verdict(t)["expected"] or t["route"]["role"]
        text = _last_user(t["request"])
        engine = engine_of(target)
        intent = INTENT[engine](text.lower(), t) if engine else {}
        out.append({"id": f"served/{t['response_id']}", "response_id": t["response_id"], "specialist": target,
                    "engine": engine, "intent": intent,
                    "labels": labels, "request_sha256": hashlib.sha256(
                        json.dumps(t["request"], sort_keys=True, ensure_ascii=False).encode()).hexdigest()})
    return out


def like(seed: dict, n: int, rng_seed: int = 0) -> list:
    """`n` new engine items of the seed's kind: agent and GenUI `Example`s (verified gold), coding
    `Problem`s and chat prompt dicts (their targets come from the base by rejection sampling)."""
    from macaronic.datagen import agent, chat, coding, genui

    eng, intent = seed["engine"], seed["intent"]
    rng = random.Random(f"served:{seed['id']}:{rng_seed}")
    if eng == "datagen.chat":
        return [chat.prompt(i, rng_seed, category=intent["category"]) for i in range(n * 2)
                if i % chat.IDENTITY_EVERY != chat.IDENTITY_EVERY // 2][:n]
    if eng == "datagen.coding":
        from macaronic.datagen.coding_families import FAMILIES

        fams = [intent["family"]] if intent.get("family") else list(FAMILIES)
        return [coding.make_problem(fams[i % len(fams)], i, rng_seed, intent["style"]) for i in range(n)]
    if eng == "datagen.genui":
        from macaronic.datagen.examples import Example
        from macaronic.harness import load_bundle
        from macaronic.prompts import prompt_head

        head = prompt_head(load_bundle(), "genui")
        out = []
        for i in range(n):
            name, request, reply, req = genui.card(rng, intent["intent"], sid=f"card-{i}")
            assert not genui.verify(reply, req), name
            out.append(Example((*head, {"role": "user", "content": request}, {"role": "assistant", "content": reply}),
                               "genui", f"engine/genui/{name}/served"))
        return out
    if eng == "datagen.agent":
        from macaronic.datagen.examples import Example
        from macaronic.harness import load_bundle

        bundle, out, tries = load_bundle(), [], 0
        while len(out) < n and tries < 20 * n + 100:
            tries += 1
            try:
                w, t, name = agent.transcript(rng, intent["pattern"])
            except agent.Skip:
                continue
            out.append(Example(tuple(agent.messages_of(w, t, bundle)), "agent",
                               f"engine/agent/{name}/{w.domain.noun}/served"))
        return out
    raise ValueError(f"seed {seed['id']}: specialist {seed['specialist']!r} has no data engine")


def training_examples(seeds: list[dict], generator: str, n: int, rng_seed: int = 0, base: str | None = None) -> list[dict]:
    """`n` training examples (dicts) like one specialist's served `seeds`, for its data engine
    `generator` (the registry's `data_engine`). Agent and GenUI: new verified engine items of each
    seed's kind (`like`), round-robin over the seeds. Chat and coding make prompts and problems whose
    targets come from sampling the base, so their examples are the engine's committed verified rows of
    the seeds' kinds (chat category; coding family, else style); all rows when none matches."""
    from macaronic.train.builders import build

    if not seeds:
        raise ValueError(f"no served seeds for {generator}")
    engines = {s["engine"] for s in seeds}
    if engines in ({"datagen.agent"}, {"datagen.genui"}):
        per = -(-n // len(seeds))
        made = [like(s, per, rng_seed) for s in seeds]
        out = [e.to_dict() for batch in zip(*made) for e in batch]
        return out[:n]
    if engines not in ({"datagen.chat"}, {"datagen.coding"}):
        raise ValueError(f"seeds of {sorted(e or 'no engine' for e in engines)} cannot feed {generator}")
    pool = [e.to_dict() for e in build(generator, None, rng_seed, base)]  # every committed row once
    if engines == {"datagen.chat"}:
        kinds = {f"engine/chat/{s['intent']['category']}" for s in seeds}
        hit = [e for e in pool if e["source"] in kinds]
    else:
        fams = {s["intent"].get("family") for s in seeds} - {None}
        styles = {s["intent"]["style"] for s in seeds}
        hit = [e for e in pool if e["source"].split("/")[1] in fams] or \
            [e for e in pool if e["source"].split("/")[-1] in styles]
    rows = hit or pool
    return [rows[i % len(rows)] for i in range(n)]


# ---- held-out texts and the reading step ------------------------------------------------------

def external_prompts() -> tuple[list[tuple[str, str]], list[str]]:
    """(key, prompt) of the external suites installed here (HumanEval, BFCL simple, the hand-written
    instruction suite), and the sources that are not installed."""
    from macaronic.suites import external, instructions

    out, missing = [], []
    try:
        out += [(f"humaneval/{p['task_id']}", p["prompt"]) for p in external.humaneval_problems()]
    except external.MissingPackage:
        missing.append("humaneval")
    try:
        for p in external.bfcl_simple_problems():
            q = p["question"][0] if isinstance(p["question"][0], list) else p["question"]
            out += [(f"bfcl/{p['id']}", m["content"]) for m in q if m["role"] == "user"]
    except external.MissingPackage:
        missing.append("bfcl")
    out += [(f"instructions/{p.get('key', i)}", p["prompt"]) for i, p in enumerate(instructions.load_every())]
    return out, missing


def held_out(contract, trainer, checker, budget) -> list[tuple[str, str]]:
    """(key, text) of every dev and test task of the contract (dev as the trainer reads it, at the
    larger of the contract's and the budget's size; test through `checker`, the `check` purpose)."""
    out = []
    for s in contract.suites:
        dev = trainer.tasks(s.name, "dev", per_family=max(s.per_family, budget.dev_for(s.name)))
        out += [(f"{s.name}/dev/{t.id}", t.text) for t in dev]
        out += [(f"{s.name}/test/{t.id}", t.text) for t in checker.tasks(s.name, "test")]
    return out


def read(path, contract=None, trainer=None, checker=None, budget=None, held: list | None = None) -> dict:
    """The reading step: {"turns", "clusters", "routing", "seeds", "dropped", "checked"} from an
    experience file. `held` (key, text) pairs replace the contract's dev/test texts (tests)."""
    from macaronic.contract.sealed import HeldOut
    from macaronic.serve.experience import records
    from macaronic.specialist import all_specialists

    turns = [r for r in records(path) if r["type"] == "turn"]
    ext, missing = external_prompts()
    if held is None:
        held = held_out(contract, trainer, checker, budget)
    index = HeldOut(held + ext)
    roles = {s.name for s in all_specialists()}
    routing, seed_list, dropped = [], [], []
    by_id = {t["response_id"]: t for t in turns}
    for r in routing_rows(turns, roles):
        hit = index.overlap(*[m["content"] for m in r["messages"] if m["role"] == "user"])
        (dropped.append({"id": r["id"], "what": "routing", "overlaps": hit}) if hit else routing.append(r))
    for s in seeds(turns):
        hit = index.overlap(*[m.get("content") or "" for m in by_id[s["response_id"]]["request"]
                              if m["role"] == "user"])
        (dropped.append({"id": s["id"], "what": "seed", "overlaps": hit}) if hit else seed_list.append(s))
    c = clusters(turns)
    return {"turns": len(turns), "clusters": {f"{a}/{b}": n for (a, b), n in c.most_common()},
            "routing": routing, "routing_sha256": rows_sha(routing), "seeds": seed_list, "dropped": dropped,
            "checked": {"held_out": len(held), "external": len(ext), "external_missing": missing}}


def counter(doc: dict) -> Counter:
    """A `read` result's clusters back as the (suite, label) Counter the operators take."""
    return Counter({tuple(k.split("/", 1)): n for k, n in doc["clusters"].items()})
