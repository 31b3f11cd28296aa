"""The two training comparisons of issue 6, reproducible (`macaronic train compare modes|grpo|md`:
commands/train_compare.py).

    macaronic train compare modes --roles coding,agent --work runs/modes --json docs/bench/train-modes.json
    macaronic train compare grpo --role agent --work runs/grpo --json docs/bench/train-grpo.json

modes: per role, the shipped `turn` adapter, `full` at the shipped budget (same rank, steps, batch,
lr, data, seed) and `turn` at a tuned budget (--tuned-rank, --tuned-steps x the shipped steps).
grpo: GRPO warm-started from the shipped adapter, then SFT warm-started from the same adapter that
stops when its steps have taken as long as GRPO's did (`macaronic train --max-seconds`), on fresh
train-family data (--sft-seed).

Both train what is missing under --work (niced subprocesses, one torch thread; a directory with a
macaronic.json is reused, delete it to retrain), then score every variant and the bare base on the
role's dev families with `macaronic.train.devscore` (greedy) and write one JSON. The switch cost of
each mode is quoted from the engine benchmark (docs/bench/engine.json), not re-measured. A role can
be compared when it is shipped and its registry entry names a dev scorer (`comparable`); the reply
cap and the default number of dev tasks are its scorer's.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from macaronic.engine.bases import SMALL_BASE
from macaronic.specialist import BUILTIN

ROOT = Path(__file__).resolve().parents[3]
GRPO_ROLE, SFT_SEED, GRPO_PROMPTS = "agent", 1000, 48  # `compare grpo` defaults: role, continued-SFT data seed, prompts
MAX_STEPS = 3  # agent replies per episode: the dev families need two calls and a final answer


BASE = SMALL_BASE  # the comparisons' base: its shipped specialists are the reference runs


def comparable() -> list[str]:
    """The roles the comparisons can run: shipped, with a dev scorer in their registry entry."""
    return [s.name for s in BUILTIN if s.devscore]


def shipped_dir(role: str) -> Path:
    return Path(__file__).resolve().parents[1] / "specialists" / role


def _meta(adapter: Path) -> dict:
    return json.loads((adapter / "macaronic.json").read_text())


def _run(cmd: list[str], log: Path) -> float:
    """Run a niced, one-thread training subprocess; returns its wall seconds."""
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    print("+ " + " ".join(cmd), file=sys.stderr)
    t0 = time.time()
    with log.open("a") as f:
        rc = subprocess.run(["nice", "-n", "10", *cmd], env=env, stdout=f, stderr=subprocess.STDOUT).returncode
    if rc:
        raise SystemExit(f"training failed (rc {rc}); see {log}")
    return round(time.time() - t0, 1)


def shown(cmd: list[str]) -> str:
    """A training subprocess's command as a reader runs it: `macaronic train ...` for
    `python -m macaronic.cli train ...`."""
    return " ".join(["macaronic", *cmd[3:]] if cmd[1:3] == ["-m", "macaronic.cli"] else cmd)


def sft_cmd(role: str, out: Path, *, mode: str, rank: int, steps: int, like: dict, extra: tuple = ()) -> list[str]:
    """The `macaronic train` command that reproduces `like` (a shipped macaronic.json) but for mode/rank/steps."""
    c = like["training"]["config"]
    source = like["data"].get("source", "")
    data = ["--generator", source.split(":", 1)[1]] if source.startswith("generator:") else []
    cmd = [sys.executable, "-m", "macaronic.cli", "train", role, *data, "--base", BASE, "--out", str(out), "--mode", mode, "--rank", str(rank),
           "--steps", str(steps), "--batch", str(c["batch"]), "--lr", str(c["lr"]), "--seed", str(c["seed"]),
           "--examples", str(like["data"]["examples"]), "--max-turn", str(c["max_turn"]), "--save-every", "10",
           "--threads", "1", "--no-progress", *extra]
    return cmd + (["--resume"] if (out / "checkpoint" / "state.json").exists() else [])


def ensure(out: Path, cmd: list[str]) -> dict:
    """Train unless out/ already holds a finished adapter; returns what it measured."""
    rec = {"dir": str(out), "command": shown(cmd)}
    if not (out / "macaronic.json").exists():
        out.mkdir(parents=True, exist_ok=True)
        rec["wall_s_this_run"] = _run(cmd, out.parent / (out.name + ".log"))
    m = _meta(out)
    rec["train_s"] = m["training"]["seconds"]  # sum of step times, from the adapter's own metadata
    rec["config"] = {k: m["training"]["config"][k] for k in ("mode", "rank", "steps", "batch", "lr", "seed")}
    rec["loss_first_last"] = [m["training"]["first_loss"], m["training"]["final_loss"]]
    return rec


def trained_texts(role: str, variants: dict, extra: frozenset[str] = frozenset()) -> frozenset[str]:
    """User messages any variant trained on: the shipped data (rebuilt from its recorded generator,
    size and seed), for the GRPO role the default continued-SFT data and GRPO prompts of `compare
    grpo` (so both comparisons hold out the same instances), each variant directory's data.jsonl, and `extra`."""
    from macaronic.train.builders import build
    from macaronic.train.devscore import user_texts
    from macaronic.datagen.examples import read_jsonl

    like = _meta(shipped_dir(role))
    gen = like["data"]["source"].split(":", 1)[1]
    examples = build(gen, like["data"]["examples"], like["training"]["config"]["seed"], BASE)
    if role == GRPO_ROLE:
        examples += build(gen, like["data"]["examples"], SFT_SEED, BASE)
        extra = extra | grpo_texts(role, GRPO_PROMPTS, 0)
    for path in variants.values():
        if path is not None and (Path(path) / "data.jsonl").exists():
            examples += read_jsonl(Path(path) / "data.jsonl")
    return user_texts(examples) | extra


