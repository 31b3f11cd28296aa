"""The generation loop, resumable after `kill -9` at any point.

Workdir layout (every file is written once, atomically or append-only):

  lineage.sqlite        pairs, decisions, alias moves (keyed writes: replays are no-ops)
  audit.jsonl           every split read, allowed or refused
  strata.json           frozen from the generation-0 champion's test results
  gen-000/eval.json     the reference evaluation of the initial champion (+ .tasks.jsonl)
  experience.jsonl      every champion's graded train experience, one row per (pair, task,
                        sample); a champion kept from the last generation is not asked again,
                        and generations whose steps learn nothing from it skip it
  gen-NNN/candidate/    the successor (harness, adapters, data, pair.json, changes.json)
  gen-NNN/eval.json     parent vs child under the contract, by `macaronic eval` in its own process
  report.json, report.png   regenerated from the above after every generation

A step is skipped when its output exists; a torn JSONL tail is cut on reopen; a half-built
candidate (candidate.tmp) is rebuilt; lineage writes carry keys. So a rerun finishes the
interrupted step and counts nothing twice. The loop itself draws nothing: it reports progress
through callbacks, and plotting is plot.py's.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from macaronic.contract.evaluate import ResultLog, read_rows, write_json_atomic
from macaronic.contract.report import freeze_strata
from macaronic.contract.sealed import SplitLoader
from macaronic.evolve.collect import collect
from macaronic.evolve.config import Budget, Plan, step_spec
from macaronic.evolve.successor import build_successor, data_manifest_sha256
from macaronic.pairs.ids import PairManifest
from macaronic.pairs.lineage import Lineage


FEATURES = "router-features.npz"  # cache of pooled base features of routed texts (not history)
EXPERIENCE_STEPS = ("rft", "router_refit")  # steps that learn from the champion's experience


@dataclass
class Hooks:
    """What the caller wants to see; all optional."""

    log: callable = field(default=lambda msg: None)
    progress: callable = field(default=lambda label, done, total: None)  # done None = +1


def gen_dir(workdir: Path, g: int) -> Path:
    return workdir / f"gen-{g:03d}"


def run_eval(contract_path: Path, workdir: Path, child: Path, out: Path, parent: Path | None = None,
             quiet: bool = True, answerer: str = "harness") -> dict:
    """`macaronic eval` in its own process; rerunning after a crash resumes its task log."""
    if out.exists():
        return json.loads(out.read_text())
    priors = sorted(str(p) for p in workdir.glob("gen-*/eval.json.tasks.jsonl") if p.parent != out.parent)
    cmd = [sys.executable, "-m", "macaronic.cli", "eval", "--pair", str(child), "--contract", str(contract_path),
           "--json", str(out), "--audit", str(workdir / "audit.jsonl"), "--lineage", str(workdir / "lineage.sqlite"),
           "--answerer", answerer]
    if (workdir / "strata.json").exists():
        cmd += ["--strata", str(workdir / "strata.json")]
    if parent is not None:
        cmd += ["--parent", str(parent)]
    for p in priors:
        cmd += ["--prior", p]
    if quiet:
        cmd.append("--quiet")
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=None if not quiet else subprocess.PIPE, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"macaronic eval exited {p.returncode}:\n{(p.stderr or '')[-3000:]}")
    return json.loads(out.read_text())


def initial_pair(workdir: Path, lin: Lineage, ref: str | None) -> PairManifest:
    """The generation-0 champion: --pair (manifest path or lineage ref), else the default base with
    the shipped specialists and the shipped harness."""
    p0 = gen_dir(workdir, 0) / "pair.json"
    if p0.exists():
        return PairManifest.load(p0)
    if ref and Path(ref).is_file():
        m = PairManifest.load(ref)
    elif ref:
        m = lin.pair(ref)
    else:
        m = default_pair(p0.parent)
    p0.parent.mkdir(parents=True, exist_ok=True)
    m.save(p0.with_suffix(".tmp"))
    os.replace(p0.with_suffix(".tmp"), p0)
    return m


def default_pair(where: Path, fit_router: bool = False) -> PairManifest:
    """The default base, the shipped specialists and a copy of the shipped harness. Its router is
    the route prompt (what `macaronic serve` uses until its fitted router is ready); with
    `fit_router` the bundle's policy is fitted on the shipped routing data first (slow on CPU)."""
    import shutil

    from macaronic.engine.llm import load_llm, shipped_adapters_dir
    from macaronic.evolve.successor import fit_shipped_router, load_features, save_features
    from macaronic.harness import DEFAULT_BUNDLE

    d = shipped_adapters_dir()
    ads = {p.name: p for p in sorted(d.iterdir()) if (p / "adapter_config.json").exists()} if d.is_dir() else {}
    harness = where / "harness"
    if harness.exists():
        shutil.rmtree(harness)  # a half-fitted copy from a crash
    shutil.copytree(DEFAULT_BUNDLE, harness, ignore=shutil.ignore_patterns("__pycache__"))
    if not fit_router:
        return PairManifest.build(None, ads, harness)
    llm = load_llm(None, [])
    for role, path in ads.items():
        llm.add_adapter(path, name=role)  # the router's Arrow policy looks adapters up by role
    cache = where.parent / FEATURES
    try:
        features = load_features(cache, llm.base.fingerprint)
        fit_shipped_router(llm, harness, features)
        save_features(cache, llm.base.fingerprint, features)
    finally:
        llm.close()
    return PairManifest.build(None, ads, harness, base_fp=llm.base.fingerprint)


