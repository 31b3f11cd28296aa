"""Data builders: the training conversations for each specialist, generated here from seeded
task families (nothing downloaded), train-split families only.

    build(name, n, seed, base) -> list[Example]     name in GENERATORS: chat, chat_engine, route, agent, agent_grounded,
                                               agent_engine, agent_functions, coding, coding_distill, genui,
                                               genui_engine, genui_engine_wide

Every conversation opens with the messages the served harness puts before a first turn answered
by that role (`role_prompt_head`, built by the one renderer `macaronic.prompts.prompt_head`:
identity + tool list, then the role's instruction), so the adapter learns under the prompt it will see. Builders never read
dev or test families; `dev_prompts(role, n)` gives held-out conversations for sanity checks.
Knows nothing about models or training.
"""

from __future__ import annotations

import json
import random
from collections import Counter

from macaronic.datagen.examples import Example
from macaronic.specialist import output_of


def _bundle():
    from macaronic.harness import load_bundle

    return load_bundle()


def role_prompt_head(role: str) -> list[dict]:
    """What the served harness puts before a first user turn that `role` answers: the header
    (identity; the substrate's tools for a tool-calling specialist, as the harness's clients send them) and the role's
    instruction. One builder for both sides: `macaronic.prompts.prompt_head`."""
    from macaronic.prompts import prompt_head
    from macaronic.substrate.tools import openai_tools

    return prompt_head(_bundle(), role, openai_tools() if output_of(role) == "tool_calls" else None)


def at_answer(examples: list[Example], role: str) -> list[Example]:
    """The examples as a pair renders them for an adapter that switches on at the assistant header: the
    role's instruction (the system message before each user turn the role answers) left out, as
    `HarnessBundle.served(..., assistant_roles)` leaves it out when serving. Idempotent; an example of
    another role (its `role`, else `role`) loses that role's instruction."""
    from macaronic.prompts import role_instruction

    bundle, out = _bundle(), []  # read once: the bundle is a directory of files
    for ex in examples:
        ins = role_instruction(bundle, ex.role or role)
        msgs = ex.messages
        if ins is not None:
            msgs = tuple(m for i, m in enumerate(msgs)
                         if not (m.get("role") == "system" and m.get("content") == ins["content"]
                                 and i + 1 < len(msgs) and msgs[i + 1].get("role") == "user"))
        out.append(ex if msgs == ex.messages else Example(msgs, ex.role, ex.source))
    return out


def role_system_prompt(role: str) -> str:
    """The head's text in one string (for logs and length checks)."""
    return "\n\n".join(m["content"] for m in role_prompt_head(role))


def _conv(role: str, user: str, *rest: dict) -> tuple[dict, ...]:
    return (*role_prompt_head(role), {"role": "user", "content": user}, *rest)


# ---- chat -------------------------------------------------------------------------------