def git_state() -> dict:
    """The commit and whether engine/train files differ from it: the scores depend on both."""
    from macaronic.train.output import git_commit

    dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "--", "src/macaronic/engine",
                            "src/macaronic/train", "src/macaronic/serve/views.py"], capture_output=True, text=True).stdout
    return {"commit": git_commit(), "dirty": sorted(line[3:] for line in dirty.splitlines())}


def pair_deltas(rows: dict, role: str, pairs: list) -> list[dict]:
    """Paired-bootstrap differences a - b for each pair present, per metric."""
    from macaronic.contract.stats import paired_bootstrap
    from macaronic.train.devscore import metrics

    out = []
    for x, y in pairs:
        if x in rows and y in rows:
            ref = {r["task"]: r for r in rows[y]}
            rec = {"a": x, "b": y}
            for m in metrics(role):
                d, ci = paired_bootstrap([r[m] for r in rows[x]], [ref[r["task"]][m] for r in rows[x]])
                rec[m] = {"mean": d, "ci95": ci}
            out.append(rec)
    return out


def score_all(role: str, variants: dict, n: dict, seed: int, reuse: dict | None = None,
              exclude: frozenset[str] = frozenset(), pairs: list = ()) -> dict:
    """Score {label: adapter dir or None} on the role's task sets ({split: n}); greedy rows of
    `reuse` ({split: {label: rows}}) with the same task ids are taken instead of recomputed."""
    import torch

    from macaronic.engine.llm import load_llm
    from macaronic.train import devscore

    torch.set_num_threads(1)
    exclude = trained_texts(role, variants, exclude)
    out = {}
    llm = load_llm(BASE, [])
    try:
        names = {}
        for label, path in variants.items():
            names[label] = None if path is None else llm.add_adapter(path, name=f"{role}-{label}").name
        for split, k in n.items():
            t0 = time.time()
            tasks = devscore.tasks_for(role, split, k, seed, exclude=exclude)
            ids = [getattr(t, "id", "") for _, t in tasks]
            old = {lb: rs for lb, rs in ((reuse or {}).get(split) or {}).items()
                   if lb in names and [r["task"] for r in rs] == ids}
            rows = devscore.score(llm, role, {lb: a for lb, a in names.items() if lb not in old}, tasks,
                                  max_tokens=devscore.scorer(role).max_tokens, max_steps=MAX_STEPS)
            rows = {lb: old.get(lb) or rows[lb] for lb in names}
            summary = devscore.summarize(rows, role, reference="shipped_turn_r8")
            print(f"[{split}]\n" + devscore.format_summary(summary, role), file=sys.stderr)
            out[split] = {"summary": summary, "pairs": pair_deltas(rows, role, pairs), "eval_s": round(time.time() - t0, 1),
                          "reused": sorted(old), "rows": rows}
    finally:
        llm.close()
    return out