def evolve(contract_path: Path, workdir: Path, generations: int, budget: Budget = Budget(), plan: Plan = Plan(),
           pair: str | None = None, hooks: Hooks = Hooks(), answerer: str = "harness") -> dict:
    """Run (or finish) `generations` generations; returns the summary (report.json's content)."""
    from macaronic.contract import spec as cspec

    workdir.mkdir(parents=True, exist_ok=True)
    contract = cspec.load(contract_path, SplitLoader(cspec.parse(contract_path), "check", workdir / "audit.jsonl"))
    with Lineage(workdir / "lineage.sqlite") as lin:
        _check_contract_unchanged(lin, contract)
        champ = initial_pair(workdir, lin, pair)
        lin.add_pair(champ)
        lin.move_alias("champion", champ.id, "initial champion", key="gen-0:champion")
        g0 = gen_dir(workdir, 0)
        hooks.log(f"gen 0: reference evaluation of {champ.id[:12]}")
        ref = run_eval(contract_path, workdir, g0 / "pair.json", g0 / "eval.json", answerer=answerer)
        strata_path = workdir / "strata.json"
        if not strata_path.exists():
            rows = read_rows(g0 / "eval.json.tasks.jsonl", contract.sha256)
            strata = freeze_strata(contract, [r for r in rows if r["pair"] == champ.id])
            write_json_atomic(strata_path, {"reference": champ.id, "contract_sha256": contract.sha256,
                                            "easy_min": contract.strata.easy_min,
                                            "hard_max": contract.strata.hard_max, "tasks": strata})
        lin.record(key="gen-0", pair_id=champ.id, parent_id=None, generation=0, decision="reference",
                   reasons=[], changes=[], contract_id=contract.id, contract_sha256=contract.sha256,
                   report_sha256=_sha(g0 / "eval.json"))
        for g in range(1, generations + 1):
            # A finished generation keeps the parent it was judged against; a new one starts
            # from the current champion.
            done = [r for r in lin.records() if r["key"] == f"gen-{g}"]
            champ = lin.pair(done[0]["parent_id"] if done else "champion")
            generation(contract, contract_path, workdir, g, champ, budget, plan, lin, hooks, answerer)
        return summary(contract, workdir, lin)


