"""`macaronic bench modes`: what each adapter-switch rule costs in quality and in time.

    macaronic bench modes --work runs/modes --json docs/bench/modes.json
    macaronic bench modes --train-only --work runs/modes      # just the specialists, two lanes

Rules (rows):

  full         LoRA on every token; K/V valid per adapter only (the vLLM rule): a switch re-prefills
  turn/cached  turn-activated LoRA; history K/V kept as each earlier turn's own adapter computed it
  turn/base    the same adapters; history always the bare base's (the earlier turns re-encoded), as
               in training
  upper-k      LoRA in the top k of the base's layers on every token; the cache keeps the residual
               stream entering layer L-k, so a switch recomputes k/L of the history

Budget: every rule's four specialists start from the shipped adapters (upper-k keeps their top
k layers only) and take the same number of SFT steps under their own rule, `--steps-frac` of the
shipped recipe's steps, same data, seed, rank, batch and lr. turn/cached and turn/base share the
turn adapters (they differ only in how the engine serves history).

Quality: the contract's multi-turn suites (mixed: routed 2-3 turn conversations across roles;
agent: tool episodes) on its sealed test split, through the served harness, paired bootstrap
against the best row. Cost: switched-turn time to first token after 512/2k/4k tokens of history
(the previous turns on another adapter, measured interleaved in one process) and bytes cached
per token. Trains what is missing under --work (niced, one torch thread per process); writes
one JSON, a PNG and the table in docs/BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
ROLES = ("chat", "agent", "coding", "genui")
START, END = "<!-- bench:modes:start -->", "<!-- bench:modes:end -->"


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
    cmd = [sys.executable, "-m", "macaronic.train.cli", role, "--generator", gen, "--out", str(out),
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


def _train_one(cmd: list[str], out: Path) -> dict:
    rec = {"dir": str(out), "command": " ".join(cmd[2:])}
    if not (out / "macaronic.json").exists():
        out.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, "OMP_NUM_THREADS": "1"}
        t0 = time.time()
        with (out.parent / f"{out.name}.log").open("a") as f:
            f.write("+ " + " ".join(cmd) + "\n")
            f.flush()
            rc = subprocess.run(["nice", "-n", "10", *cmd], env=env, stdout=f, stderr=subprocess.STDOUT).returncode
        if rc:
            raise SystemExit(f"training failed (rc {rc}); see {out.parent / (out.name + '.log')}")
        rec["wall_s_this_run"] = round(time.time() - t0, 1)
    m = json.loads((out / "macaronic.json").read_text())
    rec["train_s"] = m["training"]["seconds"]
    rec["steps"] = m["training"]["steps_done"]
    rec["loss_first_last"] = [m["training"]["first_loss"], m["training"]["final_loss"]]
    return rec


def train_all(work: Path, steps_frac: float, lanes: int = 2, roles=ROLES) -> dict:
    """Train every (adapter set, role) that is missing, `lanes` processes at a time, longest first."""
    jobs = []
    for rule in {r.tag: r for r in RULES}.values():
        for role in roles:
            out = work / rule.tag / role
            jobs.append((role, rule.tag, train_cmd(role, rule, out, steps_frac), out))
    order = {"genui": 0, "agent": 1, "chat": 2, "coding": 3}
    jobs.sort(key=lambda j: order.get(j[0], 9))
    with ThreadPoolExecutor(lanes) as ex:
        futs = {(tag, role): ex.submit(_train_one, cmd, out) for role, tag, cmd, out in jobs}
        return {f"{tag}/{role}": f.result() for (tag, role), f in futs.items()}


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="macaronic bench modes", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--work", type=Path, default=Path("runs/modes"), help="adapter sets are trained here")
    p.add_argument("--steps-frac", type=float, default=0.25,
                   help="SFT steps per specialist under its rule, as a fraction of the shipped recipe's")
    p.add_argument("--lanes", type=int, default=2, help="training processes at a time")
    p.add_argument("--train-only", action="store_true", help="train the missing specialists and stop")
    return p


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    a = parser().parse_args(argv)
    t0 = time.time()
    trained = train_all(a.work, a.steps_frac, a.lanes)
    print(json.dumps({"train_wall_s": round(time.time() - t0, 1), "trained": trained}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
