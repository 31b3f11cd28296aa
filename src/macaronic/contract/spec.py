"""The contract file: parse, schema and layered checks.

A contract is a YAML file, immutable once published and identified by the sha256 of its bytes.
Checks run in layers and stop at the first failing layer, reporting every problem of that layer:

  1. parse   - the file is YAML and a mapping                          -> exit 1 (bad contract)
  2. schema  - known keys and types, graders known at their versions   -> exit 1
  3. sources - every suite's generator/package is importable here      -> exit 2 (environment)
  4. hashes  - sealed test manifests and the strata file match         -> exit 1

Layer 4 needs the suites (contract.suites); layers 1-2 need nothing but this module.
Knows nothing about models or pairs.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path


import yaml

OK, BAD_CONTRACT, ENVIRONMENT = 0, 1, 2
SUITE_KEYS = {"kind", "grader", "role", "k", "per_family", "limit", "max_tokens", "max_steps", "guard",
              "report_only", "sealed", "seed", "dev_families"}
TOP_KEYS = {"contract", "version", "description", "primary", "suites", "strata", "gate"}


class ContractError(ValueError):
    def __init__(self, layer: str, code: int, errors: list[str]):
        self.layer, self.code, self.errors = layer, code, errors
        super().__init__(f"contract {layer} check failed:\n" + "\n".join(f"  - {e}" for e in errors))


@dataclass(frozen=True)
class SuiteSpec:
    name: str
    kind: str  # agent | genui | coding | chat | mixed | humaneval | bfcl_simple
    grader: str  # "name@version"
    role: str | None = None  # the specialist a forced runner uses; None = routed (mixed)
    k: int = 1  # samples per task (pass^k for agent)
    per_family: int = 3  # tasks per family (generated suites)
    limit: int | None = None  # first N tasks (external suites)
    max_tokens: int = 256  # cap on the harness's own max_tokens for this suite
    max_steps: int = 4  # agent: model turns per episode
    guard: float | None = None  # largest tolerated drop of this suite's score
    report_only: bool = False  # external suites: reported, never gate
    sealed: dict = field(default_factory=dict, hash=False)  # {"n", "sha256"} of the test split
    seed: int = 0
    # v5: the dev split is these families, held out of train whole (as test families are), instead
    # of the generator's own dev split; train loses them. Test families are refused.
    dev_families: tuple[str, ...] = ()


@dataclass(frozen=True)
class Gate:
    confidence: float = 0.95
    resamples: int = 2000
    seed: int = 0
    easy_max_drop: float = 0.05
    mcnemar_alpha: float = 0.05


@dataclass(frozen=True)
class Strata:
    easy_min: float = 0.5  # reference pass rate >= this -> easy
    hard_max: float = 0.0  # <= this -> hard; between -> mid
    k: int = 1  # samples per task of the reference evaluation that freezes the strata (v5: >= 4)
    temperature: float = 0.0  # its sampling temperature for every role (0: the harness's own decoding)
    file: str | None = None  # frozen task -> stratum map, relative to the contract file
    sha256: str | None = None


@dataclass(frozen=True)
class Contract:
    name: str
    version: int
    sha256: str
    path: Path
    suites: tuple[SuiteSpec, ...]
    primary: tuple[str, ...]
    gate: Gate
    strata: Strata
    description: str = ""

    @property
    def id(self) -> str:
        return f"{self.name}@{self.version}"

    def suite(self, name: str) -> SuiteSpec:
        for s in self.suites:
            if s.name == name:
                return s
        raise KeyError(name)

    def strata_path(self) -> Path | None:
        return None if self.strata.file is None else (self.path.parent / self.strata.file)


def sha256_file(path: str | Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def parse(path: str | Path) -> Contract:
    """Layers 1 and 2. Raises ContractError with every problem of the failing layer."""
    from macaronic.contract.graders import GRADERS, parse_grader
    from macaronic.contract.suites import KINDS

    path = Path(path)
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise ContractError("parse", ENVIRONMENT, [f"cannot read {path}: {e}"]) from None
    try:
        doc = yaml.safe_load(raw)
    except yaml.YAMLError as e:
        raise ContractError("parse", BAD_CONTRACT, [f"not YAML: {e}"]) from None
    if not isinstance(doc, dict):
        raise ContractError("parse", BAD_CONTRACT, ["the top level must be a mapping"])
    errors: list[str] = []
    errors += [f"unknown top-level key {k!r}" for k in doc if k not in TOP_KEYS]
    if not isinstance(doc.get("contract"), str) or not doc.get("contract"):
        errors.append("'contract' (a name) is required")
    if not isinstance(doc.get("version"), int) or isinstance(doc.get("version"), bool):
        errors.append("'version' must be an integer")
    suites_doc = doc.get("suites")
    suites: list[SuiteSpec] = []
    if not isinstance(suites_doc, dict) or not suites_doc:
        errors.append("'suites' must be a non-empty mapping")
        suites_doc = {}
    for name, s in suites_doc.items():
        where = f"suites.{name}"
        if not isinstance(s, dict):
            errors.append(f"{where} must be a mapping")
            continue
        errors += [f"{where}: unknown key {k!r}" for k in s if k not in SUITE_KEYS]
        kind = s.get("kind", name)
        if kind not in KINDS:
            errors.append(f"{where}: unknown kind {kind!r} (known: {sorted(KINDS)})")
        grader = s.get("grader")
        if not isinstance(grader, str):
            errors.append(f"{where}: 'grader' (name@version) is required")
        else:
            gname, gver = parse_grader(grader)
            if gname not in GRADERS or gver not in GRADERS[gname]:
                errors.append(f"{where}: unknown grader {grader!r}")
        for key, lo in (("k", 1), ("per_family", 1), ("limit", 1), ("max_tokens", 1), ("max_steps", 1), ("seed", 0)):
            v = s.get(key)
            if v is not None and (not isinstance(v, int) or isinstance(v, bool) or v < lo):
                errors.append(f"{where}: {key} must be an integer >= {lo}")
        g = s.get("guard")
        if g is not None and (not isinstance(g, (int, float)) or not 0 <= g <= 1):
            errors.append(f"{where}: guard must be a number in [0, 1]")
        dev_fams = s.get("dev_families", [])
        if not isinstance(dev_fams, list) or not all(isinstance(f, str) for f in dev_fams):
            errors.append(f"{where}: dev_families must be a list of family names")
            dev_fams = []
        sealed = s.get("sealed", {})
        if not isinstance(sealed, dict) or set(sealed) - {"n", "sha256"}:
            errors.append(f"{where}: sealed must be {{n, sha256}}")
            sealed = {}
        known = {k: v for k, v in s.items() if k in SUITE_KEYS and k not in ("kind", "sealed", "dev_families")}
        try:
            suites.append(SuiteSpec(name=name, kind=kind, sealed=dict(sealed), dev_families=tuple(dev_fams), **known))
        except TypeError as e:
            errors.append(f"{where}: {e}")
    primary = doc.get("primary", [s.name for s in suites if not s.report_only])
    if not isinstance(primary, list) or not primary:
        errors.append("'primary' must be a non-empty list of suite names")
        primary = []
    for p in primary:
        if p not in suites_doc:
            errors.append(f"primary suite {p!r} is not in suites")
        elif suites_doc[p].get("report_only"):
            errors.append(f"primary suite {p!r} is report_only")
    gate, strata = _sub(doc, "gate", Gate, errors), _sub(doc, "strata", Strata, errors)
    if gate is not None and not 0.5 < gate.confidence < 1:
        errors.append("gate.confidence must be in (0.5, 1)")
    if strata is not None and not strata.hard_max < strata.easy_min:
        errors.append("strata.hard_max must be below strata.easy_min")
    if strata is not None and (not isinstance(strata.k, int) or strata.k < 1
                               or not isinstance(strata.temperature, (int, float)) or strata.temperature < 0):
        errors.append("strata.k must be an integer >= 1 and strata.temperature a number >= 0")
    if errors:
        raise ContractError("schema", BAD_CONTRACT, errors)
    return Contract(name=doc["contract"], version=doc["version"], sha256=hashlib.sha256(raw).hexdigest(),
                    path=path.resolve(), suites=tuple(suites), primary=tuple(primary), gate=gate,
                    strata=strata, description=str(doc.get("description", "")))


def _sub(doc: dict, key: str, cls, errors: list[str]):
    d = doc.get(key, {}) or {}
    if not isinstance(d, dict):
        errors.append(f"{key!r} must be a mapping")
        return cls()
    fields_ = set(cls.__dataclass_fields__)
    errors += [f"{key}: unknown key {k!r}" for k in d if k not in fields_]
    try:
        return cls(**{k: v for k, v in d.items() if k in fields_})
    except TypeError as e:
        errors.append(f"{key}: {e}")
        return cls()


def check_sources(contract: Contract) -> None:
    """Layer 3: every suite's source resolves on this machine."""
    from macaronic.contract.suites import KINDS

    errors = []
    for s in contract.suites:
        problem = KINDS[s.kind].unavailable()
        if problem:
            errors.append(f"suites.{s.name}: {problem}")
    if errors:
        raise ContractError("sources", ENVIRONMENT, errors)


