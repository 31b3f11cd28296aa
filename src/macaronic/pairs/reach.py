"""What differs between two pairs, and which suites of a contract that difference can reach.

Components: `adapter:<role>` (another adapter id), `prompt:<role>` (roles/<role>.md),
`decoding:<role>` (that role's entry of decoding.json), `router` (router.json, router_state/,
route/), `all` (anything else: identity, summary prompt, bundle metadata, another base). A role's
component reaches the suites forced to that role and every routed suite; the router reaches the
routed suites; `all` reaches everything. A suite no component reaches gets the same prompts, the
same adapters and the same seeds, hence the same replies: the search screens and the evaluator
(`macaronic eval --reuse-unreached`) reuse the parent's rows there. Knows manifests and files;
nothing about models.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path


def routed_suites(contract) -> set[str]:
    return {s.name for s in contract.suites if s.role is None and not s.report_only}


def reached_suites(contract, components, report_only: bool = False) -> set[str]:
    """Suites whose replies a change to `components` can alter (report-only suites too if asked)."""
    pool = {s.name for s in contract.suites if report_only or not s.report_only}
    routed = {s.name for s in contract.suites if s.role is None}
    out: set[str] = set()
    for c in components:
        kind, _, role = c.partition(":")
        if kind == "router":
            out |= routed
        elif kind in ("prompt", "decoding", "adapter") and role:
            out |= {s.name for s in contract.suites if s.role == role} | routed
        else:
            return pool
    return out & pool


def _files(h: Path) -> dict[str, str]:
    return {str(p.relative_to(h)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(h.rglob("*")) if p.is_file() and "__pycache__" not in p.parts}


def components_between(a, b) -> set[str]:
    """What differs between two pair manifests, as components."""
    if a.base_fingerprint != b.base_fingerprint:
        return {"all"}
    out = {f"adapter:{r}" for r in set(a.adapters) | set(b.adapters)
           if (a.adapters.get(r) or {}).get("id") != (b.adapters.get(r) or {}).get("id")}
    ha, hb = Path(a.harness["path"]), Path(b.harness["path"])
    fa, fb = _files(ha), _files(hb)
    for name in sorted(set(fa) | set(fb)):
        if fa.get(name) == fb.get(name):
            continue
        if name.startswith("roles/") and name.endswith(".md"):
            out.add(f"prompt:{Path(name).stem}")
            heads = [(h / name).read_text().split("## System prompt")[0] if (h / name).is_file() else None
                     for h in (ha, hb)]
            if heads[0] != heads[1]:  # description or boundary rules: what the route prompt is built from
                out.add("router")
        elif name == "decoding.json":
            da, db = (json.loads((h / name).read_text()) if (h / name).is_file() else {} for h in (ha, hb))
            for role in set(da.get("roles", {})) | set(db.get("roles", {})):
                if da.get("roles", {}).get(role) != db.get("roles", {}).get(role):
                    out.add(f"decoding:{role}")
            if {k: v for k, v in da.items() if k != "roles"} != {k: v for k, v in db.items() if k != "roles"}:
                out.add("all")
        elif name == "router.json" or name.startswith(("router_state/", "route/")):
            out.add("router")
        else:
            out.add("all")
    return out


# ---- per task, inside a routed suite ------------------------------------------------------

REQUEST_ONLY = frozenset({"head", "probe", "embedding", "keep", "default"})  # read the bare base only


def routes_read_roles(harness: Path) -> bool:
    """Whether the bundle's router can read a role's adapter when it routes: the Arrow policy reads
    the adapters' weights, the prompted policy scores with the chat adapter. A fitted state whose
    policies (the cheap one, the band table's choices, or the fallback) all read the bare base and
    the request routes every turn the same whatever the roles' adapters, prompts and decoding."""
    from macaronic.router.config import RouterConfig
    from macaronic.router.state import RouterState

    harness = Path(harness)
    state_dir = harness / "router_state"
    if not (state_dir / "state.json").is_file():
        return True  # unfitted: the prompted policy
    cfg = RouterConfig.from_dict(json.loads((harness / "router.json").read_text()))
    if cfg.policy != "cascade":
        return cfg.policy not in REQUEST_ONLY
    bands = RouterState.load(state_dir).bands
    used = {cfg.cheap_policy}
    if bands is not None and bands.primary == cfg.cheap_policy:
        used |= {bands.options[int(c)] for c in bands.choice}
    else:
        used.add(cfg.fallback_policy)
    return not used <= REQUEST_ONLY


def reusable_tasks(contract, components, parent_rows: list[dict], harness: Path) -> set[str]:
    """'suite/task' keys of routed-suite tasks a change cannot reach: the change is confined to
    some roles (their prompt, decoding or adapter), routes do not read roles (`routes_read_roles`),
    and no turn of the parent's row was answered by a changed role. Such a conversation gets the
    same routes, views and seeds for every turn, hence the same replies."""
    roles = set()
    for c in components:
        kind, _, role = c.partition(":")
        if kind not in ("prompt", "decoding", "adapter") or not role:
            return set()
        roles.add(role)
    routed = routed_suites(contract)
    if not roles or not routed or routes_read_roles(harness):
        return set()
    ok, bad = set(), set()
    for r in parent_rows:
        if r["suite"] not in routed:
            continue
        key, turns = f"{r['suite']}/{r['task']}", (r.get("detail") or {}).get("turns")
        (ok if turns and not any(t.get("routed") in roles for t in turns) else bad).add(key)
    return ok - bad  # every sample of the task stayed away from the changed roles