def chat_examples(n: int, seed: int = 0, base: str | None = None) -> list[Example]:
    """Identity (naming `base`, a registered base), facts and conciseness from the chat suite's
    train families."""
    from macaronic.suites.chat import FAMILIES, make_task

    fams = [f for f, (s, _) in FAMILIES.items() if s == "train"]
    out = []
    for i in range(n):
        t = make_task(fams[i % len(fams)], i // len(fams), seed, base)
        out.append(Example(_conv("chat", t.prompt, {"role": "assistant", "content": t.gold}), "chat", f"chat/{t.family}"))
    return out


SAME_REPLY = 6  # the identity answer is taught, not drilled: a reply the same word for word is kept this often


def chat_engine_examples(n: int | None, seed: int = 0, path=None) -> list[Example]:
    """The chat data engine's kept rows (`macaronic train sample-chat`, train/data/chat_rs.jsonl): the
    bare base's own replies that passed every check, and the identity answers written from the
    harness (rows not kept at sampling time get another chance by today's repairs, `chat_rs.reselect`); under the head the chat adapter is served with (the full bundle keeps the chat
    instruction when the pair has a chat adapter: `HarnessBundle.served`), shuffled by `seed`,
    repeated in order when `n` exceeds them (None: every row once)."""
    from macaronic.train.chat_rs import DATA, read, reselect

    rows = [r for r in reselect(read(path or DATA)) if r.get("reply")]
    if not rows:
        raise ValueError(f"no kept rows in {path or DATA}; run macaronic train sample-chat --base BASE first")
    seen: Counter = Counter()  # one reply text at most SAME_REPLY times (the identity answers repeat)
    rows = [r for r in rows if (seen.update([r["reply"]]) or seen[r["reply"]]) <= SAME_REPLY]
    random.Random(seed).shuffle(rows)
    out = [Example(_conv("chat", r["prompt"], {"role": "assistant", "content": r["reply"]}), "chat",
                   f"engine/chat/{r['category']}") for r in rows]
    return out if n is None else [out[i % len(out)] for i in range(n)]


def chat_engine_pairs(n: int | None = None, seed: int = 0, path=None) -> list:
    """Preference pairs from the chat data engine's rows (`train.dpo.Pair`): the kept reply (a sampled
    reply that passed every check, or the greedy reply repaired on its own words) over the bare base's
    own greedy reply, which failed a check; under the chat head, shuffled by `seed` (None: every pair
    once). Rows sampled before greedy replies were stored give none."""
    from macaronic.train.chat_rs import DATA, read, reselect
    from macaronic.train.dpo import Pair

    rows = [r for r in reselect(read(path or DATA)) if r.get("reply") and r.get("greedy") and r["reply"] != r["greedy"]]
    if not rows:
        raise ValueError(f"no preference pairs in {path or DATA}: rows need a kept reply and a failed greedy one")
    random.Random(seed).shuffle(rows)
    out = [Pair(Example(_conv("chat", r["prompt"], {"role": "assistant", "content": r["reply"]}), "chat", src),
                Example(_conv("chat", r["prompt"], {"role": "assistant", "content": r["greedy"]}), "chat", src), src)
           for r in rows for src in [f"engine/chat/{r['category']}"]]
    return out if n is None else [out[i % len(out)] for i in range(n)]


# chat adapters whose own replies were sampled (`train sample-chat --adapter`). The shipped chat adapter's
# recorded source names `chat_onpolicy`: a later round goes under a generator name of its own, so its pairs
# still rebuild (tests/train/test_dpo.py).
ONPOLICY_ROUNDS = ("c77f86b2",)


def chat_onpolicy_pairs(n: int | None = None, seed: int = 0, rounds=ONPOLICY_ROUNDS) -> list:
    """Preference pairs from on-policy rounds: a chat adapter's own failed greedy reply against its
    own passing (or repaired) reply to the same chat engine prompt (`train/data/chat_rs_<id>.jsonl`),
    under the chat head, shuffled by `seed`."""
    from macaronic.train.chat_rs import onpolicy_path

    out = []
    for r in rounds:
        out += chat_engine_pairs(None, seed, onpolicy_path(r))
    random.Random(seed).shuffle(out)
    return out if n is None else [out[i % len(out)] for i in range(n)]


PAIRS = {"chat_engine": chat_engine_pairs,  # preference-pair generators (`macaronic train dpo --pairs NAME[,NAME]`)
         "chat_onpolicy": chat_onpolicy_pairs}


def route_examples(n: int, seed: int = 0) -> list[Example]:
    """The prompted router's own prompt (bundle route prompt, train-split routing families),
    answered `model_id=<role>`: the chat adapter also serves the route hop."""
    from macaronic.router.data import MORE_TWIN, load_routing_data
    from macaronic.router.prompted import PromptedPolicy
    from macaronic.router.types import AdapterInfo

    b = _bundle()
    policy = PromptedPolicy.from_bundle(b)
    adapters = [AdapterInfo(r.name, r.description, r.boundary) for r in b.roles]
    data = [e for e in load_routing_data("train")  # the extra injection twins came after the recorded data
            if e["kind"] != "tool_result" and not e["id"].endswith(MORE_TWIN)]
    random.Random(seed).shuffle(data)
    out = []
    for e in data[:n]:
        msgs = policy.messages(e["messages"][-1]["content"], adapters)
        out.append(Example((*msgs, {"role": "assistant", "content": policy.prefill + e["label"]}), "chat",
                           f"route/{e['family']}"))
    return out


# ---- agent ------------------------------------------------------------------------------

def _final_reply(task, results: list[dict]) -> str:
    facts = list(task.required_facts)
    if task.family.endswith("not_owner"):
        return f"I can't delete that event: it belongs to {facts[0]}, not to you. Nothing was changed."
    verbs = {"create_event": "I added the event to your calendar", "update_event": "I updated the event",
             "delete_event": "I deleted the event", "add_reminder": "I added the reminder",
             "complete_reminder": "I marked the reminder as done", "update_contact": "I updated the contact",
             "create_note": "I saved the note", "refund_order": "I refunded the order",
             "cancel_order": "I cancelled the order"}
    k = task.groups[-1] if task.groups else 1  # the writes made together last
    last_group = list(zip(task.gold_actions[-k:], results[-k:]))
    if all(t in verbs and "error" not in r for (t, _), r in last_group):
        heads = []
        for (tool, _), res in last_group:
            title = next((v.get("title") for v in res.values() if isinstance(v, dict) and v.get("title")), None)
            heads.append(verbs[tool] + (f": '{title}'." if title else "."))
        return " ".join(heads) + (" " + ", ".join(facts) + "." if facts else "")
    return "Here is what I found: " + ", ".join(facts) + "." if facts else "Done."


def agent_turns(task) -> list[dict]:
    """Gold actions replayed on a real episode: tool calls, real tool results, a final reply. A task
    with `groups` makes each group's calls in one message (independent calls together), then their
    results, one tool message each, in order."""
    from macaronic.substrate.toolcalls import format_tool_call, format_tool_result

    actions = list(task.gold_actions)
    sizes = list(task.groups) or [1] * len(actions)
    if sum(sizes) != len(actions) or min(sizes, default=1) < 1:
        raise ValueError(f"{task.id}: groups {sizes} do not cover its {len(actions)} gold actions")
    ep = task.start()
    try:
        msgs, results, i = [], [], 0
        for size in sizes:
            group, i = actions[i:i + size], i + size
            res = [ep.call(name, args) for name, args in group]
            results += res
            msgs.append({"role": "assistant", "content": "\n".join(format_tool_call(n, a) for n, a in group)})
            msgs += [{"role": "tool", "content": format_tool_result(r)} for r in res]
        msgs.append({"role": "assistant", "content": _final_reply(task, results)})
    finally:
        ep.close()
    return msgs


def agent_episode(task) -> Example:
    return Example(_conv("agent", task.request, *agent_turns(task)), "agent", f"agent/{task.family}")


def _agent_tasks(n: int, seed: int) -> list:
    from macaronic.substrate.tasks import FAMILIES, generate_tasks

    fams = [f.name for f in FAMILIES if f.split == "train"]
    tasks = generate_tasks("train", n_per_family=-(-n // len(fams)), base_seed=seed)
    random.Random(seed).shuffle(tasks)
    return tasks[:n]


def agent_examples(n: int, seed: int = 0) -> list[Example]:
    return [agent_episode(t) for t in _agent_tasks(n, seed)]


# Tool-name grounding: the same episodes, half of them under a consistent random renaming of the
# tools (list, calls, descriptions), so the name to call has to be read from the tool list instead
# of recalled. Synonyms keep names plausible; argument names and results are unchanged.
VERB_SYNONYMS = {"append_to": ("append_to", "extend"), "get": ("get", "fetch", "read"),
                 "list": ("list", "show", "browse"), "search": ("search", "find", "lookup"),
                 "create": ("create", "add", "new"), "add": ("add", "create", "new"),
                 "update": ("update", "edit", "change"), "delete": ("delete", "remove", "drop"),
                 "complete": ("complete", "finish", "close"), "refund": ("refund", "reimburse"),
                 "cancel": ("cancel", "void")}
NOUN_SYNONYMS = {"event": ("event", "meeting", "appointment"), "reminder": ("reminder", "todo", "task"),
                 "contact": ("contact", "person", "friend"), "note": ("note", "memo", "doc"),
                 "order": ("order", "purchase", "shipment"), "today": ("today", "date")}


def tool_renaming(names: list[str], rng: random.Random) -> dict[str, str]:
    """A consistent synonym renaming of `names` (verb_noun[s]); identity if two names would collide."""
    verbs = {v: rng.choice(alts) for v, alts in VERB_SYNONYMS.items()}
    nouns = {n: rng.choice(alts) for n, alts in NOUN_SYNONYMS.items()}
    out = {}
    for name in names:
        verb = next((v for v in VERB_SYNONYMS if name.startswith(v + "_")), None)
        rest = name[len(verb) + 1:] if verb else name
        plural = rest.endswith("s") and rest[:-1] in NOUN_SYNONYMS
        noun = rest[:-1] if plural else rest
        new_noun = nouns.get(noun, noun) + ("s" if plural else "")
        out[name] = f"{verbs[verb]}_{new_noun}" if verb else new_noun
    return out if len(set(out.values())) == len(out) else {n: n for n in names}


def rename_in(text: str, renaming: dict[str, str]) -> str:
    import re

    pattern = r"\b(" + "|".join(sorted(map(re.escape, renaming), key=len, reverse=True)) + r")\b"
    return re.sub(pattern, lambda m: renaming[m.group(0)], text)


def grounded_episode(task, rng: random.Random) -> Example:
    """`agent_episode(task)` under a random tool renaming (list, descriptions, calls)."""
    from macaronic.prompts import prompt_head
    from macaronic.substrate.tools import openai_tools

    tools = openai_tools()
    renaming = tool_renaming([t["function"]["name"] for t in tools], rng)
    head = prompt_head(_bundle(), "agent", json.loads(rename_in(json.dumps(tools), renaming)))
    turns = [{**m, "content": rename_in(m["content"], renaming)} for m in agent_turns(task)]
    return Example((*head, {"role": "user", "content": task.request}, *turns), "agent",
                   f"agent/{task.family}+renamed")


def agent_grounded_examples(n: int, seed: int = 0) -> list[Example]:
    """`agent_examples(n, seed)` with every second episode under a random tool renaming."""
    rng = random.Random(f"grounded:{seed}")
    return [grounded_episode(t, rng) if i % 2 else agent_episode(t)
            for i, t in enumerate(_agent_tasks(n, seed))]


def agent_engine_examples(n: int, seed: int = 0) -> list[Example]:
    """Three in four from the agent data engine (`macaronic.datagen.agent`: generated tool worlds,
    verified by execution), one in four from the substrate's train families (`agent_grounded`), so
    the served substrate tools stay known; shuffled by `seed`."""
    from macaronic.datagen.agent import examples

    k = n // 4
    out = examples(n - k, seed) + agent_grounded_examples(k, seed)
    random.Random(seed).shuffle(out)
    return out


def agent_chains_examples(n: int, seed: int = 0) -> list[Example]:
    """`agent_engine_examples` with one in four replaced by the engine's chained requests (`CHAINS`:
    two or three things asked in one message, done one call after another, each looked up first)."""
    from macaronic.datagen.agent import CHAINS, examples

    k = n // 4
    out = agent_engine_examples(n - k, seed) + examples(k, seed, tuple(CHAINS))
    random.Random(f"chains:{seed}").shuffle(out)
    return out


def agent_functions_examples(n: int, seed: int = 0) -> list[Example]:
    """The function-tool engine (`macaronic.datagen.functions`: calculators and converters; a call
    when a listed tool computes what is asked, none when only its neighbours are listed; half the
    tools with a percentage parameter take it as a decimal fraction)."""
    from macaronic.datagen.functions import examples

    return examples(n, seed, fractions=0.5)


# ---- coding -----------------------------------------------------------------------------

def coding_examples(n: int, seed: int = 0) -> list[Example]:
    from macaronic.suites.coding import FAMILIES, make_task

    fams = [f for f, (s, _) in FAMILIES.items() if s == "train"]
    out = []
    for i in range(n):
        t = make_task(fams[i % len(fams)], i // len(fams), seed)
        out.append(Example(_conv("coding", t.prompt, {"role": "assistant", "content": t.reference_reply()}),
                           "coding", f"coding/{t.family}"))
    return out


def coding_distill_examples(n: int, seed: int = 0, refs_per_family: int = 3) -> list[Example]:
    """The bare base's own passing solutions to train-family tasks (`macaronic train distill`,
    checked in as train/data/coding_distill.jsonl), code only, plus the reference solution for
    the first `refs_per_family` distinct prompts of each train family the base never solved;
    under the served prompt head, shuffled by `seed`, repeated in order when `n` exceeds them."""
    from macaronic.train.distill import read, train_prompts

    rows = read()
    random.Random(seed).shuffle(rows)
    out = [Example(_conv("coding", r["prompt"], {"role": "assistant", "content": f"```python\n{r['code']}\n```"}),
                   "coding", f"coding/{r['family']}") for r in rows]
    solved = {r["family"] for r in rows}
    out += [Example(_conv("coding", t.prompt, {"role": "assistant", "content": t.reference_reply()}),
                    "coding", f"coding-ref/{t.family}")
            for t in train_prompts(refs_per_family, seed) if t.family not in solved]
    random.Random(seed).shuffle(out)
    return [out[i % len(out)] for i in range(n)]


def coding_engine_examples(n: int | None, seed: int = 0, rows: list[dict] | None = None) -> list[Example]:
    """The bare base's own passing replies to the coding engine's generated problems (`macaronic
    train sample-coding`, train/data/coding_rft.jsonl: code and a short explanation as the base
    wrote them) under the head the coding adapter is served with; shuffled by `seed`, repeated in
    order when `n` exceeds them (None: every row once). The rows name the base that wrote them.
    `rows`: a selection of those rows instead of all of them (scripts/coding_hard_rows.py)."""
    from macaronic.train.rft import read

    rows = read() if rows is None else list(rows)
    random.Random(seed).shuffle(rows)
    out = [Example(_conv("coding", r["prompt"], {"role": "assistant", "content": r["reply"]}), "coding",
                   f"coding-engine/{r['family']}/{r['style']}") for r in rows]
    return out if n is None else [out[i % len(out)] for i in range(n)]


# ---- genui ------------------------------------------------------------------------------

def genui_reply(gold: dict) -> str:
    return json.dumps(gold, ensure_ascii=False, separators=(",", ":"))


def genui_examples(n: int, seed: int = 0) -> list[Example]:
    """Gold cards of the genui train split (dev instances and test families are skipped)."""
    from macaronic.genui.tasks import FAMILIES, TEST_FAMILIES, make_task

    fams = [f for f in FAMILIES if f not in TEST_FAMILIES]
    out, i = [], 0
    while len(out) < n:
        t = make_task(fams[i % len(fams)], i // len(fams), seed)
        i += 1
        if t.split != "train":
            continue
        out.append(genui_example(t))
    return out


def genui_engine_examples(n: int, seed: int = 0, intents=None, open_values: bool = False,
                          compose: bool = False, mix: bool = False, name: bool = False) -> list[Example]:
    """Three in four from the GenUI data engine (`macaronic.datagen.genui`: requests that name values
    and imply components, gold cards verified by schema, integrity and render), one in four from the
    genui suite's train split, shuffled by `seed`. `intents`: the engine's intents to draw from
    (default: its first nine, `FIRST_INTENTS`); `open_values`: the open engine (drawn labels and values);
    `compose`: the composing engine (named buttons, fields and checkboxes added to any intent); `mix`: the
    mixing engine (widgets of several controls, lists drawn as Lists, widgets in other languages); `name`: the
    naming engine (who or where a card is for, quoted titles, values said in a sentence)."""
    from macaronic.datagen.genui import FIRST_INTENTS, examples

    k = n // 4
    out = examples(n - k, seed, intents or FIRST_INTENTS, open_values, compose, mix, name) + genui_examples(k, seed)
    random.Random(seed).shuffle(out)
    return out


def genui_engine_wide_examples(n: int, seed: int = 0) -> list[Example]:
    """`genui_engine` over every intent of the engine: the first nine plus media, decision cards,
    profiles and modal notices (2026-12-05)."""
    from macaronic.datagen.genui import INTENTS

    return genui_engine_examples(n, seed, tuple(INTENTS))


def genui_engine_open_examples(n: int, seed: int = 0) -> list[Example]:
    """The open GenUI engine (2026-12-06): every intent plus polls and named tabs, buttons named with
    labels drawn from a few hundred, numbers and codes redrawn, so cards copy the request."""
    from macaronic.datagen.genui import INTENTS, OPEN_INTENTS

    return genui_engine_examples(n, seed, (*INTENTS, *OPEN_INTENTS), open_values=True)


def genui_engine_compose_examples(n: int, seed: int = 0) -> list[Example]:
    """The composing GenUI engine (2026-12-06): the open engine, and three cards in five also get the
    named buttons, text fields or checkboxes the request adds to its intent."""
    from macaronic.datagen.genui import INTENTS, OPEN_INTENTS

    return genui_engine_examples(n, seed, (*INTENTS, *OPEN_INTENTS), open_values=True, compose=True)


def genui_engine_mix_examples(n: int, seed: int = 0) -> list[Example]:
    """The mixing GenUI engine (2026-12-06, twelfth session): the composing engine, plus widgets that
    string two to four controls and a named button together (three in ten in German, French, Spanish,
    Italian, Portuguese or Dutch) and lists asked as lists, drawn as a List."""
    from macaronic.datagen.genui import INTENTS, MIX_INTENTS, OPEN_INTENTS

    return genui_engine_examples(n, seed, (*INTENTS, *OPEN_INTENTS, *MIX_INTENTS), open_values=True, compose=True,
                                 mix=True)


def genui_engine_name_examples(n: int, seed: int = 0) -> list[Example]:
    """The naming GenUI engine (2026-12-06, thirteenth session): the mixing engine, plus who or where a
    card is for (a caption under its title) or a quoted title, an info card's or stats card's values
    said in a sentence, and rows of up to three named buttons."""
    from macaronic.datagen.genui import INTENTS, MIX_INTENTS, OPEN_INTENTS

    return genui_engine_examples(n, seed, (*INTENTS, *OPEN_INTENTS, *MIX_INTENTS), open_values=True, compose=True,
                                 mix=True, name=True)


def genui_example(t) -> Example:
    """One GenUI task's gold card in the served genui layout."""
    return Example(_conv("genui", t.user_message(), {"role": "assistant", "content": genui_reply(t.gold)}),
                   "genui", f"genui/{t.family}")


GENERATORS = {"chat": chat_examples, "chat_engine": chat_engine_examples, "route": route_examples, "agent": agent_examples,
              "agent_grounded": agent_grounded_examples, "agent_engine": agent_engine_examples,
              "agent_engine_chains": agent_chains_examples,
              "agent_functions": agent_functions_examples,
              "coding": coding_examples, "coding_distill": coding_distill_examples,
              "coding_engine": coding_engine_examples, "genui": genui_examples,
              "genui_engine": genui_engine_examples, "genui_engine_wide": genui_engine_wide_examples,
              "genui_engine_open": genui_engine_open_examples, "genui_engine_compose": genui_engine_compose_examples,
              "genui_engine_mix": genui_engine_mix_examples, "genui_engine_name": genui_engine_name_examples}


SAMPLED = ("chat_engine", "coding_engine")  # generators of committed sampled rows: `n=None` gives each row once


def build(name: str, n: int | None, seed: int = 0, base: str | None = None) -> list[Example]:
    """`n` examples from one generator; `chat` mixes in route-prompt examples (one in four).
    `base` (a registered base name) is what the identity lines name; the other generators ignore it.
    `n=None`: every committed row once, for the generators in `SAMPLED`."""
    if name not in GENERATORS:
        raise ValueError(f"unknown generator {name!r}; choose from {sorted(GENERATORS)}")
    if n is None and name not in SAMPLED:
        raise ValueError(f"{name} makes as many examples as asked; only {SAMPLED} have a fixed set of rows")
    from macaronic.engine.bases import SMALL_BASE, registered

    if name == "coding_distill" and registered(base) != SMALL_BASE:
        raise ValueError("coding_distill is SmolLM2-135M's own passing solutions; for another base use "
                         "--generator coding or regenerate the file with macaronic train distill --base")
    if name == "chat":
        k = n // 4
        mixed = chat_examples(n - k, seed, base) + route_examples(k, seed)
        random.Random(seed).shuffle(mixed)
        return mixed
    return GENERATORS[name](n, seed)


# ---- held-out prompts for sanity checks -------------------------------------------------

def dev_tasks(role: str, n: int, seed: int = 0) -> list:
    """Dev-split tasks of a role's suite (never test): (messages, task) pairs to grade."""
    from macaronic.suites.registry import suite

    s = suite(role)
    return [(list(_conv(role, s.user(t))), t) for t in s.dev(n, seed)]
