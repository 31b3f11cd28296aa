"""Bring your own specialist: what `macaronic specialist add` does with a user's examples file,
as functions. The command (commands/specialist.py) calls them in order:

1. `read_examples` + `holdout`: the user's conversations, one in `every` held out for the check;
2. `write_bundle`: a user harness bundle, the current one plus `roles/<name>.md` and its decoding;
3. `training_examples`: the conversations under the prompt head the server will put before them
   (the one renderer, `macaronic.prompts.prompt_head`), for `macaronic train`;
4. `routing_examples` + `fit_router`: the route (the examples' user turns, labelled with the
   name) added to the shipped routing data, the router refitted on the base's hidden states;
5. `domain_check` + `routing_check`: the do-no-harm rule, measured. The specialist must beat the
   bare base on its own held-out examples (paired 95% interval above zero, graded by the user's
   grader or by `contains_gold`), and the refitted router must not route the shipped specialists'
   dev turns worse than the shipped router does (the interval of the difference not below zero).

Every file it writes lives under the user registry directory (`macaronic.specialist.user_dir()`),
never in the package. Knows nothing about argument parsing or serving.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

from macaronic.datagen.examples import Example


class ExamplesError(ValueError):
    """Every problem in an examples file, reported at once."""


def read_examples(path: str | Path) -> list[list[dict]]:
    """Conversations from a JSONL file: {"messages": [...]} ending with an assistant reply, or
    {"prompt": ..., "completion": ...} (one user turn, one reply). System messages are dropped:
    the harness puts its own head before the conversation, as it will when serving."""
    out, problems = [], []
    for n, line in enumerate(Path(path).read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            d = json.loads(line)
        except json.JSONDecodeError as e:
            problems.append(f"line {n}: not JSON ({e})")
            continue
        if isinstance(d, dict) and isinstance(d.get("prompt"), str) and isinstance(d.get("completion"), str):
            msgs = [{"role": "user", "content": d["prompt"]}, {"role": "assistant", "content": d["completion"]}]
        elif isinstance(d, dict) and isinstance(d.get("messages"), list):
            msgs = [m for m in d["messages"] if isinstance(m, dict) and m.get("role") != "system"]
        else:
            problems.append(f"line {n}: expected {{\"messages\": [...]}} or {{\"prompt\", \"completion\"}}")
            continue
        if len(msgs) < 2 or msgs[-1].get("role") != "assistant" or msgs[-2].get("role") != "user" \
                or not all(isinstance(m.get("content"), str) for m in msgs):
            problems.append(f"line {n}: the conversation must end with a user turn and an assistant reply, "
                            "every message with a string content")
            continue
        out.append([{"role": m["role"], "content": m["content"]} for m in msgs])
    if not out and not problems:
        problems.append("no examples")
    if problems:
        raise ExamplesError(f"{path}:\n" + "\n".join(f"  - {p}" for p in problems))
    return out


def holdout(convs: list, every: int = 5) -> tuple[list, list]:
    """(train, held out): every `every`-th conversation held out, in file order."""
    held = [c for i, c in enumerate(convs) if i % every == every - 1]
    return [c for i, c in enumerate(convs) if i % every != every - 1], held


# ---- the bundle ---------------------------------------------------------------------------------

def role_file(name: str, alias: str, order: int, description: str, instruction: str, convs: list) -> str:
    """roles/<name>.md: front matter, boundary rules (the examples' first requests), system prompt."""
    asks = [c[-2]["content"].strip().splitlines()[0][:80] for c in convs[:3]]
    rules = [f"Requests like {json.dumps(a, ensure_ascii=False)} are {name}." for a in asks]
    return (f"---\nname: {name}\nalias: {alias}\norder: {order}\ndescription: {description}\n---\n"
            f"## Boundary rules\n" + "".join(f"- {r}\n" for r in rules) +
            f"\n## System prompt\n{instruction.strip()}\n")


def write_bundle(src: Path, out: Path, name: str, description: str, instruction: str, convs: list,
                 decoding: dict | None = None) -> Path:
    """The bundle at `src` plus the new role, written to `out` (replaced whole). The alias is the
    next free `L<n>`, the order one past the last role's."""
    from macaronic.harness import load_bundle

    old = load_bundle(src)
    if name in old.role_names:
        raise ValueError(f"the bundle {src} already has a role {name!r}")
    aliases = {r.alias for r in old.roles}
    alias = next(f"L{i}" for i in range(len(old.roles), 10_000) if f"L{i}" not in aliases)
    tmp = out.with_name(out.name + ".tmp")
    if tmp.exists():
        shutil.rmtree(tmp)
    shutil.copytree(src, tmp, ignore=shutil.ignore_patterns(".*", "__pycache__"))
    order = max(r.order for r in old.roles) + 1
    (tmp / "roles" / f"{name}.md").write_text(role_file(name, alias, order, description, instruction, convs))
    dec = json.loads((tmp / "decoding.json").read_text())
    dec.setdefault("roles", {})[name] = decoding or {"temperature": 0.0, "top_p": 1.0, "max_tokens": 512}
    (tmp / "decoding.json").write_text(json.dumps(dec, indent=2) + "\n")
    load_bundle(tmp)  # refuse a broken bundle before it replaces the old one
    if out.exists():
        shutil.rmtree(out)
    tmp.replace(out)
    return out


def drop_role(bundle_dir: Path, name: str) -> None:
    """Remove a user role from a user bundle (its file and its decoding)."""
    (bundle_dir / "roles" / f"{name}.md").unlink(missing_ok=True)
    p = bundle_dir / "decoding.json"
    dec = json.loads(p.read_text())
    dec.get("roles", {}).pop(name, None)
    p.write_text(json.dumps(dec, indent=2) + "\n")


# ---- training and routing data --------------------------------------------------------------

def training_examples(bundle, name: str, convs: list) -> list[Example]:
    """Each conversation under the served prompt head of `name` (no tools: a user specialist
    outputs text)."""
    from macaronic.prompts import prompt_head

    head = prompt_head(bundle, name, None)
    return [Example(tuple(head + c), name, f"user/{name}") for c in convs]


def routing_examples(name: str, convs: list, split: str) -> list[dict]:
    """The conversations' last user turns (with the earlier turns), labelled `name`, in the shape
    of `macaronic.router.data`."""
    out = []
    for i, c in enumerate(convs):
        msgs = c[:-1]
        out.append({"id": f"user/{name}/{split}/{i}", "messages": msgs, "label": name, "family": f"user/{name}",
                    "split": split, "group": f"user/{name}#{split}{i}",
                    "kind": "multiturn" if len(msgs) > 1 else "template"})
    return out


def limited(examples: list[dict], per_label: int | None) -> list[dict]:
    """At most `per_label` examples of each label, spread evenly over the list (None: all)."""
    if not per_label:
        return examples
    by: dict[str, list[dict]] = {}
    for e in examples:
        by.setdefault(e["label"], []).append(e)
    keep = set()
    for rows in by.values():
        step = max(1, len(rows) // per_label)
        keep |= {id(r) for r in rows[::step][:per_label]}
    return [e for e in examples if id(e) in keep]


def fit_router(llm, bundle, extra_train: list[dict], extra_dev: list[dict], per_label: int | None = None,
               log=None, cache: dict | None = None):
    """The router refitted on the shipped routing data (at most `per_label` turns per label and
    split) plus the new specialist's turns, bound to `llm` (its base and adapters). `cache`
    ({"features": {}, "head": {}}) keeps the bare base's features of each text for later scoring."""
    from macaronic.router.data import router_fit_data
    from macaronic.router.shipped import fit_state

    train, dev = router_fit_data()
    train, dev = limited(train, per_label) + extra_train, limited(dev, per_label) + extra_dev
    cache = {"features": {}, "head": {}} if cache is None else cache
    return fit_state(llm, bundle, data=(train, dev), log=log, features=cache["features"], head_cache=cache["head"])


# ---- the do-no-harm check -------------------------------------------------------------------

def _norm(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip().lower()


def contains_gold(example: list[dict], reply: str) -> float:
    """The default grader: 1.0 when the reply contains the example's reply (case and spacing
    ignored), else 0.0."""
    return float(_norm(example[-1]["content"]) in _norm(reply))


def domain_check(llm, bundle, name: str, held: list, grader=contains_gold, max_tokens: int = 128) -> dict:
    """Greedy replies of the bare base and of the specialist's adapter to the held-out requests,
    under the same served view, graded; the paired 95% interval of adapter - base."""
    from macaronic.contract.stats import paired_bootstrap
    from macaronic.engine.sampling import SamplingParams
    from macaronic.prompts import prompt_head

    head = prompt_head(bundle, name, None)
    rows = []
    for c in held:
        ids = llm.encode_chat(head + c[:-1])
        row = {"request": c[-2]["content"]}
        for label, adapter in (("base", None), ("adapter", name)):
            text, _ = llm.submit(ids, adapter, SamplingParams(max_tokens=max_tokens, temperature=0)).result()
            row[label] = float(grader(c, text))
            row[f"{label}_text"] = text[:200]
        rows.append(row)
    delta, ci = paired_bootstrap([r["adapter"] for r in rows], [r["base"] for r in rows])
    n = len(rows)
    return {"n": n, "base": sum(r["base"] for r in rows) / max(1, n),
            "adapter": sum(r["adapter"] for r in rows) / max(1, n), "delta": delta, "ci95": ci,
            "passed": ci is not None and ci[0] > 0, "rows": rows}


def route_hits(router, examples: list[dict], cache: dict | None = None) -> list[float]:
    """1.0 where the router's decision is the example's label. `cache`: as for `fit_router` (the
    features read the bare base, so the router being replaced and its refit share them)."""
    cache = cache or {"features": None, "head": None}
    decisions = router.route_many([e["messages"] for e in examples], features=cache["features"],
                                  head_cache=cache["head"])
    return [float(d.role == e["label"]) for d, e in zip(decisions, examples)]


def routing_check(before: list[float], after: list[float], new_hits: list[float]) -> dict:
    """The shipped specialists' dev turns routed by the shipped router (`before`) and by the
    refitted one (`after`): the refit passes when the paired 95% interval of after - before is not
    entirely below zero. `new_hits`: the refitted router on the new specialist's held-out turns."""
    from macaronic.contract.stats import paired_bootstrap

    delta, ci = paired_bootstrap(after, before)
    return {"n": len(after), "shipped_router": sum(before) / max(1, len(before)),
            "refitted_router": sum(after) / max(1, len(after)), "delta": delta, "ci95": ci,
            "new_route_accuracy": sum(new_hits) / max(1, len(new_hits)), "new_n": len(new_hits),
            "passed": ci is not None and ci[1] >= 0}
