"""Build a successor pair from a champion and its graded train experience.

Steps (a generation's plan names which run, in order):

  rft           rejection-sampling fine-tuning: each specialist's graded successes (deduplicated,
                rendered by the one renderer in the served layout) join a replay of the data the champion's
                adapter was trained on (rebuilt from the generator its metadata records); a role
                with at least budget.min_successes successes is retrained by `macaronic train` in
                a separate process with the champion adapter's recorded mode, rank, batch, lr and
                steps (budget.train_steps overrides the steps). `macaronic train` has no warm
                start, so this is a retrain, not a continuation.
  router_refit  the router is refitted from logged outcomes (each routed turn's correct role, as
                the grader knows it, and the role each forced suite graded its tasks on), then
                the routing policy is chosen on the dev split. {"served": SHA} adds the routing rows
                read from served corrections (evolve/served.py, `served/routing-SHA.jsonl`).
  harness_edit  a proposed edit to a harness file, applied as given (a deep merge into a JSON
                file, a line appended, a text replacement, or a whole new text).
  failure_data  targeted training data for a failing skill (evolve/failure_data.py), warm start.
  grpo          a few GRPO steps on a verifiable reward (`macaronic train grpo`), warm start.

`rft` with {"warm": true} continues from the champion's adapter (`--init-adapter`) for a few
steps on the successes (hinted ones included, STaR-style) plus a small replay.

Only train and dev tasks are read, through the split loader as the `trainer`. The result is a
new directory: harness copy (edited), retrained adapters, data files, pair manifest. Returns the
manifest and a list of what changed; prints nothing except through `log`.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path

from macaronic.contract.runner import ROUTER_STATE_DIR, default_tools, for_renderer
from macaronic.prompts import conversation
from macaronic.evolve.config import step_spec
from macaronic.pairs.ids import PairManifest
from macaronic.specialist import output_of


def data_manifest_sha256(files: list[Path]) -> str | None:
    if not files:
        return None
    h = hashlib.sha256()
    for f in sorted(files, key=lambda p: p.name):
        h.update(f"{f.name}\0{hashlib.sha256(f.read_bytes()).hexdigest()}\n".encode())
    return h.hexdigest()


def build_successor(champion: PairManifest, rows: list[dict], steps: tuple, out: Path, ctx: dict,
                    log=lambda msg: None) -> tuple[PairManifest, list[dict], dict]:
    """(successor manifest, changes, training config). `out` must not exist yet; it is built in
    out.tmp and renamed at the end, so a crash leaves either nothing or the whole candidate."""
    tmp = out.with_name(out.name + ".tmp")
    if tmp.exists():
        shutil.rmtree(tmp)  # a half-built candidate from a crash: build it again
    (tmp / "data").mkdir(parents=True)
    shutil.copytree(champion.harness["path"], tmp / "harness", ignore=shutil.ignore_patterns("__pycache__"))
    adapters = {r: a["path"] for r, a in champion.adapters.items()}
    changes, config, data_files = [], {"budget": asdict(ctx["budget"]), "steps": list(steps)}, []
    for step in steps:
        name, opts = step_spec(step)
        if name == "rft":
            ch, files = rft(champion, rows, tmp, ctx, adapters, log, opts)
            changes += ch
            data_files += files
        elif name == "failure_data":
            ch, files = failure_data(champion, tmp, ctx, adapters, log, opts)
            changes.append(ch)
            data_files += files
        elif name == "grpo":
            changes.append(grpo(champion, tmp, ctx, adapters, log, opts))
        elif name == "data_engine":
            ch, files = data_engine(champion, tmp, ctx, adapters, log, opts)
            changes.append(ch)
            data_files += files
        elif name == "router_refit":
            ch, files = router_refit(rows, tmp, ctx, log, shipped_data=bool(opts.get("shipped_data", False)),
                                     served=opts.get("served"))
            changes.append(ch)
            data_files += files
        elif name == "harness_edit":
            changes.append(harness_edit(tmp / "harness", opts))
        elif name == "adopt":
            ch, files = adopt(champion, tmp, adapters, opts)
            changes += ch
            data_files += files
        else:
            raise ValueError(f"unknown evolve step {name!r}")
    final_adapters = {r: (p if not str(p).startswith(str(tmp)) else str(out / Path(p).relative_to(tmp)))
                      for r, p in adapters.items()}
    (tmp / "changes.json").write_text(json.dumps({"changes": changes, "training_config": config}, indent=2) + "\n")
    tmp.rename(out)
    shutil.rmtree(out.with_name(out.name + ".ckpt"), ignore_errors=True)  # `_train`'s work directories
    files = tuple(str(out / f.relative_to(tmp)) if f.is_relative_to(tmp) else str(f) for f in data_files)
    m = PairManifest.build(champion.base, final_adapters, out / "harness", data=files,
                           base_fp=champion.base_fingerprint)
    m.save(out / "pair.json")
    return m, changes, config


def adopt(champion: PairManifest, tmp: Path, adapters: dict, opts: dict) -> tuple[list[dict], list[Path]]:
    """A trained part of an already built candidate from the same champion (a stack's training
    steps: the same step with the same data and seed would train the same adapter again). opts:
    {"dir": the candidate's directory, "step": its step}. Takes the adapters that step changed
    (the router state for router_refit), its data files and its change records."""
    src = Path(opts["dir"])
    part = PairManifest.load(src / "pair.json")
    name, sopts = step_spec(opts["step"])
    recorded = json.loads((src / "changes.json").read_text())["changes"]
    mine = [c for c in recorded if c.get("step") == name]
    if name == "router_refit":
        for rel in (ROUTER_STATE_DIR, "router.json"):
            s, d = Path(part.harness["path"]) / rel, tmp / "harness" / rel
            if d.is_dir():
                shutil.rmtree(d)
            (shutil.copytree if s.is_dir() else shutil.copy2)(s, d)
    else:
        roles = sopts.get("roles") or ([sopts["role"]] if sopts.get("role") else list(part.adapters))
        for r in roles:
            if r in part.adapters and part.adapters[r]["id"] != (champion.adapters.get(r) or {}).get("id"):
                adapters[r] = part.adapters[r]["path"]
    prefix = {"rft": "rft-", "failure_data": "failure-", "router_refit": "router-", "data_engine": "engine-"}.get(name)
    files = [Path(f) for f in part.data if prefix and Path(f).name.startswith(prefix)]
    return [{**c, "adopted_from": src.name} for c in mine], files


# ---- rft ---------------------------------------------------------------------------------

def successes(contract, bundle, rows: list[dict]) -> dict[str, list[dict]]:
    """role -> deduplicated SFT examples from graded successes (whole replies or routed turns)."""
    out: dict[str, dict[str, dict]] = {}

    def add(role: str, messages: list[dict], source: str, routed: bool = False, hinted: bool = False):
        # the served layout (the one renderer), with the tools the turn was shown
        tools = default_tools(None if routed else role, None)
        convo = conversation(bundle, role, [for_renderer(m, bundle) for m in messages], tools)
        key = hashlib.sha256(json.dumps(convo, sort_keys=True).encode()).hexdigest()
        out.setdefault(role, {})[key] = {"messages": convo, "role": role, "source": source,
                                         **({"hinted": True} if hinted else {})}

    for r in rows:
        spec = contract.suite(r["suite"])
        if spec.kind == "mixed":
            msgs, turn = r["messages"], 0
            for i, m in enumerate(msgs):
                if m["role"] == "assistant":
                    t = r["detail"]["turns"][turn]
                    if t["route_ok"] and t["answer_ok"]:
                        add(t["gold"], msgs[: i + 1], f"mixed:{r['family']}", routed=True)
                    turn += 1
        elif r["passed"] and spec.role:  # a hinted success trains the reply on the unhinted prompt (STaR)
            add(spec.role, r["messages"], f"{r['suite']}:{r['family']}", hinted=bool(r.get("hinted")))
    return {role: list(d.values()) for role, d in out.items()}


def rft(champion, rows, tmp: Path, ctx: dict, adapters: dict, log, opts: dict | None = None) -> tuple[list[dict], list[Path]]:
    """opts: roles (only these), warm (start from the champion's adapter: `--init-adapter`, a
    replay of at most twice the successes, `steps` steps), steps."""
    from macaronic.harness import load_bundle

    opts = opts or {}
    budget, contract = ctx["budget"], ctx["contract"]
    bundle = load_bundle(champion.harness["path"])
    found = successes(contract, bundle, rows)
    changes, files = [], []
    roles = [r for r in sorted(champion.adapters) if not opts.get("roles") or r in opts["roles"]]
    eligible = sorted((r for r in roles if len(found.get(r, [])) >= budget.min_successes),
                      key=lambda r: (-len(found[r]), r))[: budget.rft_max_roles]
    for role in roles:
        ex = found.get(role, [])
        if role not in eligible:
            why = (f"fewer than {budget.min_successes} graded successes" if len(ex) < budget.min_successes
                   else f"budget retrains at most {budget.rft_max_roles} role(s) per generation")
            changes.append({"step": "rft", "role": role, "successes": len(ex), "retrained": False, "reason": why})
            continue
        meta = _adapter_meta(adapters[role])
        replay = _replay(meta, _data_files(champion, tmp))  # the champion adapter's own training data, rebuilt from its record
        warm = bool(opts.get("warm"))
        if warm:
            import random

            random.Random(f"replay:{role}").shuffle(replay)
            replay = replay[: 2 * len(ex)]
        path = tmp / "data" / f"rft-{role}.jsonl"
        path.write_text("".join(json.dumps(e, sort_keys=True) + "\n" for e in ex + replay))
        files.append(path)
        steps = int(opts.get("steps") or budget.train_steps or meta["steps"])
        hinted = sum(1 for e in ex if e.get("hinted"))
        log(f"rft {role}: {len(ex)} graded successes ({hinted} hinted) + {len(replay)} replayed, {steps} steps"
            + (", warm start" if warm else ""))
        _train(champion, role, path, tmp / "adapters" / role, meta, steps, adapters[role] if warm else None)
        adapters[role] = str(tmp / "adapters" / role)
        changes.append({"step": "rft", "role": role, "successes": len(ex), "hinted": hinted, "replayed": len(replay),
                        "replay_source": meta["source"], "retrained": True, "train_steps": steps, "warm": warm,
                        "mode": meta["mode"], "rank": meta["rank"]})
    return changes, files


SAVE_EVERY = 10  # a candidate's training checkpoints every this many steps (`_train` resumes from it)


def _train(champion, role: str, data: Path, out_dir: Path, meta: dict, steps: int, init: str | None) -> None:
    """`macaronic train` in its own process with the champion adapter's recorded config, into
    `out_dir` (tmp/adapters/ROLE of a candidate being built).

    It trains in a work directory beside the candidate's (`cand-NN.ckpt/ROLE-KEY`, KEY a hash of the
    command and of the data file's bytes), checkpointing every `SAVE_EVERY` steps: a killed run (a
    session ends after 3 hours; a candidate's training can take more than one on a 2-core box)
    rebuilds the same data, finds the same work directory and resumes from its last checkpoint. The
    finished adapter's files move to `out_dir`; `build_successor` removes the work directories once
    the candidate is whole."""
    cmd = [sys.executable, "-m", "macaronic.cli", "train", role, "--data", str(data),
           "--mode", meta["mode"], "--rank", str(meta["rank"]), "--steps", str(steps),
           "--batch", str(meta["batch"]), "--lr", str(meta["lr"]), "--seed", str(meta["seed"]),
           "--save-every", str(SAVE_EVERY), "--no-progress", "--description", meta["description"]]
    if init:
        cmd += ["--init-adapter", str(init)]
    if meta.get("activation", "user") != "user":  # the champion's rule (and layout) carries to its successor
        cmd += ["--activation", meta["activation"]]
    if champion.base:
        cmd += ["--base", champion.base]
    h = hashlib.sha256(json.dumps(cmd[1:]).encode())
    h.update(Path(data).read_bytes())
    work = _work_dir(out_dir) / f"{role}-{h.hexdigest()[:16]}"
    resume = (work / "checkpoint" / "state.json").is_file()
    p = subprocess.run(cmd + ["--out", str(work)] + (["--resume"] if resume else []), capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"macaronic train {role} failed:\n{p.stderr[-2000:]}")
    out_dir.mkdir(parents=True, exist_ok=True)
    for f in work.iterdir():
        if f.name != "checkpoint":
            shutil.move(str(f), str(out_dir / f.name))
    shutil.rmtree(work)


def _work_dir(out_dir: Path) -> Path:
    """cand-NN.ckpt for tmp/adapters/ROLE of cand-NN.tmp: outside the candidate's tmp directory,
    which a restart clears."""
    tmp = out_dir.parents[1]
    return tmp.with_name(tmp.name.removesuffix(".tmp") + ".ckpt")


def failure_data(champion, tmp: Path, ctx: dict, adapters: dict, log, opts: dict) -> tuple[dict, list[Path]]:
    import random

    from macaronic.evolve.failure_data import NO_DEV_REPLAY, card_style, examples, families

    role = opts.get("role", "agent")
    skills = list(opts.get("skills") or [opts.get("skill", "lookup_then_act")])
    # n episodes per skill, as many replayed, and the steps per skill: each skill's data is seen as
    # often as when it is trained alone
    n = int(opts.get("examples", 24))
    steps = int(opts.get("steps") or ctx["budget"].rft_steps) * len(skills)
    version = int(opts.get("data", 1))  # the generator's version the step was proposed under (none: 1)
    data = [e for skill in skills for e in examples(skill, n, int(opts.get("seed", 0)), version)]
    meta = _adapter_meta(adapters[role])
    replay = _replay(meta, _data_files(champion, tmp))
    if version >= NO_DEV_REPLAY:  # nothing of a dev family is replayed, so the screen measures transfer
        held = dev_families(ctx.get("contract"), role)
        replay = [e for e in replay if str(e.get("source", "")).partition("/")[2] not in held]
    random.Random(f"replay:{role}").shuffle(replay)
    replay = replay[:len(data)]
    if output_of(role) == "card":  # the replayed cards in the step's card style, so one adapter sees one style
        replay = [card_style(e, version) for e in replay]
    name = "+".join(skills)
    path = tmp / "data" / f"failure-{role}-{name}.jsonl"
    path.write_text("".join(json.dumps(e, sort_keys=True) + "\n" for e in data + replay))
    log(f"failure data {role}/{name}: {len(data)} episodes + {len(replay)} replayed, {steps} steps, warm start")
    _train(champion, role, path, tmp / "adapters" / role, meta, steps, adapters[role])
    adapters[role] = str(tmp / "adapters" / role)
    return {"step": "failure_data", "role": role, "skill": name, "examples": len(data), "replayed": len(replay),
            "families": [f.name for s in skills for f in families(s, version)], "data_version": version,
            "train_steps": steps, "warm": True}, [path]


def data_engine(champion, tmp: Path, ctx: dict, adapters: dict, log, opts: dict) -> tuple[dict, list[Path]]:
    """The role's adapter warm-started on `examples` fresh examples of its registry data engine
    (`Specialist.data_engine`: verified by the engine itself, disjoint from every contract split by
    the engines' tests) mixed with as many replayed from what the adapter was trained on, for
    `steps` steps at `lr_pct` percent of its recorded learning rate. With `served` (a seeds file's
    sha256 prefix under the work directory's served/), the fresh examples are made like the role's
    served failures (`served.training_examples`)."""
    import random

    from macaronic.engine.bases import BASES
    from macaronic.specialist import find
    from macaronic.train.builders import build

    role = opts["role"]
    spec = find(role)
    if spec is None or not spec.data_engine:
        raise ValueError(f"specialist {role!r} names no data engine in the registry")
    n = int(opts.get("examples") or ctx["budget"].engine_examples)
    steps = int(opts.get("steps") or ctx["budget"].rft_steps)
    base = champion.base if champion.base in BASES else None
    seed = int(opts.get("seed", 0))
    served = opts.get("served")
    if served:  # served failures of this role as seeds: fresh examples like them (evolve/served.py)
        from macaronic.evolve.served import training_examples

        seeds_file = Path(ctx["served_dir"]) / f"seeds-{served}.jsonl"
        if not seeds_file.is_file():
            raise ValueError(f"served seeds {seeds_file} are missing (the generation's reading writes them)")
        seeds = [x for x in map(json.loads, seeds_file.read_text().splitlines()) if x["specialist"] == role]
        data = training_examples(seeds, spec.data_engine, n, seed, base)
    else:
        data = [e.to_dict() for e in build(spec.data_engine, n, seed, base)]
    meta = _adapter_meta(adapters[role])
    replay = _replay(meta, _data_files(champion, tmp))
    random.Random(f"replay:{role}").shuffle(replay)
    replay = replay[:len(data)]
    lr = meta["lr"] * int(opts.get("lr_pct", 100)) / 100
    path = tmp / "data" / f"engine-{role}.jsonl"
    path.write_text("".join(json.dumps(e, sort_keys=True) + "\n" for e in data + replay))
    log(f"data engine {role}/{spec.data_engine}: {len(data)} examples"
        + (f" like {len(seeds)} served failures" if served else "")
        + f" + {len(replay)} replayed, {steps} steps, lr {lr:g}, warm start")
    _train(champion, role, path, tmp / "adapters" / role, {**meta, "lr": lr}, steps, adapters[role])
    adapters[role] = str(tmp / "adapters" / role)
    return {"step": "data_engine", "role": role, "generator": spec.data_engine, "examples": len(data),
            "replayed": len(replay), "train_steps": steps, "lr": lr, "seed": seed, "warm": True,
            **({"served": served, "served_seeds": len(seeds)} if served else {})}, [path]


def dev_families(contract, role: str) -> frozenset[str]:
    """The families the contract holds out whole as dev for the suites `role` answers. An adapter
    shipped before the contract held them out (v5's GenUI itinerary and form) carries them in its
    own training data; replaying that data would train the loop on its own dev split."""
    return frozenset(f for s in (contract.suites if contract is not None else ()) if s.role == role
                     for f in s.dev_families)


def grpo(champion, tmp: Path, ctx: dict, adapters: dict, log, opts: dict) -> dict:
    """A few GRPO steps (`macaronic train grpo`, verifiable reward) warm-started from the adapter."""
    role, steps = opts.get("role", "coding"), int(opts.get("steps", 4))
    meta = _adapter_meta(adapters[role])
    if meta["activation"] != "user":
        raise ValueError(f"grpo trains at the user header; the {role} adapter switches on at the {meta['activation']} header")
    out_dir = tmp / "adapters" / role
    cmd = [sys.executable, "-m", "macaronic.cli", "train", "grpo", role, "--init", str(adapters[role]),
           "--out", str(out_dir), "--mode", meta["mode"], "--rank", str(meta["rank"]), "--steps", str(steps),
           "--prompts", str(int(opts.get("prompts", 8))), "--per-step", "2", "--group", "4",
           "--max-new", str(int(opts.get("max_new", 128))), "--seed", str(meta["seed"])]
    if champion.base:
        cmd += ["--base", champion.base]
    log(f"grpo {role}: {steps} steps from {Path(adapters[role]).name}")
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"macaronic train grpo {role} failed:\n{p.stderr[-2000:]}")
    adapters[role] = str(out_dir)
    return {"step": "grpo", "role": role, "train_steps": steps, "rank": meta["rank"], "mode": meta["mode"]}


def _adapter_meta(path: str) -> dict:
    """Mode, rank and the recorded training config and data source of an adapter directory."""
    p = Path(path)
    cfg = json.loads((p / "adapter_config.json").read_text())
    meta = json.loads((p / "macaronic.json").read_text()) if (p / "macaronic.json").is_file() else {}
    tc = (meta.get("training") or {}).get("config") or {}
    data = meta.get("data") or {}
    return {"mode": meta.get("mode", "full"), "activation": meta.get("activation", "user"), "rank": int(cfg.get("r", 8)), "steps": int(tc.get("steps", 60)),
            "batch": int(tc.get("batch", 4)), "lr": float(tc.get("lr", 3e-4)), "seed": int(tc.get("seed", 0)),
            "source": data.get("source", ""), "examples": int(data.get("examples", 0)),
            "description": meta.get("description") or "specialist after rejection-sampling fine-tuning",
            "base": meta.get("base"), "dir": p}


def _data_files(champion, tmp: Path) -> list[Path]:
    """The data files an adapter of this candidate may have been trained on: the parent pair's and
    those an earlier step of the same candidate wrote."""
    return [Path(f) for f in champion.data] + sorted((tmp / "data").glob("*.jsonl"))


def _replay(meta: dict, data_files=()) -> list[dict]:
    """Rebuild the examples the adapter was trained on when its record names a built-in generator
    (`generator:NAME`); an adapter whose data file can be had (`engine.adapters.recorded_data`: its
    data.jsonl, or the package's copy of a shipped adapter's) replays that file instead; one trained
    by the loop on a file (`file:NAME`, an earlier successor's RFT or failure data, which held its
    own replay) replays that file, found among the pair's data files."""
    from macaronic.engine.adapters import recorded_data

    shipped = recorded_data(meta["dir"])  # its data.jsonl, or the package's copy of a shipped adapter's
    if shipped is not None:
        return [json.loads(l) for l in shipped.read_text().splitlines() if l.strip()]
    kind, _, name = meta["source"].partition(":")
    if kind == "file":
        for f in map(Path, data_files):
            if f.name == name and f.is_file():
                return [json.loads(l) for l in f.read_text().splitlines() if l.strip()]
        raise FileNotFoundError(f"adapter {meta['dir']} was trained on {name}, which is not among the pair's data "
                                "files: nothing to replay")
    if kind != "generator" or not meta["examples"]:
        return []
    from macaronic.train.builders import build

    from macaronic.engine.bases import BASES

    base = meta.get("base") if meta.get("base") in BASES else None  # the identity lines name it
    return [e.to_dict() for e in build(name, meta["examples"], meta["seed"], base)]


# ---- router refit ------------------------------------------------------------------------

def routing_examples(contract, rows: list[dict]) -> list[dict]:
    """Routing examples from logged outcomes: (conversation up to a user turn, correct role)."""
    out, seen = [], set()
    for r in rows:
        spec = contract.suite(r["suite"])
        msgs = r["messages"]
        if spec.kind == "mixed":
            turn = 0
            for i, m in enumerate(msgs):
                if m["role"] == "user":
                    gold = r["detail"]["turns"][turn]["gold"]
                    convo = msgs[: i + 1]
                    turn += 1
                    key = (json.dumps(convo, sort_keys=True), gold)
                    if key not in seen:
                        seen.add(key)
                        out.append({"messages": convo, "label": gold, "kind": "turn", "source": r["suite"]})
        elif spec.role:
            convo = msgs[:1]
            key = (json.dumps(convo, sort_keys=True), spec.role)
            if key not in seen:
                seen.add(key)
                out.append({"messages": convo, "label": spec.role, "kind": "turn", "source": r["suite"]})
    return out


def dev_routing_examples(contract, loader, per_family: int, split: str = "dev") -> list[dict]:
    """A split's conversations with their correct role per user turn (routing needs no replies)."""
    out = []
    for s in contract.suites:
        if s.report_only:
            continue
        for t in loader.tasks(s.name, split, per_family=per_family):
            if s.kind == "mixed":
                convo = []
                for turn in t.obj.turns:
                    convo = convo + [{"role": "user", "content": turn.text}]
                    out.append({"messages": convo, "label": turn.role, "kind": "turn"})
                    convo = convo + [{"role": "assistant", "content": "(reply)", "specialist": turn.role}]
            elif s.role:
                out.append({"messages": [{"role": "user", "content": t.text}], "label": s.role, "kind": "turn"})
    return out


POLICY_CHOICES = ("cascade", "probe", "embedding", "arrow", "prompted")


def accuracy(pred: list[str], gold: list[str]) -> float:
    return sum(p == g for p, g in zip(pred, gold)) / max(1, len(gold))


def macro_recall(pred: list[str], gold: list[str]) -> float:
    """Mean over roles of the share of that role's turns routed to it."""
    roles = sorted(set(gold))
    per = [sum(p == g == r for p, g in zip(pred, gold)) / sum(g == r for g in gold) for r in roles]
    return sum(per) / max(1, len(per))


def router_refit(rows: list[dict], tmp: Path, ctx: dict, log, shipped_data: bool = False,
                 served: str | None = None) -> tuple[dict, list[Path]]:
    """Refit on the logged outcomes (plus the shipped routing data's train split when asked, plus
    the served corrections' rows named by `served`) and choose the policy on the contract's dev
    turns (plus the shipped dev split)."""
    from macaronic.harness import load_bundle
    from macaronic.router.config import RouterConfig
    from macaronic.router.router import Router

    contract, loader, llm, budget = ctx["contract"], ctx["loader"], ctx["llm"], ctx["budget"]
    train = routing_examples(contract, rows)  # logged outcomes, plus the train tasks' own turns:
    seen = {(json.dumps(e["messages"], sort_keys=True), e["label"]) for e in train}
    train += [e for e in dev_routing_examples(contract, loader, budget.per_family, "train")
              if (json.dumps(e["messages"], sort_keys=True), e["label"]) not in seen]
    dev = dev_routing_examples(contract, loader, budget.dev_for("mixed"))
    n_logged, n_dev = len(train), len(dev)
    n_served = 0
    if served:
        path = Path(ctx["served_dir"]) / f"routing-{served}.jsonl"
        if not path.is_file():
            raise FileNotFoundError(f"router_refit: no served routing rows {path}")
        extra = [json.loads(l) for l in path.read_text().splitlines() if l.strip()]
        train, n_served = train + extra, len(extra)
    if shipped_data:
        from macaronic.router.data import load_routing_data

        train, dev = train + load_routing_data("train"), dev + load_routing_data("dev")
    path = tmp / "data" / "router-train.jsonl"
    path.write_text("".join(json.dumps(e, sort_keys=True) + "\n" for e in train))
    harness = tmp / "harness"
    bundle = load_bundle(harness)
    cfg = RouterConfig.from_dict(bundle.router)
    labels = sorted({e["label"] for e in train})
    if len(labels) < 2:
        return {"step": "router_refit", "train_examples": len(train), "refit": False,
                "reason": "fewer than two roles in the logged outcomes"}, [path]
    log(f"router refit: {len(train)} logged turns, {len(dev)} dev turns")
    features = ctx.get("features") if ctx.get("features") is not None else {}
    router = Router.fit(llm, train, dev, bundle, cfg, features=features)
    acc, recall = {}, {}
    for policy in POLICY_CHOICES:
        decisions = router.with_config(policy=policy).route_many([e["messages"] for e in dev], features=features)
        pred, gold = [d.role for d in decisions], [e["label"] for e in dev]
        acc[policy], recall[policy] = accuracy(pred, gold), macro_recall(pred, gold)
    # Macro recall, not accuracy: dev is unbalanced, and "always the majority role" must not win.
    # Ties keep the current policy (no change without evidence).
    best = max(POLICY_CHOICES, key=lambda p: (recall[p], p == cfg.policy))
    state_id = router.save(harness / ROUTER_STATE_DIR)
    doc = json.loads((harness / "router.json").read_text())
    doc["policy"] = best
    (harness / "router.json").write_text(json.dumps(doc, indent=2) + "\n")
    return {"step": "router_refit", "refit": True, "logged_examples": n_logged, "contract_dev_examples": n_dev,
            "served_examples": n_served,
            "shipped_data": shipped_data, "train_examples": len(train), "dev_examples": len(dev),
            "dev_accuracy": {k: round(v, 4) for k, v in acc.items()},
            "dev_macro_recall": {k: round(v, 4) for k, v in recall.items()}, "policy": best,
            "router_state": state_id[:16]}, [path]


# ---- harness edits -----------------------------------------------------------------------

def harness_edit(harness: Path, opts: dict) -> dict:
    """{"file", one of "merge" (JSON, deep), "append" (a line), "replace" ([old, new]) or "text",
    optional "note"}."""
    target = harness / opts["file"]
    if not target.resolve().is_relative_to(harness.resolve()):
        raise ValueError(f"harness edit outside the bundle: {opts['file']}")
    if "merge" in opts:
        doc = json.loads(target.read_text())
        _deep_merge(doc, opts["merge"])
        target.write_text(json.dumps(doc, indent=2) + "\n")
    elif "append" in opts:  # one more line at the end of the file (a role file ends with its system prompt)
        text = target.read_text()
        if target.name.endswith(".md") and target.parent.name == "roles" and \
                text.rfind("## System prompt") < text.rfind("\n## "):
            raise ValueError(f"harness edit: {opts['file']} does not end with its system prompt")
        target.write_text(text.rstrip("\n") + "\n" + opts["append"].strip() + "\n")
    elif "replace" in opts:
        old, new = opts["replace"]
        text = target.read_text()
        if old not in text:
            raise ValueError(f"harness edit: {old!r} not found in {opts['file']}")
        target.write_text(text.replace(old, new))
    elif "text" in opts:
        target.write_text(opts["text"])
    else:
        raise ValueError("a harness edit needs 'merge', 'replace' or 'text'")
    from macaronic.harness import load_bundle

    load_bundle(harness)  # an edit that breaks the bundle fails here, not in the evaluator
    return {"step": "harness_edit", "file": opts["file"], "note": opts.get("note", ""),
            **{k: opts[k] for k in ("merge", "append") if k in opts}}


def _deep_merge(doc: dict, patch: dict) -> None:
    for k, v in patch.items():
        if isinstance(v, dict) and isinstance(doc.get(k), dict):
            _deep_merge(doc[k], v)
        else:
            doc[k] = v


def fit_shipped_router(llm, harness: Path, features: dict | None = None) -> str:
    """Fit the bundle's router on the shipped routing data into `<harness>/router_state` (what
    `macaronic serve` does for a bundle whose policy needs fitted state); returns the state id."""
    from macaronic.harness import load_bundle
    from macaronic.router.config import RouterConfig
    from macaronic.router.data import load_routing_data
    from macaronic.router.router import Router

    bundle = load_bundle(harness)
    router = Router.fit(llm, load_routing_data("train"), load_routing_data("dev"), bundle,
                        RouterConfig.from_dict(bundle.router), features=features)
    return router.save(harness / ROUTER_STATE_DIR)


def load_features(path: Path, base_fp: str) -> dict:
    """Cached router features (text -> pooled base hidden state) for one base; {} if none."""
    import numpy as np

    if not path.is_file():
        return {}
    z = np.load(path, allow_pickle=False)
    if str(z["base"]) != base_fp:
        return {}
    return dict(zip(z["texts"].tolist(), z["rows"]))


def save_features(path: Path, base_fp: str, features: dict) -> None:
    """Features are a cache, not history: rewritten whole (atomically) when they grow."""
    import os

    import numpy as np

    if not features:
        return
    texts = sorted(features)
    tmp = path.with_name(path.name + ".tmp.npz")
    np.savez(tmp, base=np.array(base_fp), texts=np.array(texts), rows=np.stack([features[t] for t in texts]))
    os.replace(tmp, path)