def switch_cost(engine_json: Path) -> dict:
    """The engine benchmark's switched-turn TTFT per history length: turn mode vs a re-prefill."""
    d = json.loads(engine_json.read_text())
    return {"source": str(engine_json.relative_to(ROOT) if engine_json.is_relative_to(ROOT) else engine_json),
            "command": d.get("command"),
            "rows": [{"history_tokens": r["history_tokens"], "turn_ms": r["turn_ms"], "full_ms": r["per_adapter_ms"],
                      "cleared_ms": r["cleared_ms"]} for r in d["switch_ttft"]]}


def reuse_rows(path: Path | None, role: str) -> dict | None:
    """{split: {label: rows}} from the other comparison's JSON, to take instead of recomputing when
    the labels and task ids match (score_all checks): scored in that run, by that engine."""
    if not path or not path.exists():
        return None
    doc = json.loads(path.read_text())
    ev = doc["roles"].get(role, {}).get("eval", {}) if "roles" in doc else (doc.get("eval", {}) if doc.get("role") == role else {})
    return {sp: dict(v["rows"]) for sp, v in ev.items()}


def _write(path: Path, doc: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"wrote {path}", file=sys.stderr)


def modes(a) -> int:
    old = json.loads(a.json.read_text()) if a.json.exists() else {}
    doc = {"switch_cost": switch_cost(a.engine_json), "date": time.strftime("%Y-%m-%d"),
           "roles": old.get("roles", {})}  # a run for some roles keeps the others' results
    for role in a.roles.split(","):
        ship = shipped_dir(role)
        like = _meta(ship)
        steps, rank = like["training"]["config"]["steps"], like["training"]["config"]["rank"]
        tuned_steps = int(round(steps * a.tuned_steps))
        runs = {
            "shipped_turn_r8": {"dir": str(ship.relative_to(ROOT)), "train_s": like["training"]["seconds"],
                                "config": {k: like["training"]["config"][k] for k in ("mode", "rank", "steps", "batch", "lr", "seed")},
                                "loss_first_last": [like["training"]["first_loss"], like["training"]["final_loss"]]},
            # The shipped recipe retrained today: the shipped adapter predates the current prompt
            # builder (one system message then; identity+tools and the role instruction now).
            f"turn_r{rank}": ensure(a.work / f"{role}-turn-r{rank}",
                                    sft_cmd(role, a.work / f"{role}-turn-r{rank}", mode="turn", rank=rank, steps=steps, like=like)),
            f"full_r{rank}": ensure(a.work / f"{role}-full-r{rank}",
                                    sft_cmd(role, a.work / f"{role}-full-r{rank}", mode="full", rank=rank, steps=steps, like=like)),
            f"turn_r{a.tuned_rank}_x{a.tuned_steps:g}": ensure(
                a.work / f"{role}-turn-r{a.tuned_rank}",
                sft_cmd(role, a.work / f"{role}-turn-r{a.tuned_rank}", mode="turn", rank=a.tuned_rank, steps=tuned_steps,
                        like=like)),
        }
        variants = {"base": None, **{k: Path(v["dir"]) if Path(v["dir"]).is_absolute() else ROOT / v["dir"]
                                     for k, v in runs.items()}}
        for x in a.extra:  # e.g. grpo=runs/grpo/agent-grpo: scored in the same process, same tasks
            label, _, path = x.partition("=")
            if path and role in Path(path).name:
                variants[label] = Path(path)
        tuned = f"turn_r{a.tuned_rank}_x{a.tuned_steps:g}"
        pairs = [(f"full_r{rank}", f"turn_r{rank}"), (tuned, f"full_r{rank}"), (tuned, f"turn_r{rank}"),
                 (f"turn_r{rank}", "shipped_turn_r8"), ("grpo", "shipped_turn_r8"), ("sft_cont", "shipped_turn_r8"),
                 ("sft_cont", "grpo")]
        doc["roles"][role] = {"command": "macaronic train compare modes " + " ".join(a.argv), "train": runs,
                              "git": git_state(),
                              "eval": score_all(role, variants, _n(a, role), a.seed, reuse_rows(a.reuse, role), pairs=pairs)}
        _write(a.json, doc)  # after each role, so a cut run keeps what it measured
    return 0


