"""`macaronic specialist`: bring your own specialist, list and remove them.

    macaronic specialist add sql --examples sql.jsonl [--grader mymod:grade] [--description ...]
    macaronic specialist list
    macaronic specialist remove sql

`add` trains a turn-mode LoRA on the examples (all but one in five; the rest are held out), adds the
route (the examples' requests, labelled NAME) to the routing data and refits the router, runs the
do-no-harm check (the adapter must beat the bare base on the held-out examples, paired 95% interval
above zero, and the refitted router must not route the shipped specialists worse than the router it
replaces), and only then registers the specialist. `macaronic serve` on the same base serves it.

Everything goes under the user registry directory ($MACARONIC_SPECIALISTS, else
$MACARONIC_HOME/specialists; `macaronic serve` reads the same), one folder per base:

    registry.json                  the user entries (macaronic.specialist)
    <base>/bundle/                 the shipped harness bundle plus roles/<name>.md
    <base>/router/                 the refitted router state
    <base>/adapters/<name>/        the adapter (PEFT directory, macaronic.json, history)
    <base>/examples/<name>.jsonl   the examples it was trained on; checks/<name>.json the check

The examples file: one JSON object a line, {"messages": [..., user, assistant]} or
{"prompt": "...", "completion": "..."}. The grader: a function (conversation, reply) -> score in
[0, 1], the conversation being the example's messages (its last one the gold reply).
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
import time
from pathlib import Path

from macaronic.engine.bases import BASE_HELP

NAME = re.compile(r"^[a-z][a-z0-9_]{0,31}$")


# The registry's optional evolve fields `add` takes as flags, and what each names.
EVOLVE_FIELDS = {
    "failures": "labels a failing graded row: (row) -> [label] (default: every failure is 'failed')",
    "hints": "{failure label: one-line instruction} evolve's prompt-variant operator adds to its prompt",
    "failure_data": "an evolve.operators.FailureData: the skills evolve's failure_data operator trains",
    "devscore": "a train.devscore.Scorer: its dev scorer for the training comparisons",
}


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="macaronic specialist", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    a = sub.add_parser("add", help="train, route, check and register a specialist from an examples file")
    a.add_argument("name", help="lowercase letters, digits and _ (not a built-in's name)")
    a.add_argument("--examples", type=Path, required=True, help="JSONL of conversations (see above)")
    a.add_argument("--grader", metavar="MODULE:FUNCTION",
                   help="grades a held-out reply, (conversation, reply) -> [0, 1] (default: the reply contains "
                        "the example's reply, case and spacing ignored)")
    a.add_argument("--description", help="one line the router's prompt and the UI show (default: "
                                         "'Answers requests like: <first example>')")
    a.add_argument("--instruction", help="the system prompt before its turns (default: one line naming it)")
    a.add_argument("--base", default=None, help=BASE_HELP)
    a.add_argument("--holdout-every", type=int, default=5, metavar="K",
                   help="hold out every K-th example for the check (default 5)")
    a.add_argument("--steps", type=int, default=60)
    a.add_argument("--batch", type=int, default=4)
    a.add_argument("--rank", type=int, default=8)
    a.add_argument("--lr", type=float, default=1e-3)
    a.add_argument("--threads", type=int, default=1, help="torch threads while training (default 1)")
    a.add_argument("--route-limit", type=int, default=None, metavar="N",
                   help="refit the router on at most N shipped routing turns per specialist and split "
                        "(default: all; a quick try or a test passes a few dozen); the check then compares "
                        "with a router fitted on the same turns without the new route")
    a.add_argument("--max-tokens", type=int, default=128, help="reply cap in the check (default 128)")
    a.add_argument("--force", action="store_true", help="register even when the do-no-harm check fails")
    evo = a.add_argument_group("what the evolution loop does with it (each optional, MODULE:ATTRIBUTE; see "
                               "macaronic/specialist.py)")
    for flag, what in EVOLVE_FIELDS.items():
        evo.add_argument(f"--{flag.replace('_', '-')}", metavar="MODULE:ATTRIBUTE", help=what)
    evo.add_argument("--grpo", action="store_true", help="its grader's reward is verifiable: evolve proposes GRPO steps")
    sub.add_parser("list", help="the built-in and user specialists")
    r = sub.add_parser("remove", help="unregister a user specialist, delete its files and refit the router")
    r.add_argument("name")
    r.add_argument("--route-limit", type=int, default=None, metavar="N", help="as for add")
    return p


T0 = time.monotonic()


def log(msg: str) -> None:
    print(f"macaronic specialist [{time.monotonic() - T0:.0f}s]: {msg}", file=sys.stderr, flush=True)


def base_name(base: str | None) -> str:
    from macaronic.engine.bases import registered

    name = registered(base)
    if name is None:
        raise ValueError("a user specialist is trained for a registered base (--base NAME), not a model directory")
    return name


def stored_routes(root: Path, base: str, entries) -> tuple[list[dict], list[dict]]:
    """(train, dev) routing examples of the user specialists already registered for `base`."""
    from macaronic.train.user_specialist import holdout, read_examples, routing_examples

    train, dev = [], []
    for s in entries:
        if s.base == base:
            t, h = holdout(read_examples(root / base / "examples" / f"{s.name}.jsonl"))
            train += routing_examples(s.name, t, "train")
            dev += routing_examples(s.name, h, "dev")
    return train, dev


def load_llm_with(base: str, root: Path, names: list[str]):
    """The base with its shipped specialists and the named user adapters."""
    from macaronic.engine.llm import EngineConfig, load_default_llm

    llm = load_default_llm(EngineConfig.from_env(), base=base)
    for n in names:
        llm.add_adapter(root / base / "adapters" / n)
    return llm


def add(a, root: Path) -> int:
    from macaronic import specialist as reg
    from macaronic.commands import train as train_cmd
    from macaronic.datagen.examples import write_jsonl
    from macaronic.harness import DEFAULT_BUNDLE, load_bundle
    from macaronic.router.data import router_fit_data
    from macaronic.router.shipped import router_for, write_shipped
    from macaronic.train import user_specialist as us

    name = a.name
    if not NAME.match(name):
        raise ValueError(f"name {name!r}: lowercase letters, digits and _, starting with a letter")
    if name in reg.BUILTIN_NAMES:
        raise ValueError(f"{name!r} is a built-in specialist")
    entries = reg.load_user(root)
    if any(s.name == name for s in entries):
        raise ValueError(f"{name!r} is already registered; `macaronic specialist remove {name}` first")
    try:
        grader = reg.resolve(a.grader) if a.grader else us.contains_gold
    except (ImportError, AttributeError) as e:
        raise ValueError(f"--grader {a.grader}: {e}") from None
    evolve = {f: getattr(a, f) for f in EVOLVE_FIELDS}
    for f, ref in evolve.items():  # each must resolve now, not when a loop first reads it
        if ref:
            try:
                reg.resolve(ref)
            except (ImportError, AttributeError, ValueError) as e:
                raise ValueError(f"--{f.replace('_', '-')} {ref}: {e}") from None
    base = base_name(a.base)
    convs = us.read_examples(a.examples)
    train, held = us.holdout(convs, a.holdout_every)
    if len(held) < 2 or len(train) < 2:
        raise ValueError(f"{len(convs)} examples: need at least {2 * a.holdout_every} "
                         f"(every {a.holdout_every}th is held out for the check)")
    others = [s.name for s in entries if s.base == base]
    here = root / base
    work = root / ".staging" / name
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    t0 = time.monotonic()

    # 1. the bundle with the new role
    src = here / "bundle" if (here / "bundle").is_dir() else DEFAULT_BUNDLE
    desc = a.description or f"Answers requests like: {train[0][-2]['content'].strip().splitlines()[0][:80]}"
    instruction = a.instruction or f"You are the {name} specialist. Answer in the style and format of your training."
    bundle = load_bundle(us.write_bundle(src, work / "bundle", name, desc, instruction, train))

    # 2. the adapter
    data = write_jsonl(work / "train.jsonl", us.training_examples(bundle, name, train))
    targs = train_cmd.parser().parse_args([
        name, "--data", str(data), "--out", str(work / "adapter"), "--mode", "turn", "--rank", str(a.rank),
        "--steps", str(a.steps), "--batch", str(a.batch), "--lr", str(a.lr), "--threads", str(a.threads),
        "--save-every", "0", "--description", desc, "--no-progress", "--base", base])
    log(f"training {name} on {len(train)} examples ({a.steps} steps x {a.batch}), {len(held)} held out")
    train_cmd.run(targs)

    # 3. the route: the router it replaces, scored before the new adapter is loaded
    llm = load_llm_with(base, root, others)
    try:
        dev_builtin = us.limited(router_fit_data()[1], a.route_limit)
        old_bundle = load_bundle(src)
        cache = {"features": {}, "head": {}}  # the bare base's features of each text, computed once
        t_old, d_old = stored_routes(root, base, entries)
        if a.route_limit:  # the router it replaces saw every turn: compare with one fitted on the same few
            log(f"fitting the comparison router on at most {a.route_limit} turns per specialist and split")
            old = us.fit_router(llm, old_bundle, t_old, d_old, a.route_limit, log, cache)
        else:
            old = router_for(llm, old_bundle, state_dir=here / "router" if others else None)
        before = us.route_hits(old, dev_builtin, cache)
        llm.add_adapter(work / "adapter", name)
        new_train = us.routing_examples(name, train, "train")
        new_dev = us.routing_examples(name, held, "dev")
        log(f"refitting the router ({len(dev_builtin)} shipped dev turns checked)")
        router = us.fit_router(llm, bundle, t_old + new_train, d_old + new_dev, a.route_limit, log, cache)
        write_shipped(router, work / "router")
        after = us.route_hits(router, dev_builtin, cache)
        routing = us.routing_check(before, after, us.route_hits(router, new_dev, cache))

        # 4. do no harm on its own domain
        log(f"checking {name} against the bare base on {len(held)} held-out examples")
        domain = us.domain_check(llm, bundle, name, held, grader, a.max_tokens)
    finally:
        llm.close()
    report = {"name": name, "base": base, "domain": domain, "routing": routing,
              "passed": domain["passed"] and routing["passed"], "forced": bool(a.force),
              "seconds": round(time.monotonic() - t0, 1)}
    (work / "check.json").write_text(json.dumps(report, indent=2) + "\n")
    print(summary(report))
    if not report["passed"] and not a.force:
        log(f"not registered: the do-no-harm check failed (details in {work / 'check.json'}; --force registers anyway)")
        return 1

    # 5. register: files into place, then the entry
    (here / "adapters").mkdir(parents=True, exist_ok=True)
    (here / "examples").mkdir(exist_ok=True)
    (here / "checks").mkdir(exist_ok=True)
    for part in ("bundle", "router"):
        if (here / part).exists():
            shutil.rmtree(here / part)
        (work / part).replace(here / part)
    (work / "adapter").replace(here / "adapters" / name)
    shutil.copyfile(a.examples, here / "examples" / f"{name}.jsonl")
    (work / "check.json").replace(here / "checks" / f"{name}.json")
    entry = reg.Specialist(name, "text", max_turn=384, routing=f"examples/{name}.jsonl",
                           examples=f"{base}/examples/{name}.jsonl", grader=a.grader, base=base,
                           adapter=f"{base}/adapters/{name}", description=desc, grpo=a.grpo,
                           **{f: ref for f, ref in evolve.items() if ref})
    reg.save_user([*entries, entry], root)
    shutil.rmtree(work, ignore_errors=True)
    log(f"registered {name} for {base} in {root}; `macaronic serve --base {base}` serves it")
    return 0


def summary(report: dict) -> str:
    d, r = report["domain"], report["routing"]

    def ci(x):
        return "n/a" if x is None else f"[{x[0]:+.3f}, {x[1]:+.3f}]"

    return "\n".join([
        f"do-no-harm check for {report['name']} on {report['base']}: {'passed' if report['passed'] else 'FAILED'}",
        f"  own held-out examples (n={d['n']}): bare base {d['base']:.3f}, with the adapter {d['adapter']:.3f}, "
        f"difference {ci(d['ci95'])} ({'above zero' if d['passed'] else 'not above zero'})",
        f"  shipped specialists' dev turns (n={r['n']}): routed right {r['shipped_router']:.3f} before, "
        f"{r['refitted_router']:.3f} after, difference {ci(r['ci95'])} ({'not below zero' if r['passed'] else 'below zero'})",
        f"  its own held-out requests routed to it: {r['new_route_accuracy']:.3f} (n={r['new_n']})"])


def remove(a, root: Path) -> int:
    from macaronic import specialist as reg
    from macaronic.harness import load_bundle
    from macaronic.router.shipped import write_shipped
    from macaronic.train import user_specialist as us

    entries = reg.load_user(root)
    gone = next((s for s in entries if s.name == a.name), None)
    if gone is None:
        raise ValueError(f"no user specialist {a.name!r} in {root}"
                         + (" (a built-in cannot be removed)" if a.name in reg.BUILTIN_NAMES else ""))
    rest = [s for s in entries if s is not gone]
    here = root / gone.base
    reg.save_user(rest, root)  # unregistered first: a failure below leaves files, never a dangling entry
    shutil.rmtree(here / "adapters" / gone.name, ignore_errors=True)
    (here / "examples" / f"{gone.name}.jsonl").unlink(missing_ok=True)
    (here / "checks" / f"{gone.name}.json").unlink(missing_ok=True)
    left = [s.name for s in rest if s.base == gone.base]
    if not left:  # serving falls back to the shipped bundle and router
        for part in ("bundle", "router"):
            shutil.rmtree(here / part, ignore_errors=True)
        log(f"removed {gone.name}; no user specialist left for {gone.base}")
        return 0
    us.drop_role(here / "bundle", gone.name)
    llm = load_llm_with(gone.base, root, left)
    try:
        t, d = stored_routes(root, gone.base, rest)
        write_shipped(us.fit_router(llm, load_bundle(here / "bundle"), t, d, a.route_limit, log), here / "router")
    finally:
        llm.close()
    log(f"removed {gone.name}; the router was refitted for {', '.join(left)}")
    return 0


def list_(root: Path) -> int:
    from macaronic import specialist as reg

    rows = [(s.name, s.output, "built-in", "", s.description) for s in reg.BUILTIN]
    rows += [(s.name, s.output, "user", s.base or "", s.description) for s in reg.load_user(root)]
    w = [max(len(r[i]) for r in rows) for i in range(4)]
    for r in rows:
        print("  ".join(x.ljust(w[i]) for i, x in enumerate(r[:4])) + "  " + r[4])
    return 0


def main(argv: list[str]) -> int:
    a = parser().parse_args(argv)
    from macaronic.specialist import user_dir

    root = user_dir()
    try:
        if a.cmd == "add":
            return add(a, root)
        if a.cmd == "remove":
            return remove(a, root)
        return list_(root)
    except (ValueError, FileNotFoundError, KeyError) as e:
        print(f"macaronic specialist: error: {e}", file=sys.stderr)
        return 2
