"""What each adapter-switch rule costs in quality and in time (`macaronic bench modes`: commands/bench.py).

    macaronic bench modes --work runs/modes --json docs/bench/modes.json
    macaronic bench modes --train-only --work runs/modes      # just the specialists, two lanes

Rules (rows):

  full         LoRA on every token; K/V valid per adapter only (the vLLM rule): a switch re-prefills
  turn/cached  turn-activated LoRA; history K/V kept as each earlier turn's own adapter computed it
  turn/base    the same adapters; history always the bare base's (the earlier turns re-encoded), as
               in training
  upper-k      LoRA in the top k of the base's layers on every token; the cache keeps the residual
               stream entering layer L-k, so a switch recomputes k/L of the history

Budget: every rule's agent specialist (the role of both suites' tool turns) starts from the
shipped adapter (upper-k keeps its top k layers only) and takes the same number of SFT steps
under its own rule, `--steps-frac` of the shipped recipe's steps, same data, seed, rank, batch
and lr; chat, coding and genui take the shipped weights under each rule at zero steps (a 2-core
machine shared four ways could not train more in the time; the published run took 20 agent steps,
`--steps-frac 0.2`). turn/cached and turn/base share the
turn adapters (they differ only in how the engine serves history).

Quality: the contract's multi-turn suites (mixed: routed 2-3 turn conversations across roles;
agent: tool episodes) on its sealed test split, through the served harness, paired bootstrap
against the best row; and, as a diagnostic outside the default rule, the agent suite on the
contract's dev split (where every rule scores 0 on test, it says whether the rules differ at all). Cost: switched-turn time to first token after 512/2k/4k tokens of history
(the previous turns on another adapter, measured interleaved in one process) and bytes cached
per token. Trains what is missing under --work (niced, one torch thread per process); writes
one JSON and a PNG, prints the table, and writes it into a markdown file only when `--md FILE` names one.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from macaronic.specialist import BUILTIN_NAMES

ROOT = Path(__file__).resolve().parents[3]
ROLES = BUILTIN_NAMES
def markers(json_path: Path) -> tuple[str, str]:
    """The BENCHMARKS.md markers of one study run, named after its JSON (one section per JSON)."""
    return f"<!-- bench:{json_path.stem}:start -->", f"<!-- bench:{json_path.stem}:end -->"


@dataclass(frozen=True)
class Rule:
    name: str
    mode: str  # the adapters' training mode
    top_k: int = 0
    history: str = "cached"  # the engine's history rule (turn mode only)

    @property
    def tag(self) -> str:  # the adapter set under --work
        return f"upper{self.top_k}" if self.mode == "upper" else self.mode


RULES = (Rule("full", "full"), Rule("turn/cached", "turn"), Rule("turn/base", "turn", history="base"),
         Rule("upper-4", "upper", 4), Rule("upper-8", "upper", 8), Rule("upper-15", "upper", 15))


def shipped_dir(role: str) -> Path:
    return Path(__file__).resolve().parents[1] / "specialists" / role


def train_cmd(role: str, rule: Rule, out: Path, steps_frac: float) -> list[str]:
    """The `macaronic train` command of one rule's specialist: the shipped recipe, warm-started from
    the shipped adapter, `steps_frac` of its steps under the rule's own mode."""
    like = json.loads((shipped_dir(role) / "macaronic.json").read_text())
    c, data = like["training"]["config"], like["data"]
    gen = data["source"].split(":", 1)[1]
    steps = max(1, int(round(c["steps"] * steps_frac)))
    cmd = [sys.executable, "-m", "macaronic.cli", "train", role, "--generator", gen, "--out", str(out),
           "--mode", rule.mode, "--rank", str(c["rank"]), "--alpha", str(c["alpha"]), "--steps", str(steps),
           "--batch", str(c["batch"]), "--lr", str(c["lr"]), "--seed", str(c["seed"]),
           "--examples", str(data["examples"]), "--max-turn", str(c["max_turn"]), "--save-every", "10",
           "--threads", "1", "--no-progress", "--init-adapter", str(shipped_dir(role))]
    if rule.mode == "upper":
        cmd += ["--top-k", str(rule.top_k)]
    return cmd + (["--resume"] if (out / "checkpoint" / "state.json").exists() else [])