def grpo_texts(role: str, n: int, seed: int) -> frozenset[str]:
    """The user messages GRPO samples from (rollouts.prompts_for without a tokenizer)."""
    from macaronic.suites.registry import suite

    s = suite(role)
    return frozenset(s.user(t) for t in s.rl_tasks(n, seed))


def grpo(a) -> int:
    ship = shipped_dir(a.role)
    like = _meta(ship)
    c = like["training"]["config"]
    doc = {"command": "macaronic train compare grpo " + " ".join(a.argv), "role": a.role, "date": time.strftime("%Y-%m-%d")}
    g_out = a.work / f"{a.role}-grpo"
    g_cmd = [sys.executable, "-m", "macaronic.cli", "train", "grpo", a.role, "--init", str(ship), "--out", str(g_out),
             "--rank", str(c["rank"]), "--steps", str(a.steps), "--prompts", str(a.prompts), "--per-step", str(a.per_step),
             "--group", str(a.group), "--max-new", str(a.max_new), "--lr", str(a.grpo_lr), "--seed", str(a.seed),
             "--threads", "1", "--base", BASE]
    g = {"dir": str(g_out), "command": shown(g_cmd)}
    if not (g_out / "macaronic.json").exists():
        if (g_out / "history.jsonl").exists():
            (g_out / "history.jsonl").unlink()  # grpo has no --resume: a cut run starts over
        g_out.mkdir(parents=True, exist_ok=True)
        g["wall_s_this_run"] = _run(g_cmd, a.work / f"{a.role}-grpo.log")
    hist = [json.loads(x) for x in (g_out / "history.jsonl").read_text().splitlines()]
    g["train_s"] = round(sum(h["seconds"] for h in hist), 1)
    g["reward_per_step"] = [round(h["reward"], 3) for h in hist]
    g["rollouts_with_signal"] = sum(h["rollouts"] for h in hist)
    budget = round(g["train_s"], 1)  # GRPO's own step time, summed: continued SFT stops there
    s_out = a.work / f"{a.role}-sft-cont"
    s = ensure(s_out, sft_cmd(a.role, s_out, mode=c["mode"], rank=c["rank"], steps=a.sft_steps, like=like,
                              extra=("--init-adapter", str(ship), "--lr", str(a.sft_lr), "--seed", str(a.sft_seed),
                                     "--max-seconds", str(budget))))
    s["budget_s"] = budget
    s["steps_done"] = _meta(s_out)["training"]["steps_done"]
    doc["train"] = {"grpo": g, "sft_cont": s}
    doc["eval"] = score_all(a.role, {"base": None, "shipped_turn_r8": ship, "grpo": g_out, "sft_cont": s_out},
                            _n(a, a.role), a.seed_eval, reuse_rows(a.reuse, a.role),
                            exclude=grpo_texts(a.role, a.prompts, a.seed),
                            pairs=[("grpo", "shipped_turn_r8"), ("sft_cont", "shipped_turn_r8"), ("sft_cont", "grpo")])
    doc["git"] = git_state()
    _write(a.json, doc)
    return 0


def _n(a, role: str) -> dict:
    from macaronic.train.devscore import scorer

    return {"dev": a.n or scorer(role).dev_n, "heldout": a.n_heldout}


