"""Usage: table.py OUT.json [ROWS_DIR]. The activation study's table: per suite, user-header vs assistant-header (same data, steps, lr,
seed), each adapter on its own domain; the paired difference assistant - user with its 95%
bootstrap interval (contract.stats.paired_bootstrap, 2000 resamples, seed 0), the base row beside,
and the README's rule: the cheapest rule (assistant-header) if on every suite its interval against
the best reaches zero, else the best."""
import gzip, json, sys
from pathlib import Path
from macaronic.contract.stats import bootstrap_ci, paired_bootstrap

O = Path(sys.argv[2]) if len(sys.argv) > 2 else Path("runs/act/out")  # the rows: runs/act/out or docs/bench/activation


def jsonl(p):
    p = Path(p)
    text = p.read_text() if p.exists() else gzip.open(str(p) + ".gz", "rt").read()
    return [json.loads(l) for l in text.splitlines() if l.strip()]


def contract_rows(act, suite, config):
    if config == "base":
        act = "user"  # the base rows ran once, in the seed-0 user run
    rows = [r for r in jsonl(O / f"contract-{act}.tasks.jsonl") if r["suite"] == suite and r["config"] == config]
    return {r["task"]: float(r["score"]) for r in rows}


def report_rows(act, config):
    rows = [r for r in jsonl(O / f"humaneval-{act}.tasks.jsonl") if r.get("config") == config]
    return {r["task"]: float(r["score"]) for r in rows}


def instr_rows(act, model):
    if model == "base":
        act = "user"
    d = json.loads((O / f"instructions-{act}.json").read_text())
    return {r["id"]: float(r["passed"]) for r in d["categories"]["instructions"]["rows"][model]}


def seeds(load, n=2):
    """Both seeds' pairs pooled: rows keyed (seed, task)."""
    def f(a, c):
        out = {}
        for sd in range(n):
            rows = load(a if (sd == 0 or c == "base") else f"{a}-s{sd}", c)
            out.update({(sd, k): v for k, v in rows.items()})
        return out
    return f


chat_c = lambda a, c: contract_rows(a, "chat", c)  # noqa: E731
suites = [  # (name, role, loader(act, config)); seed 0 is the matched pair of record, seed 1 its replicate
    ("contract chat (v6 test, score)", "chat", chat_c),
    ("contract coding (v6 test, score)", "coding", lambda a, c: contract_rows(a, "coding", c)),
    ("instructions (104, strict)", "chat", instr_rows),
    ("HumanEval (164, 512 tok)", "coding", report_rows),
    ("seed 1: contract chat", "chat", lambda a, c: chat_c(a if c == "base" else f"{a}-s1", c)),
    ("seed 1: instructions", "chat", lambda a, c: instr_rows(a if c == "base" else f"{a}-s1", c)),
    ("seeds 0+1: contract chat", "chat", seeds(chat_c)),
    ("seeds 0+1: instructions", "chat", seeds(instr_rows)),
]
out = {"suites": [], "rule": "the cheapest activation (assistant header: the user turn is the base's, shared by every "
       "adapter and readable by the route head) whose score on every suite is within the 95% paired interval of the best's"}
ok_all = True
for name, role, load in suites:
    try:
        u, a = load("user", role), load("assistant", role)
    except (FileNotFoundError, KeyError) as e:
        print("missing", name, e, file=sys.stderr)
        continue
    try:
        b = load("user", "base")
    except (FileNotFoundError, KeyError):
        b = {}
    keys = sorted(set(u) & set(a))
    xu, xa = [u[k] for k in keys], [a[k] for k in keys]
    d, ci = paired_bootstrap(xa, xu)
    best = "assistant" if sum(xa) > sum(xu) else "user"
    within = best == "assistant" or ci[1] >= 0
    if not name.startswith("seed"):  # the rule reads the matched pair of record; the replicate is reported
        ok_all &= within
    bk = [k for k in keys if k in b]
    db, cib = paired_bootstrap([u[k] for k in bk], [b[k] for k in bk]) if bk else (None, None)
    da, cia = paired_bootstrap([a[k] for k in bk], [b[k] for k in bk]) if bk else (None, None)
    out["suites"].append({"suite": name, "role": role, "n": len(keys),
                          "base": sum(b[k] for k in bk) / len(bk) if bk else None,
                          "user": sum(xu) / len(keys), "assistant": sum(xa) / len(keys),
                          "assistant_minus_user": d, "ci95": ci, "best": best, "assistant_within": within,
                          "user_minus_base": [db, cib], "assistant_minus_base": [da, cia],
                          "rows": {str(k): {"user": u[k], "assistant": a[k], "base": b.get(k)} for k in keys}})
out["decision"] = "assistant" if ok_all and out["suites"] else "user"
json.dump(out, open(sys.argv[1], "w"), indent=1)
print("| suite | n | base | user header | assistant header | assistant − user [95%] |\n|---|---:|---:|---:|---:|---|")
for s in out["suites"]:
    base = f"{s['base']:.3f}" if s["base"] is not None else "–"
    print(f"| {s['suite']} ({s['role']}) | {s['n']} | {base} | {s['user']:.3f} | {s['assistant']:.3f} | "
          f"{s['assistant_minus_user']:+.3f} [{s['ci95'][0]:+.3f}, {s['ci95'][1]:+.3f}] |")
print("decision:", out["decision"])