def adapter_sets(work: Path) -> dict[str, Path]:
    """{tag: directory holding one adapter per role} for every rule's training mode."""
    return {r.tag: work / r.tag for r in RULES}


BUSY_S = 1800  # a training log written this recently belongs to a run still going (one step can take 10 min under load)


def _run(cmd: list[str], env: dict, log) -> int:
    """One niced child in its own session: on a kernel with autogroup scheduling the children of
    one session share one CPU share, so lanes started from one process would not run side by side."""
    return subprocess.run(["nice", "-n", "10", *cmd], env=env, stdout=log, stderr=subprocess.STDOUT,
                          start_new_session=True).returncode


def _train_one(cmd: list[str], out: Path) -> dict:
    from macaronic.train.compare import shown

    rec = {"dir": str(out), "command": shown(cmd)}
    marks = [out.parent / f"{out.name}.log", out / "history.jsonl"]  # the log, and one line per step
    while not (out / "macaronic.json").exists() and \
            time.time() - max((m.stat().st_mtime for m in marks if m.exists()), default=0) < BUSY_S:
        time.sleep(10)  # another process (an earlier, interrupted invocation) is training this directory
    if not (out / "macaronic.json").exists():
        out.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, "OMP_NUM_THREADS": "1"}
        t0 = time.time()
        with (out.parent / f"{out.name}.log").open("a") as f:
            f.write("+ " + " ".join(cmd) + "\n")
            f.flush()
            rc = _run(cmd, env, f)
        if rc:
            raise SystemExit(f"training failed (rc {rc}); see {out.parent / (out.name + '.log')}")
        rec["wall_s_this_run"] = round(time.time() - t0, 1)
    m = json.loads((out / "macaronic.json").read_text())
    rec["train_s"] = m["training"]["seconds"]
    rec["steps"] = m["training"]["steps_done"]
    rec["loss_first_last"] = [m["training"]["first_loss"], m["training"]["final_loss"]]
    return rec


def convert(role: str, rule: Rule, out: Path, n_layers: int | None = None) -> dict:
    """A rule's specialist at zero steps: the shipped adapter's weights under the rule's mode (upper-k
    keeps the top k layers; full drops the Activated-LoRA key). For roles too costly to retrain here."""
    import shutil

    from macaronic.engine.adapters import save_adapter
    from macaronic.engine.base import load_base
    from safetensors.torch import load_file

    src = shipped_dir(role)
    if not (out / "macaronic.json").exists():
        meta = json.loads((src / "macaronic.json").read_text())
        if rule.mode == "turn":
            shutil.copytree(src, out, dirs_exist_ok=True)
        else:
            cfg = json.loads((src / "adapter_config.json").read_text())
            n_layers = n_layers or load_base(None).args.n_layers
            low = n_layers - rule.top_k if rule.mode == "upper" else 0
            t = load_file(str(src / "adapter_model.safetensors"))
            pairs = {}
            for key, v in t.items():
                parts = key.split(".")
                layer, target = int(parts[parts.index("layers") + 1]), parts[-3]
                if layer >= low:
                    pairs.setdefault((layer, target), [None, None])[0 if ".lora_A." in key else 1] = v
            meta.update(mode=rule.mode, converted_from=str(src.relative_to(ROOT)))
            meta.pop("top_k", None)
            if rule.mode == "upper":
                meta["top_k"] = rule.top_k
            save_adapter(out, {k: tuple(ab) for k, ab in pairs.items()}, rank=cfg["r"], alpha=cfg["lora_alpha"],
                         meta=meta, dtype=next(iter(t.values())).dtype)
    return {"dir": str(out), "converted_from": str(src.relative_to(ROOT)), "steps": 0, "train_s": 0.0}