def _fmt(stat: dict, delta: bool = False) -> str:
    if delta:
        d = stat
        return f"{d['mean']:+.2f} [{d['ci95'][0]:+.2f}, {d['ci95'][1]:+.2f}]"
    lo, hi = stat["ci95"]
    return f"{stat['mean']:.2f} [{lo:.2f}, {hi:.2f}]"


def _table(role: str, ev: dict, train: dict) -> list[str]:
    from macaronic.train.devscore import metrics as metrics_of

    metrics = metrics_of(role)
    lines = []
    for split, v in ev.items():
        lines += [f"**{role}, {SPLIT_NAMES[split]}** (n = {next(iter(v['summary'].values()))['n']}, "
                  f"{v['eval_s']:.0f} s to score)", "",
                  "| variant | train s | " + " | ".join(metrics) + " | " + " | ".join(f"Δ {m} vs shipped" for m in metrics) + " |",
                  "|---|---:|" + "---:|" * (2 * len(metrics))]
        for label, sm in v["summary"].items():
            t = train.get(label, {})
            ts = f"{t['train_s']:.0f}" if t.get("train_s") is not None else "–"
            ds = [sm[m].get("delta_vs_shipped_turn_r8") for m in metrics]
            lines.append(f"| {label} | {ts} | " + " | ".join(_fmt(sm[m]) for m in metrics) + " | "
                         + " | ".join(_fmt(d, True) if d else "–" for d in ds) + " |")
        lines.append("")
        if v.get("pairs"):
            lines += ["| paired difference | " + " | ".join(f"Δ {m}" for m in metrics) + " |",
                      "|---|" + "---:|" * len(metrics)]
            lines += [f"| {q['a']} − {q['b']} | " + " | ".join(_fmt(q[m], True) for m in metrics) + " |" for q in v["pairs"]]
            lines.append("")
    return lines


SPLIT_NAMES = {"dev": "dev families (never trained on)", "heldout": "train families, unseen instances"}


def markdown(modes_doc: dict | None, grpo_doc: dict | None) -> str:
    """The tables of both comparisons (means with 95% bootstrap intervals; Δ = paired bootstrap)."""
    out = []
    if modes_doc:
        out += ["### Adapter mode: turn vs full vs tuned turn", ""]
        for role, r in modes_doc["roles"].items():
            out += [f"`{r['command']}`", ""] + _table(role, r["eval"], r["train"])
        sc = modes_doc["switch_cost"]
        out += [f"Switch cost, quoted from `{sc['command']}` ({sc['source']}): switched-turn time to first token, ms.", "",
                "| history tokens | turn (any rank ≤ 16) | full (per-adapter cache = re-prefill) | full / turn |",
                "|---:|---:|---:|---:|"]
        out += [f"| {x['history_tokens']} | {x['turn_ms']:.0f} | {x['full_ms']:,.0f} | {x['full_ms'] / x['turn_ms']:.1f}x |"
                for x in sc["rows"]]
        out.append("")
    if grpo_doc:
        g = grpo_doc["train"]["grpo"]
        out += ["### SFT vs GRPO from the shipped adapter", "", f"`{grpo_doc['command']}`", "",
                f"GRPO: `{g['command']}`; reward per step {g['reward_per_step']}; "
                f"{g['rollouts_with_signal']} rollouts with a non-zero advantage.", "",
                f"Continued SFT: `{grpo_doc['train']['sft_cont']['command']}`.", ""]
        out += _table(grpo_doc["role"], grpo_doc["eval"], grpo_doc["train"] | {"sft_cont": grpo_doc["train"]["sft_cont"]})
    return "\n".join(out)


def md(a) -> int:
    load = lambda p: json.loads(p.read_text()) if p.exists() else None  # noqa: E731
    text = markdown(load(a.modes_json), load(a.grpo_json))
    if a.write:
        doc = a.write.read_text()
        start, end = "<!-- train:tables:start -->", "<!-- train:tables:end -->"
        if start not in doc or end not in doc:
            raise SystemExit(f"{a.write}: markers {start} / {end} not found")
        head, rest = doc.split(start, 1)
        a.write.write_text(head + start + "\n" + text + "\n" + end + rest.split(end, 1)[1])
    else:
        print(text)
    return 0
