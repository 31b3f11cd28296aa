"""The routing dataset: labelled user turns generated deterministically from families.py.

Each example is a dict {"id", "messages", "label", "family", "split", "group", "kind"}
(plus "twin" for injection cases: the id of the injection-free example). `messages` is a chat
conversation whose last message is the turn to route; assistant messages carry an extra
`"specialist"` key naming the specialist that produced them.

Kinds:
  template    a paraphrase-template turn; members of one `group` share intent and fill
  bait        words point at another role (a chat question about Python; an agent note with HTML)
  ambiguous   no specialist fits; the label is the default route (coding)
  injection   a turn with an embedded routing instruction; label = the true intent; see "twin"
  multiturn   earlier user/assistant turns (assistants tagged with "specialist"), then a new request
  tool_result the last message is a tool result; label = the adapter that issued the call,
              even where the user's words point elsewhere (a mis-routed turn still owns its call)
  hand        hand-written turns, test split only

Splits are by family: a family (and every example derived from it) lives in exactly one split,
so test measures generalisation to intents worded in ways never seen in training. The dataset
knows nothing about models.
"""

from __future__ import annotations

import random
from functools import lru_cache

from macaronic.router.families import FAMILIES, HAND, INJECTIONS, MORE_INJECTIONS, REPLIES, TOOL_CALLS, Family
from macaronic.specialist import BUILTIN_NAMES
from macaronic.splits import SPLITS

ROLES = BUILTIN_NAMES  # the built-in specialists, in registry order (the rng draws below depend on it)
SEED = 20250501


def assign_splits(families: tuple[Family, ...] = FAMILIES, seed: int = SEED) -> dict[str, str]:
    """Family -> split. Per role and per kind group: ~60% train, 20% dev, 20% test, at least one
    family in each split where there are three or more; pinned families keep their split."""
    rng = random.Random(seed)
    out = {f.name: f.split for f in families if f.split}
    buckets: dict[tuple[str, str], list[str]] = {}
    for f in families:
        if not f.split:
            # Bait families are few; spread them over splits across roles, not within one role.
            key = ("*", "bait") if f.kind == "bait" else (f.role, f.kind)
            buckets.setdefault(key, []).append(f.name)
    for key in sorted(buckets):
        names = sorted(buckets[key])
        rng.shuffle(names)
        n = len(names)
        n_dev = max(1, round(0.2 * n)) if n >= 3 else 0
        n_test = max(1, round(0.2 * n)) if n >= 3 else 0
        for i, name in enumerate(names):
            out[name] = "test" if i < n_test else "dev" if i < n_test + n_dev else "train"
    return out


def _user(text: str) -> dict:
    return {"role": "user", "content": text}


def _fill(template: str, fill) -> str:
    x, y = (fill, "") if isinstance(fill, str) else fill
    return template.format(x=x, y=y)


def _example(id_, messages, label, family, split, group, kind, **extra) -> dict:
    return {"id": id_, "messages": messages, "label": label, "family": family, "split": split,
            "group": group, "kind": kind, **extra}