TRAINED = ("agent",)
CONVERTED = tuple(r for r in ROLES if r not in TRAINED)


def train_set(work: Path, tag: str, steps_frac: float, roles=TRAINED, converted=CONVERTED) -> dict:
    """One adapter set: the `roles` trained under the set's mode, the `converted` ones at zero steps."""
    rule = next(r for r in RULES if r.tag == tag)
    done = {f"{tag}/{role}": convert(role, rule, work / tag / role) for role in converted}
    for role in roles:
        out = work / tag / role
        done[f"{tag}/{role}"] = _train_one(train_cmd(role, rule, out, steps_frac), out)
    return done


def run_all(work: Path, steps_frac: float, lanes: int, evaluate: bool, contract: Path, workers: int,
            router_policy: str | None) -> tuple[dict, dict]:
    """Every adapter set trained, and (with `evaluate`) each of its rules scored as soon as the set
    is ready, `lanes` sets at a time. Returns (training records, evaluation docs by rule)."""
    tags = list(dict.fromkeys(r.tag for r in RULES))

    def one(tag: str):
        trained = train_set(work, tag, steps_frac)
        docs = {}
        if evaluate:
            for r in (r for r in RULES if r.tag == tag):
                parts = [_eval_one(cmd, out) for cmd, out in eval_cmds(r, work, contract, workers, router_policy)]
                docs[r.name] = _merged(parts)
        return trained, docs

    with ThreadPoolExecutor(lanes) as ex:
        results = list(ex.map(one, tags))
    trained = {k: v for t, _ in results for k, v in t.items()}
    docs = {name: d for _, ds in results for name, d in ds.items()}
    return trained, {r.name: docs[r.name] for r in RULES if r.name in docs}


# ---- switch cost: switched-turn TTFT and bytes per cached token, every rule side by side ----

def _rule_adapters(base_args, work: Path, rule: Rule, rank: int = 16) -> tuple[Path, Path]:
    """Two random adapters (A computes the history, B takes the next turn) in the rule's mode."""
    from macaronic.testing import make_random_adapter

    return tuple(make_random_adapter(work / f"{rule.tag}-{n}", base_args, rank=rank, seed=200 + j, mode=rule.mode,
                                     top_k=rule.top_k or None, scale=0.05) for j, n in enumerate("ab"))


def _engine_cpu_ms(llm) -> float:
    """CPU time of the engine's thread (with one torch thread it does all the model's work), ms."""
    return time.clock_gettime(time.pthread_getcpuclockid(llm.engine._thread.ident)) * 1000


