"""The specialist registry: one entry per specialist, as data. Serving, routing data, training, the
contract and the benchmarks ask it which specialists exist and what each outputs, instead of
keeping their own tuple of role names or branching on a name.

An entry holds what is not already in the harness bundle. The bundle's `roles/<name>.md` holds the
instruction (system prompt, description, boundary rules, `without_adapter`) and `decoding.json` the
decoding, keyed by the same name; the registry does not copy them. An entry adds:

- `output`: what a reply is. "text"; "tool_calls" (the prompt head lists the tools, replies parse
  as calls); "card" (one GenUI JSON object, decoded under the card grammar and closed).
- `engine`: the data engine, a generator name of `macaronic.train.builders.GENERATORS` (what
  `macaronic train NAME` builds by default), and `max_turn`, the token cap of a training turn.
  `data_engine`: the verified engine at scale (`agent_engine`, `genui_engine_wide`, `chat_engine`,
  `coding_engine`), from which evolve's `data_engine` operator draws fresh examples.
- `suite`: its task source behind the one Task interface, with grader and reward, as
  "module:attribute" (a `macaronic.suites.registry.Suite`), resolved by `resolve`.
- `routing`: where its routing examples come from (the built-ins': `router/families.py` and
  `router/handwritten.txt`, labelled by name; a user specialist's: its examples file).
- what the evolution loop and the training comparisons do with it, each optional: `failures`, the
  function that labels a failing graded row of its suite (`evolve/failures.py`'s clusters; none:
  "failed"); `failure_data`, the failure-data skills evolve's `failure_data` operator proposes for
  its adapter (an `evolve.operators.FailureData`); `grpo`, whether its suite's reward is
  verifiable, so evolve proposes GRPO steps; `devscore`, its dev scorer (a
  `train.devscore.Scorer`: metrics, scoring, held-out instances); `hints`, {failure label: one-line
  instruction} that evolve's prompt-variant operator adds to its role's prompt.

Built-in entries ship with the package (`BUILTIN`); user entries live in a JSON file under
`user_dir()` (`$MACARONIC_SPECIALISTS`, else `$MACARONIC_HOME/specialists`), written by
`macaronic specialist add` with the adapter, the bundle and the router state it fitted. The module
sits in the bottom layer: it imports nothing from the package, and knows nothing about models.
"""

from __future__ import annotations

import importlib
import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path

OUTPUTS = ("text", "tool_calls", "card")
USER_FILE = "registry.json"


@dataclass(frozen=True)
class Specialist:
    name: str
    output: str = "text"
    engine: str | None = None  # a generator of macaronic.train.builders.GENERATORS
    max_turn: int = 384  # training turns longer than this many tokens are skipped
    suite: str | None = None  # "module:attribute" of its Suite (tasks, grader, reward)
    routing: str = ""  # where its routing examples come from
    # evolve and dev scoring, each a "module:attribute" resolved on use (see the module's docstring)
    failures: str | None = None  # labels a failing graded row: (row) -> [label]
    failure_data: str | None = None  # an evolve.operators.FailureData
    grpo: bool = False  # its suite's reward is verifiable: evolve proposes GRPO steps on its adapter
    devscore: str | None = None  # a train.devscore.Scorer
    hints: str | None = None  # {failure label: one-line instruction for its prompt}
    # its verified data engine (a generator too: generated worlds, checked cards, the base's own passing
    # replies), which evolve's data_engine operator draws fresh examples from
    data_engine: str | None = None
    # user specialists only: the file they were trained from, the grader ("module:function"), the
    # base they were trained for, the adapter directory (relative to user_dir())
    examples: str | None = None
    grader: str | None = None
    base: str | None = None
    adapter: str | None = None
    description: str = ""  # the adapter's one line (macaronic.json); the router reads the bundle's
    builtin: bool = field(default=False, compare=False)


# The four shipped specialists, in the bundle's order (chat L0, agent L1, coding L2, genui L3):
# every reader that iterates the built-ins iterates in this order, as the tuples it replaced did.
_FAMILIES = "router/families.py and router/handwritten.txt, label "
_EVOLVE = "macaronic.evolve."
BUILTIN: tuple[Specialist, ...] = (
    Specialist("chat", "text", "chat", 384, "macaronic.suites.registry:CHAT", _FAMILIES + "chat",
               failures=_EVOLVE + "failures:chat_labels", hints=_EVOLVE + "failures:CHAT_HINTS", data_engine="chat_engine",
               description="Conversation, general knowledge, explanations and questions about the assistant "
                           "itself; also reads the route prompt.", builtin=True),
    Specialist("agent", "tool_calls", "agent", 384, "macaronic.suites.registry:AGENT", _FAMILIES + "agent",
               failures=_EVOLVE + "failures:agent_labels", hints=_EVOLVE + "failures:AGENT_HINTS", failure_data=_EVOLVE + "operators:AGENT_DATA",
               devscore="macaronic.train.devscore:AGENT", data_engine="agent_engine",
               description="Acts on the user's calendar, reminders, contacts, notes and orders through tool calls.",
               builtin=True),
    Specialist("coding", "text", "coding", 384, "macaronic.suites.registry:CODING", _FAMILIES + "coding",
               failures=_EVOLVE + "failures:coding_labels", hints=_EVOLVE + "failures:CODING_HINTS", grpo=True, devscore="macaronic.train.devscore:CODING",
               data_engine="coding_engine",
               description="Writes, explains and fixes code: small correct functions in fenced blocks.", builtin=True),
    Specialist("genui", "card", "genui", 768, "macaronic.suites.registry:GENUI", _FAMILIES + "genui",
               failures=_EVOLVE + "failures:genui_labels", hints=_EVOLVE + "failures:GENUI_HINTS", failure_data=_EVOLVE + "operators:GENUI_DATA",
               data_engine="genui_engine_wide",  # every intent (2026-12-05); genui_engine: the first nine
               description="Answers with one JSON object holding A2UI v0.8 messages that render an interactive card.",
               builtin=True),
)
BUILTIN_NAMES: tuple[str, ...] = tuple(s.name for s in BUILTIN)