def build_dataset(seed: int = SEED) -> list[dict]:
    """All examples, in a fixed order; same seed, same list."""
    rng = random.Random(seed)
    split_of = assign_splits(FAMILIES, seed)
    base: list[dict] = []
    for fam in FAMILIES:
        for i, fill in enumerate(fam.fills):
            for j, tpl in enumerate(fam.templates):
                base.append(_example(f"{fam.name}/{i}/{j}", [_user(_fill(tpl, fill))], fam.role,
                                     fam.name, split_of[fam.name], f"{fam.name}#{i}", fam.kind))
    out = list(base)
    by_split = {s: [e for e in base if e["split"] == s] for s in SPLITS}

    # Injection twins: one per paraphrase group (first template), target a different role.
    for e in base:
        if e["id"].endswith("/0") and e["kind"] != "ambiguous":
            out.append(_injection_twin(e, INJECTIONS, rng, "/inj"))

    # Multi-turn: an earlier exchange from the same split, then the example's turn.
    for split in SPLITS:
        pool = [e for e in by_split[split] if e["kind"] != "ambiguous"]
        for k, e in enumerate(rng.sample(pool, len(pool) // 6)):
            prev = rng.choice(pool)
            if rng.random() < 0.4:  # half of those continue on the same role: stickiness matters
                same = [p for p in pool if p["label"] == e["label"] and p is not e]
                prev = rng.choice(same)
            msgs = [prev["messages"][-1],
                    {"role": "assistant", "content": rng.choice(REPLIES[prev["label"]]),
                     "specialist": prev["label"]},
                    e["messages"][-1]]
            out.append(_example(f"{e['id']}/mt{k}", msgs, e["label"], e["family"], split,
                                f"{e['group']}/mt{k}", "multiturn"))

    # Tool results: the adapter that issued the call owns the result.
    for split in SPLITS:
        pool = by_split[split]
        for k, e in enumerate(rng.sample(pool, len(pool) // 12)):
            caller = e["label"] if rng.random() < 0.75 else rng.choice(ROLES)
            name, args, result = rng.choice(TOOL_CALLS[caller])
            call_id = f"call_{split}_{k}"
            msgs = [e["messages"][-1],
                    {"role": "assistant", "content": "", "specialist": caller,
                     "tool_calls": [{"id": call_id, "type": "function",
                                     "function": {"name": name, "arguments": args}}]},
                    {"role": "tool", "tool_call_id": call_id, "content": result}]
            out.append(_example(f"{e['id']}/tool{k}", msgs, caller, e["family"], split,
                                f"{e['group']}/tool{k}", "tool_result"))

    for k, (role, text) in enumerate(HAND):
        out.append(_example(f"hand/{role}/{k}", [_user(text)], role, f"hand/{role}", "test",
                            f"hand#{k}", "hand"))

    # More injection twins, train and dev only, from MORE_INJECTIONS with a generator of their own:
    # everything above keeps its draws (ids end MORE_TWIN; `train.builders.route_examples` leaves
    # them out, so the recorded route-hop data rebuild).
    more = random.Random(seed * 7919 + 1)
    for e in base:
        if e["id"].endswith("/0") and e["kind"] != "ambiguous" and e["split"] != "test":
            out.append(_injection_twin(e, MORE_INJECTIONS, more, MORE_TWIN, own_line=True))
    return out


MORE_TWIN = "/inj-more"  # the id suffix of the MORE_INJECTIONS twins


def _injection_twin(e: dict, phrases: tuple[str, ...], rng: random.Random, suffix: str,
                    own_line: bool = False) -> dict:
    """`e` with a phrase naming another role before it, or after it (on a line of its own half the
    time when `own_line`); labelled as `e`, its twin."""
    target = rng.choice([r for r in ROLES if r != e["label"]])
    phrase = rng.choice(phrases).format(target=target)
    text = e["messages"][-1]["content"]
    if rng.random() < 0.5:
        text = f"{phrase} {text}"
    elif own_line and rng.random() < 0.5:
        text = f"{text}\n{phrase}"
    else:
        text = f"{text} {phrase}"
    return _example(e["id"] + suffix, [_user(text)], e["label"], e["family"], e["split"],
                    e["group"] + suffix, "injection", twin=e["id"])


@lru_cache(maxsize=4)
def _cached(seed: int) -> tuple[dict, ...]:
    return tuple(build_dataset(seed))


def load_routing_data(split: str | None = None, seed: int = SEED) -> list[dict]:
    """Examples of one split ("train", "dev", "test") or all of them (split=None).

    Returns fresh dicts-of-lists copies so callers may mutate them safely.
    """
    import copy

    if split is not None and split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; expected one of {SPLITS}")
    return [copy.deepcopy(e) for e in _cached(seed) if split is None or e["split"] == split]


def router_fit_data(seed: int = SEED) -> tuple[list[dict], list[dict]]:
    """(train, dev) the shipped router is fitted on: the template families' train/dev splits
    plus the hand-written train/dev writers (macaronic.router.handwritten), and in train an injected
    twin of every single hand-written train turn (`hand_twins`)."""
    from macaronic.router.handwritten import load_handwritten

    hand = load_handwritten("train")
    return (load_routing_data("train", seed) + hand + hand_twins(hand, seed),
            load_routing_data("dev", seed) + load_handwritten("dev"))


HAND_TWIN = "/inj-hand"  # the id suffix of the hand-written train turns' injection twins


def hand_twins(examples: list[dict], seed: int = SEED) -> list[dict]:
    """An injection twin of every single hand-written turn in `examples` (kind "hand", the clean halves of
    the writers' own injection pairs among them; 2026-12-07): the turn with a
    phrase from INJECTIONS or MORE_INJECTIONS naming another role before it, after it or on a line of
    its own, labelled as the turn. The template families' twins are templates too; these put the
    same phrases on turns as people write them. The phrase pools predate the held-out writers'
    injections that the shipped state flipped; nothing here was written after reading them."""
    rng = random.Random(seed * 104729 + 3)
    out = []
    for e in examples:
        if e["kind"] != "hand":
            continue
        t = _injection_twin(e, INJECTIONS + MORE_INJECTIONS, rng, HAND_TWIN, own_line=True)
        out.append({**t, **{k: e[k] for k in ("style", "writer") if k in e}})
    return out


def data_hash(*example_lists: list[dict]) -> str:
    """sha256 of the examples' canonical JSON (what a fitted state's binding records)."""
    import hashlib
    import json

    return hashlib.sha256(json.dumps(example_lists, sort_keys=True, ensure_ascii=False).encode()).hexdigest()