def switch_cost(lengths=(512, 2048, 4096), reps: int = 3, work: Path | None = None, rules=RULES) -> dict:
    """Per rule and history length: time to first token of a turn on adapter B after a history on
    adapter A (wall, and the engine thread's CPU time, which a loaded machine does not inflate;
    median of `reps`, rules interleaved within each rep), the positions recomputed, and the bytes
    the prefix cache holds per token. One engine per rule over one shared base."""
    import tempfile

    from macaronic.bench.suite import _trim, conversation, med
    from macaronic.engine.base import load_base
    from macaronic.engine.engine import EngineConfig
    from macaronic.engine.llm import LLM, load_tokenizer
    from macaronic.engine.sampling import SamplingParams

    base = load_base(None)
    tok = load_tokenizer(base.path)
    tmp = Path(work or tempfile.mkdtemp(prefix="macaronic-modes-"))
    llms = {}
    for r in rules:
        llm = LLM(base, tok, EngineConfig(max_context=8192, prefill_chunk=1024, history=r.history))
        a, b = _rule_adapters(base.args, tmp, r)
        llm.add_adapter(a, "a"), llm.add_adapter(b, "b")
        llms[r.name] = llm
    one = SamplingParams(max_tokens=1, stop_token_ids=())
    rows = []
    try:
        for n in lengths:
            msgs, nxt = conversation(tok, n + 200)
            first = next(iter(llms.values()))
            hist = _trim(first, msgs, n)
            tail = first.encode_chat([{"role": "user", "content": nxt[0]["content"]}])
            prompt = hist + tail[first.turn_start(tail):]
            # the history's last turn (the assistant's answer) was A's: where A's turn began
            a_from = first.turn_start(hist)
            ms = {r.name: [] for r in rules}
            cpu = {r.name: [] for r in rules}
            usage = {}
            for _ in range(reps):
                for r in rules:
                    llm = llms[r.name]
                    llm.engine.cache.clear()
                    llm.submit(hist, "a", one, active_from=a_from if r.mode == "turn" else None).result()
                    c0 = _engine_cpu_ms(llm)
                    h = llm.submit(prompt, "b", one)
                    h.result()
                    cpu[r.name].append(round(_engine_cpu_ms(llm) - c0, 1))
                    ms[r.name].append(h.usage["ttft_ms"])
                    usage[r.name] = h.usage
                    usage[r.name]["bytes_per_token"] = round(
                        sum(e.nbytes for e in llm.engine.cache._entries.values())
                        / max(1, sum(len(e.tokens) for e in llm.engine.cache._entries.values())))
            for r in rules:
                u = usage[r.name]
                rows.append({"rule": r.name, "history_tokens": n, "prompt_tokens": len(prompt),
                             "ttft_ms": med(ms[r.name]), "ttft_ms_all": ms[r.name],
                             "cpu_ms": med(cpu[r.name]), "cpu_ms_all": cpu[r.name],
                             "reused_tokens": u["reused_tokens"], "upper_tokens": u["upper_tokens"],
                             "prefill_tokens": u["prefill_tokens"], "bytes_per_token": u["bytes_per_token"]})
    finally:
        for llm in llms.values():
            llm.close()
    return {"rows": rows, "rank": 16, "reps": reps, "layers": base.args.n_layers}


# ---- quality: the contract's multi-turn suites, served under each rule ----------------------

def _slug(rule: Rule) -> str:
    return rule.name.replace("/", "-")


def eval_cmds(rule: Rule, work: Path, contract: Path, workers: int, router_policy: str | None) -> list[tuple[list[str], Path]]:
    """The `macaronic eval ablate` commands that serve the rule's adapter set (routed) on the
    contract's mixed suite, then its agent suite (one task log), then the dev-split diagnostics
    (their own task log); its pair manifest is written here."""
    from macaronic.harness import DEFAULT_BUNDLE
    from macaronic.pairs import PairManifest

    ev = work / "eval"
    ev.mkdir(parents=True, exist_ok=True)
    pair = PairManifest.build(None, {role: work / rule.tag / role for role in ROLES}, DEFAULT_BUNDLE)
    pair_path = pair.save(ev / f"{_slug(rule)}.pair.json")
    out = []
    for suite, split in [*((s, "test") for s in SUITES), *((s, "dev") for s in DEV_SUITES)]:
        name = suite if split == "test" else f"{suite}-dev"
        cmd = [sys.executable, "-m", "macaronic.cli", "eval", "ablate", "--contract", str(contract),
               "--pair", str(pair_path), "--configs", "routed", "--suites", suite, "--no-external",
               "--history", rule.history, "--json", str(ev / f"{_slug(rule)}.{name}.json"),
               "--tasks", str(ev / f"{_slug(rule)}.{'dev.' if split == 'dev' else ''}tasks.jsonl"),
               "--workers", str(workers), "--threads", "1", "--quiet"]
        if split == "dev":
            cmd += ["--split", "dev"]
        if router_policy:
            cmd += ["--router-policy", router_policy]
        out.append((cmd, ev / f"{_slug(rule)}.{name}.json"))
    return out