def generation(contract, contract_path: Path, workdir: Path, g: int, champ: PairManifest, budget: Budget,
               plan: Plan, lin: Lineage, hooks: Hooks, answerer: str = "harness") -> None:
    d = gen_dir(workdir, g)
    d.mkdir(parents=True, exist_ok=True)
    cand_dir = d / "candidate"
    if not (d / "eval.json").exists() and not (cand_dir / "pair.json").exists():
        runner = None
        steps = plan.steps(g)
        needs_experience = any(step_spec(s)[0] in EXPERIENCE_STEPS for s in steps)
        try:
            if needs_experience:
                from macaronic.contract.runner import make_answerer

                # One experience log per workdir, keyed by (pair, task, sample): a champion kept
                # from the last generation is not asked again (same seeds, same replies).
                log = ResultLog(workdir / "experience.jsonl", contract.sha256)
                try:
                    hooks.log(f"gen {g}: collecting train experience with champion {champ.id[:12]}")
                    loader = SplitLoader(contract, "collector", workdir / "audit.jsonl")
                    runner = _LazyRunner(lambda: make_answerer(answerer, champ))
                    collect(contract, loader, runner, champ.id, budget, log,
                            on_unit=lambda done, total: hooks.progress(f"gen {g} collect", done, total))
                finally:
                    log.close()
            rows = [r for r in read_rows(workdir / "experience.jsonl", contract.sha256) if r["pair"] == champ.id]
            if cand_dir.exists():
                import shutil

                shutil.rmtree(cand_dir)  # renamed but pair.json not yet written: rebuild
            if runner is None:
                from macaronic.contract.runner import make_answerer

                runner = _LazyRunner(lambda: make_answerer(answerer, champ))
            hooks.log(f"gen {g}: building the successor ({', '.join(map(str, steps))})")
            from macaronic.evolve.successor import load_features, save_features

            features = load_features(workdir / FEATURES, champ.base_fingerprint)
            ctx = {"contract": contract, "budget": budget, "llm": _Deferred(runner), "features": features,
                   "loader": SplitLoader(contract, "trainer", workdir / "audit.jsonl")}
            build_successor(champ, rows, steps, cand_dir, ctx, log=hooks.log)
            save_features(workdir / FEATURES, champ.base_fingerprint, features)
        finally:
            if runner is not None:
                runner.close()
    child = PairManifest.load(cand_dir / "pair.json")
    changes_doc = json.loads((cand_dir / "changes.json").read_text())
    lin.add_pair(child)
    lin.move_alias("challenger", child.id, f"generation {g} candidate", key=f"gen-{g}:challenger")
    hooks.log(f"gen {g}: evaluating {child.id[:12]} against {champ.id[:12]}")
    report = run_eval(contract_path, workdir, cand_dir / "pair.json", d / "eval.json",
                      parent=_manifest_path(workdir, champ.id), answerer=answerer)
    gate = json.loads((d / "eval.json.gate.json").read_text())
    lin.record(key=f"gen-{g}", pair_id=child.id, parent_id=champ.id, generation=g, decision=report["decision"],
               reasons=gate["checks"],
               changes=changes_doc["changes"], training_config=changes_doc["training_config"],
               data_manifest_sha256=data_manifest_sha256([Path(f) for f in child.data]),
               contract_id=contract.id, contract_sha256=contract.sha256, report_sha256=_sha(d / "eval.json"))
    if report["decision"] == "accept":
        lin.move_alias("champion", child.id, f"accepted in generation {g}", key=f"gen-{g}:champion")
    hooks.log(f"gen {g}: {report['decision']}" + (f" (failed: {', '.join(report['failed_rules'])})"
                                                   if report["failed_rules"] else ""))


class _Deferred:
    """The champion's LLM, loaded on first use (a harness edit needs no model at all)."""

    def __init__(self, runner):
        self._runner = runner

    def __getattr__(self, name):
        return getattr(self._runner.llm, name)


class _LazyRunner:
    """Loads the champion's model only when a reply or the backbone is actually needed."""

    def __init__(self, make):
        self._make, self._runner = make, None

    def _get(self):
        if self._runner is None:
            self._runner = self._make()
        return self._runner

    def reply(self, *a, **k):
        return self._get().reply(*a, **k)

    @property
    def llm(self):
        return self._get().llm

    def close(self):
        if self._runner is not None:
            self._runner.close()


def _manifest_path(workdir: Path, pair_id: str) -> Path:
    for p in sorted(workdir.glob("gen-*/pair.json")) + sorted(workdir.glob("gen-*/candidate/pair.json")):
        if json.loads(p.read_text())["id"] == pair_id:
            return p
    raise FileNotFoundError(f"no manifest for pair {pair_id} under {workdir}")


def _sha(path: Path) -> str:
    import hashlib

    return hashlib.sha256(path.read_bytes()).hexdigest()


def _check_contract_unchanged(lin: Lineage, contract) -> None:
    """A published contract never changes: the same id with another sha256 is refused."""
    for r in lin.records():
        if r["contract_id"] == contract.id and r["contract_sha256"] != contract.sha256:
            raise ValueError(f"contract {contract.id} was used here with sha256 {r['contract_sha256'][:12]}, "
                             f"this file has {contract.sha256[:12]}: a changed contract needs a new version")


def summary(contract, workdir: Path, lin: Lineage) -> dict:
    """report.json's content: per generation, the pair, parent, changes, decision, suites, strata."""
    gens = []
    for r in lin.records():
        g = r["generation"]
        rep = json.loads((gen_dir(workdir, g) / "eval.json").read_text())
        gens.append({"generation": g, "pair_id": r["pair_id"], "parent_id": r["parent_id"], "changes": r["changes"],
                     "decision": r["decision"], "failed_rules": rep["failed_rules"], "suites": rep["suites"],
                     "strata": rep["strata"], "cost": rep["cost"]})
    return {"contract": {"id": contract.id, "sha256": contract.sha256}, "champion": lin.alias("champion"),
            "generations": gens}