def check_hashes(contract: Contract, loader=None) -> None:
    """Layer 4: sealed test manifests and the strata file are what the contract says."""
    from macaronic.contract.sealed import SplitLoader, manifest

    loader = loader or SplitLoader(contract, purpose="check")
    errors = []
    for s in contract.suites:
        if not s.sealed:
            errors.append(f"suites.{s.name}: no sealed manifest (run `macaronic contract seal`)")
            continue
        m = manifest(loader.tasks(s.name, "test"))
        if m["n"] != s.sealed.get("n") or m["sha256"] != s.sealed.get("sha256"):
            errors.append(f"suites.{s.name}: sealed test split changed: contract says n={s.sealed.get('n')} "
                          f"sha256={str(s.sealed.get('sha256'))[:12]}, found n={m['n']} sha256={m['sha256'][:12]}")
    sp = contract.strata_path()
    if sp is not None:
        if not sp.is_file():
            errors.append(f"strata file {sp} is missing")
        elif sha256_file(sp) != contract.strata.sha256:
            errors.append(f"strata file {sp} does not match strata.sha256")
    if errors:
        raise ContractError("hashes", BAD_CONTRACT, errors)


def load(path: str | Path, loader=None, hashes: bool = True) -> Contract:
    """All layers; raises ContractError (with .code 1 or 2) on the first failing layer."""
    c = parse(path)
    check_sources(c)
    if hashes:
        check_hashes(c, loader)
    return c


def seal(path: str | Path, out: str | Path) -> Path:
    """Write a copy of a draft contract with every suite's sealed manifest filled in.

    Edits the YAML text line by line so comments survive; the result is what gets published.
    """
    from macaronic.contract.sealed import SplitLoader, manifest

    c = parse(path)
    check_sources(c)
    loader = SplitLoader(c, purpose="check")
    doc = yaml.safe_load(Path(path).read_text())
    for s in c.suites:
        doc["suites"][s.name]["sealed"] = manifest(loader.tasks(s.name, "test"))
    text = yaml.safe_dump(doc, sort_keys=False, width=100)
    header = "".join(l for l in Path(path).read_text().splitlines(keepends=True) if l.startswith("#"))
    Path(out).write_text(header + text)
    return Path(out)


def dump_minimal(doc: dict) -> str:
    return yaml.safe_dump(doc, sort_keys=False, width=100)


__all__ = ["Contract", "ContractError", "Gate", "Strata", "SuiteSpec", "load", "parse", "check_sources",
           "check_hashes", "seal", "sha256_file", "OK", "BAD_CONTRACT", "ENVIRONMENT"]