def _eval_one(cmd: list[str], out: Path) -> dict:
    if not out.exists():
        env = {**os.environ, "OMP_NUM_THREADS": "1"}
        t0 = time.time()
        with out.with_suffix(".log").open("a") as f:
            f.write("+ " + " ".join(cmd) + "\n")
            f.flush()
            rc = _run(cmd, env, f)
        if rc:
            raise SystemExit(f"evaluation failed (rc {rc}); see {out.with_suffix('.log')}")
        print(f"evaluated {out.name} in {time.time() - t0:.0f} s", file=sys.stderr)
    return json.loads(out.read_text())


SUITES = ("mixed", "agent")  # the contract's multi-turn suites, sealed test split: the default rule reads these
DEV_SUITES = ("agent",)  # also answered on the dev split, a diagnostic column outside the rule


def budgets(work: Path, rules) -> dict[str, dict[str, int]]:
    """{rule: {role: SFT steps taken under the rule}} from the adapters on disk: 0 for the shipped
    weights (converted, or the shipped turn adapter itself), else the adapter's own steps_done."""
    out = {}
    for r in (r for r in RULES if r.name in rules):
        out[r.name] = {}
        for role in ROLES:
            d = work / r.tag / role
            m = json.loads((d / "macaronic.json").read_text())
            same = (d / "adapter_model.safetensors").read_bytes() == \
                (shipped_dir(role) / "adapter_model.safetensors").read_bytes()
            out[r.name][role] = 0 if m.get("converted_from") or same else m["training"]["steps_done"]
    return out


def _merged(parts: list[dict]) -> dict:
    """One rule's evaluation docs (one per suite and split) as one: the test docs' task log in
    `tasks`, the dev docs' in `dev_tasks`."""
    dev = [p for p in parts if p.get("split") == "dev"]
    return {**parts[0], "command": [p["command"] for p in parts], "wall_s": sum(p["wall_s"] for p in parts),
            "units": sum(p["units"] for p in parts), **({"dev_tasks": dev[0]["tasks"]} if dev else {})}


def finished_evaluations(work: Path) -> dict[str, dict]:
    """{rule: evaluation doc} for every rule scored under `work` (its dev diagnostics when they
    are there); one still running gives its task log as a partial doc."""
    out = {}
    for r in RULES:
        parts = [work / "eval" / f"{_slug(r)}.{s}.json" for s in SUITES]
        dev = [p for s in DEV_SUITES if (p := work / "eval" / f"{_slug(r)}.{s}-dev.json").exists()]
        tasks = work / "eval" / f"{_slug(r)}.tasks.jsonl"
        if all(p.exists() for p in parts):
            out[r.name] = _merged([json.loads(p.read_text()) for p in parts + dev])
        elif tasks.exists() and tasks.stat().st_size:
            out[r.name] = {"tasks": str(tasks), "partial": True, "history": r.history}
    return out


def quality(contract_path: Path, docs: dict[str, dict]) -> dict:
    """Per rule and suite: mean task score with its bootstrap interval, and the paired difference
    against the best rule on that suite (same tasks); the dev-split diagnostics under "dev"."""
    from macaronic.contract.spec import parse

    contract = parse(contract_path)
    out = _compare(contract, docs, "tasks", SUITES, "test")
    dev = {n: d for n, d in docs.items() if d.get("dev_tasks")}
    if dev:
        out["dev"] = _compare(contract, dev, "dev_tasks", DEV_SUITES, "dev")
    return out