def builtin(name: str) -> Specialist:
    for s in BUILTIN:
        if s.name == name:
            return s
    raise KeyError(f"no built-in specialist {name!r} (have {', '.join(BUILTIN_NAMES)})")


# ---- user specialists -------------------------------------------------------------------------

def user_dir() -> Path:
    """Where user specialists live: $MACARONIC_SPECIALISTS, else $MACARONIC_HOME/specialists (the
    same home as imported bases and serving state)."""
    explicit = os.environ.get("MACARONIC_SPECIALISTS")
    if explicit:
        return Path(explicit)
    return Path(os.environ.get("MACARONIC_HOME") or Path.home() / ".cache" / "macaronic") / "specialists"


def load_user(root: str | Path | None = None) -> tuple[Specialist, ...]:
    """The user entries recorded in ROOT/registry.json (none when there is no file)."""
    path = Path(root or user_dir()) / USER_FILE
    try:
        st = path.stat()
        stamp = (st.st_mtime_ns, st.st_size)
    except FileNotFoundError:
        return ()
    cached = _USER_CACHE.get(str(path))
    if cached is not None and cached[0] == stamp:
        return cached[1]
    entries = _parse_user(path, json.loads(path.read_text()))
    _USER_CACHE[str(path)] = (stamp, entries)
    return entries


_USER_CACHE: dict[str, tuple[tuple[int, int], tuple[Specialist, ...]]] = {}  # path -> ((mtime, size), entries): serving asks per turn


def _parse_user(path: Path, doc: dict) -> tuple[Specialist, ...]:
    out, errors = [], []
    for i, e in enumerate(doc.get("specialists", [])):
        try:
            s = Specialist(**e)
        except TypeError as err:
            errors.append(f"entry {i}: {err}")
            continue
        if s.output not in OUTPUTS:
            errors.append(f"{s.name}: output must be one of {OUTPUTS}, got {s.output!r}")
        if s.name in BUILTIN_NAMES:
            errors.append(f"{s.name}: a built-in specialist's name")
        out.append(s)
    if errors:
        raise ValueError(f"invalid specialist registry {path}:\n" + "\n".join(f"  - {e}" for e in errors))
    return tuple(out)


def save_user(entries, root: str | Path | None = None) -> Path:
    """Write the user entries (sorted by name) to ROOT/registry.json."""
    root = Path(root or user_dir())
    root.mkdir(parents=True, exist_ok=True)
    rows = [{k: v for k, v in asdict(s).items() if k != "builtin"} for s in sorted(entries, key=lambda s: s.name)]
    path = root / USER_FILE
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({"format": 1, "specialists": rows}, indent=2, sort_keys=True) + "\n")
    tmp.replace(path)
    return path


def all_specialists(root: str | Path | None = None) -> tuple[Specialist, ...]:
    """The built-ins, then the user's entries."""
    return BUILTIN + load_user(root)


def get(name: str, root: str | Path | None = None) -> Specialist:
    for s in all_specialists(root):
        if s.name == name:
            return s
    raise KeyError(f"no specialist {name!r}")


def find(name: str | None) -> Specialist | None:
    """The entry of `name`, or None where the registry does not know it (a role that only a custom
    bundle defines, a contract suite kind such as "mixed") or the user registry does not read."""
    for s in BUILTIN:
        if s.name == name:
            return s
    try:
        return next((s for s in load_user() if s.name == name), None)
    except (ValueError, OSError):
        return None


def output_of(name: str) -> str:
    """What a specialist's reply is. A name the registry does not know (a role that only a
    custom bundle defines) answers in text."""
    s = find(name)
    return s.output if s else "text"


def lookup(name: str | None, what: str):
    """The object entry field `what` ("failures", "failure_data", "devscore", "hints") of `name` names,
    resolved; None when there is no such entry or the field is empty."""
    s = find(name)
    ref = getattr(s, what) if s else None
    return resolve(ref) if ref else None


def resolve(ref: str):
    """The object a "module:attribute" reference names (a suite, a grader)."""
    module, sep, attr = ref.partition(":")
    if not sep or not module or not attr:
        raise ValueError(f"expected 'module:attribute', got {ref!r}")
    obj = importlib.import_module(module)
    for part in attr.split("."):
        obj = getattr(obj, part)
    return obj