def _compare(contract, docs: dict[str, dict], log: str, suites, split: str) -> dict:
    from macaronic.contract.evaluate import read_rows
    from macaronic.contract.report import task_scores
    from macaronic.contract.stats import bootstrap_ci, paired_bootstrap

    g = contract.gate
    scores = {}
    for name, d in docs.items():
        rows = [r for r in read_rows(d[log], contract.sha256) if r.get("config") == "routed"
                and r.get("split", "test") == split
                and (d.get("partial") or r["pair"] == f"routed/{d['pair_ids']['routed']}")]
        scores[name] = task_scores(contract, rows)
    out: dict = {"rules": {n: {} for n in docs}, "best": {}}
    for si, suite in enumerate(suites):
        have = {n: {k for k, t in sc.items() if t["suite"] == suite} for n, sc in scores.items()}
        names = [n for n in docs if have[n]]  # a rule still being scored may have none of this suite yet
        if not names:
            continue
        # the best among the rules with the most tasks of the suite; a rule still being scored is
        # compared with it over the tasks it has (its n says how many)
        most = max(len(have[n]) for n in names)
        keys = sorted(set.intersection(*[have[n] for n in names if len(have[n]) == most]))
        means = {n: sum(scores[n][k]["score"] for k in keys) / len(keys) for n in names if len(have[n]) == most}
        best = max(means, key=lambda n: (means[n], -names.index(n)))
        out["best"][suite] = best
        for n in names:
            keys = sorted(have[n] & have[best])
            xs = [scores[n][k]["score"] for k in keys]
            d, ci = paired_bootstrap(xs, [scores[best][k]["score"] for k in keys], g.resamples, g.confidence, g.seed + si)
            block = {"n": len(keys), "score": sum(xs) / len(xs), "ci95": bootstrap_ci(xs, g.resamples, g.confidence, g.seed + si),
                     "delta_vs_best": d, "delta_ci95": ci}
            for extra in ("route_acc", "answer_acc"):  # the mixed suite's (its doc is the first of a rule's)
                v = docs[n].get("configs", {}).get("routed", {}).get(suite, {}).get(extra) if split == "test" else None
                if v is not None:
                    block[extra] = v
            out["rules"][n][suite] = block
    return out


def choose_default(q: dict, cost: dict, at: int = 4096) -> dict:
    """The served rule: the cheapest (switched-turn TTFT after `at` tokens of history, then bytes
    per cached token) among the rules whose score on every suite is within the 95% interval of
    the best rule's (the paired interval of the difference reaches zero)."""
    ttft = {r["rule"]: (r.get("cpu_ms", r["ttft_ms"]), r["bytes_per_token"]) for r in cost["rows"] if r["history_tokens"] == at}
    ok = [n for n, suites in q["rules"].items()  # scored on every task of every suite, and not below the best on any
          if suites and set(suites) == set(q["best"])
          and all(b["n"] == q["rules"][q["best"][s]][s]["n"] for s, b in suites.items())
          and all(b["delta_ci95"] is None or b["delta_ci95"][1] >= 0 for b in suites.values())]
    chosen = min(ok, key=lambda n: ttft.get(n, (float("inf"), 0))) if ok else None
    return {"rule": chosen, "eligible": ok, "cost_at_history_tokens": at,
            "text": "the cheapest rule (time to first token of a switched turn after 4k tokens of history, in engine "
                    "CPU time; then bytes per cached token) "
                    "whose score on every multi-turn suite is within the 95% paired interval of the best rule's"}


# ---- the table and the plot -------------------------------------------------------------------

def _ci(b: dict | None, best: bool = False) -> str:
    if not b:
        return "–"
    s = f"{b['score']:.3f}, n {b['n']}"
    if b.get("delta_ci95") and not best:  # a tie with the best shows its zero interval
        lo, hi = b["delta_ci95"]
        s += f" ({b['delta_vs_best']:+.3f} [{lo:+.3f}, {hi:+.3f}])"
    else:
        s += " (best)"
    return s


def markdown(doc: dict) -> str:
    cost, q, lengths = doc["switch_cost"], doc.get("quality"), sorted({r["history_tokens"] for r in doc["switch_cost"]["rows"]})
    by = {(r["rule"], r["history_tokens"]): r for r in cost["rows"]}
    names = [r.name for r in RULES if any(x["rule"] == r.name for x in cost["rows"])]
    dev = (q or {}).get("dev")
    head = ["rule", *(f"{s} score (Δ vs best [95% CI])" for s in SUITES if q),
            *(f"{s} on the dev split (diagnostic)" for s in DEV_SUITES if dev),
            *(f"switched turn, {n // 1024}k history: CPU ms (wall ms)" if n >= 1024 else
              f"switched turn, {n} history: CPU ms (wall ms)" for n in lengths),
            f"recomputed at {lengths[-1]}: all layers / top only", "bytes per cached token"]
    lines = ["| " + " | ".join(head) + " |", "|---|" + "---:|" * (len(head) - 1)]
    for n in names:
        last = by[(n, lengths[-1])]
        cells = [_ci(q["rules"].get(n, {}).get(s), q["best"].get(s) == n) for s in SUITES] if q else []
        cells += [_ci(dev["rules"].get(n, {}).get(s), dev["best"].get(s) == n) for s in DEV_SUITES] if dev else []
        cells += [f"{by[(n, L)].get('cpu_ms', float('nan')):,.0f} ({by[(n, L)]['ttft_ms']:,.0f})" for L in lengths]
        cells += [f"{last['prefill_tokens']:,} / {last['upper_tokens']:,}", f"{last['bytes_per_token']:,}"]
        lines.append(f"| {n} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def plot(doc: dict, out: Path) -> Path:
    """Quality (mixed and agent scores, 95% CI; the dev-split agent diagnostic hollow) against
    switch cost (TTFT after the longest history)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cost, q = doc["switch_cost"], doc["quality"]
    at = max(r["history_tokens"] for r in cost["rows"])
    x = {r["rule"]: r.get("cpu_ms", r["ttft_ms"]) for r in cost["rows"] if r["history_tokens"] == at}
    fig, ax = plt.subplots(figsize=(8, 4.8))
    series = [(q, s, m, f"{s} suite", {}) for s, m in zip(SUITES, ("o", "s"))]
    if q.get("dev"):
        series += [(q["dev"], s, "^", f"{s} suite, dev split (diagnostic)", {"mfc": "none"}) for s in DEV_SUITES]
    for si, (qq, suite, marker, label, style) in enumerate(series):
        pts = [(n, x[n], qq["rules"][n][suite]) for n in qq["rules"] if suite in qq["rules"][n] and n in x]
        xs, ys = [p[1] for p in pts], [p[2]["score"] for p in pts]
        lo = [p[2]["score"] - p[2]["ci95"][0] if p[2]["ci95"] else 0 for p in pts]
        hi = [p[2]["ci95"][1] - p[2]["score"] if p[2]["ci95"] else 0 for p in pts]
        ax.errorbar(xs, ys, yerr=[lo, hi], fmt=marker, capsize=3, label=label, **style)
        for n, xv, b in pts:
            ax.annotate(n, (xv, b["score"]), textcoords="offset points", xytext=(5, 4 - 10 * si), fontsize=8)
    ax.set_xscale("log")
    ax.set_xlabel(f"switched turn after {at} tokens of history: engine CPU ms to the first token (log)")
    ax.set_ylabel("contract score (95% bootstrap CI)")
    ax.set_title("Adapter-switch rules: quality vs switch cost")
    ax.legend(fontsize=8)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out


def run(a, argv: list[str]) -> int:
    """The study with the options of `macaronic bench modes` (`a`: commands/bench.py parses them)."""
    import torch

    from macaronic.bench import machine

    t0 = time.time()
    doc = {"command": "macaronic bench modes " + " ".join(argv), "machine": machine.describe(),
           "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "load_avg_start": os.getloadavg()}
    if a.report_only:
        docs = finished_evaluations(a.work)
        doc["partial"] = sorted(n for n, d in docs.items() if d.get("partial"))
        doc["evaluations"] = {n: {k: d.get(k) for k in ("command", "wall_s", "units", "router", "history")}
                              for n, d in docs.items()}
        doc["quality"] = quality(a.contract, docs)
        doc["budget"] = budgets(a.work, docs)
    elif not a.cost_only:
        doc["train"], docs = run_all(a.work, a.steps_frac, a.lanes, not a.train_only, a.contract, a.workers,
                                     a.router_policy)
        doc["steps_frac"], doc["trained_roles"], doc["converted_roles"] = a.steps_frac, TRAINED, CONVERTED
        doc["train_eval_wall_s"] = round(time.time() - t0, 1)
        if a.train_only:
            print(json.dumps(doc["train"], indent=1))
            return 0
        doc["evaluations"] = {n: {k: d[k] for k in ("command", "wall_s", "units", "router", "history", "pair_ids")}
                              for n, d in docs.items()}
        doc["quality"] = quality(a.contract, docs)
        doc["budget"] = budgets(a.work, docs)
    torch.set_num_threads(a.threads)
    t2 = time.time()
    if a.reuse_cost:
        old = json.loads(a.reuse_cost.read_text())
        doc["switch_cost"] = {**old["switch_cost"], "measured_by": old["command"], "measured": old["date"],
                              "load_avg": [old["load_avg_start"], old["load_avg_end"]]}
    else:
        doc["switch_cost"] = switch_cost(tuple(int(x) for x in a.lengths.split(",")), a.reps)
        doc["cost_wall_s"] = round(time.time() - t2, 1)
    doc["load_avg_end"] = os.getloadavg()
    if "quality" in doc:
        doc["default"] = choose_default(doc["quality"], doc["switch_cost"])
    a.json.parent.mkdir(parents=True, exist_ok=True)
    a.json.write_text(json.dumps(doc, indent=1) + "\n")
    text = markdown(doc)
    if "quality" in doc:
        plot(doc, a.png)
    if a.md:
        from macaronic.bench.docs import write_section

        write_section(Path(a.md), *markers(a.json), a.title, section(doc, a))
    print(text)
    return 0


def section(doc: dict, a) -> str:
    la = doc["load_avg_start"]
    parts = [f"Command: `{doc['command']}` ({doc['date']}; load average {la[0]:.1f} at the start, "
             f"{doc['load_avg_end'][0]:.1f} at the end, on {doc['machine'].get('cpu', 'this machine')}). Raw: `{a.json}`.", ""]
    if "quality" in doc:
        parts += [f"![quality vs switch cost]({Path(a.png).relative_to('docs') if str(a.png).startswith('docs/') else a.png})", ""]
    if "budget" in doc:
        steps = {f"{role} {', '.join(sorted({str(b[role]) for b in doc['budget'].values()}))}" for role in ROLES}
        parts += ["Budget: SFT steps each rule's specialist took under its own rule, warm-started from the shipped "
                  f"adapter (0 = the shipped weights under the rule): {'; '.join(sorted(steps))}.", ""]
    if doc.get("partial"):
        unscored = [s for s in SUITES if s not in doc["quality"]["best"]]
        parts += [f"Scored from the task logs of evaluations that had not finished every suite when this was written "
                  f"(such a rule is compared with the best over the tasks it has; its n says how many): "
                  f"{', '.join(doc['partial'])}"
                  + (f"; not scored at all: {', '.join(unscored)} suite" if unscored else "") + ". A rule with "
                  "no score was not trained or scored in this run; its switch cost is measured all the same.", ""]
    parts += [markdown(doc), ""]
    if doc.get("quality", {}).get("dev"):
        parts += ["The dev-split column is a diagnostic: the contract's dev tasks of that suite, answered like the "
                  "test ones; the default rule reads the sealed test split only.", ""]
    if "default" in doc:
        d = doc["default"]
        parts += [f"Served default by the written rule ({d['text']}): **{d['rule']}** "
                  f"(eligible: {', '.join(d['eligible']) or 'none'}).", ""]
    return "\n".join(parts)
