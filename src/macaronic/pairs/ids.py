"""Identity of a model-harness pair, and the manifest that says where its parts live.

pair id = sha256 over the canonical JSON of (base fingerprint, adapter ids by role, harness id).
Paths are labels: two manifests whose files hash the same are the same pair wherever they sit.
The manifest also lists the training-data files the pair was built from (so the evaluator can
run its contamination check); those are provenance, not identity. This module loads no model
weights unless asked for a base fingerprint it does not have.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field, replace
from pathlib import Path


def harness_id(path: str | Path) -> str:
    """The bundle's content id (macaronic.harness), validated as a bundle first."""
    from macaronic.harness import load_bundle

    return load_bundle(path).id


def adapter_id(path: str | Path) -> str:
    from macaronic.engine.adapters import dir_sha256

    return dir_sha256(Path(path))


def base_fingerprint(path: str | Path | None) -> str:
    """sha256 over the base tensors; cached next to the weights by the engine."""
    from macaronic.engine.base import load_base

    return load_base(path).fingerprint


def pair_id(base_fp: str, adapters: dict[str, str], harness: str) -> str:
    canon = json.dumps({"base": base_fp, "adapters": dict(sorted(adapters.items())), "harness": harness},
                       sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canon.encode()).hexdigest()


@dataclass(frozen=True)
class PairManifest:
    """Where a pair's parts live, plus their ids. `base` is a registered base's name (engine/bases.py;
    built from None: the default base's) or a model directory. Manifests written before the default
    base changed (2026-12-01) say None, which meant SmolLM2-135M and is read as that."""

    base: str | None
    base_fingerprint: str
    adapters: dict[str, dict] = field(hash=False)  # role -> {"id", "path"}
    harness: dict = field(hash=False)  # {"id", "path"}
    data: tuple[str, ...] = ()  # training-data files this pair was built from (provenance)

    @property
    def id(self) -> str:
        return pair_id(self.base_fingerprint, {r: a["id"] for r, a in self.adapters.items()}, self.harness["id"])

    @property
    def adapter_ids(self) -> dict[str, str]:
        return {r: a["id"] for r, a in sorted(self.adapters.items())}

    @classmethod
    def build(cls, base: str | Path | None, adapters: dict[str, str | Path], harness: str | Path,
              data: tuple[str, ...] = (), base_fp: str | None = None) -> "PairManifest":
        """Hash every part now (the base fingerprint loads the base unless given)."""
        ads = {r: {"id": adapter_id(p), "path": str(Path(p).resolve())} for r, p in sorted(adapters.items())}
        from macaronic.engine.bases import BASES, DEFAULT_BASE

        base = DEFAULT_BASE if base is None else base
        named = str(base) in BASES
        return cls(base=str(base) if named else str(Path(base).resolve()),
                   base_fingerprint=base_fp or base_fingerprint(base), adapters=ads,
                   harness={"id": harness_id(harness), "path": str(Path(harness).resolve())},
                   data=tuple(str(d) for d in data))

    def with_data(self, data: tuple[str, ...]) -> "PairManifest":
        return replace(self, data=tuple(str(d) for d in data))

    def verify(self) -> list[str]:
        """Every way the files on disk no longer match the recorded ids."""
        errors = []
        for role, a in self.adapters.items():
            if not Path(a["path"]).is_dir():
                errors.append(f"adapter {role}: {a['path']} is missing")
            elif adapter_id(a["path"]) != a["id"]:
                errors.append(f"adapter {role}: {a['path']} changed since it was recorded")
        try:
            if harness_id(self.harness["path"]) != self.harness["id"]:
                errors.append(f"harness {self.harness['path']} changed since it was recorded")
        except Exception as e:  # a broken bundle is a mismatch, with its reason
            errors.append(f"harness {self.harness['path']}: {e}")
        return errors

    def to_dict(self) -> dict:
        return {"id": self.id, "base": self.base, "base_fingerprint": self.base_fingerprint,
                "adapters": self.adapters, "harness": self.harness, "data": list(self.data)}

    @classmethod
    def from_dict(cls, d: dict) -> "PairManifest":
        from macaronic.engine.bases import SMALL_BASE

        m = cls(base=d.get("base") or SMALL_BASE, base_fingerprint=d["base_fingerprint"],
                adapters={r: dict(a) for r, a in d["adapters"].items()}, harness=dict(d["harness"]),
                data=tuple(d.get("data", ())))
        if "id" in d and d["id"] != m.id:
            raise ValueError(f"pair manifest id {d['id'][:12]} does not match its parts ({m.id[:12]})")
        return m

    def save(self, path: str | Path) -> Path:
        path = Path(path)
        path.write_text(json.dumps(self.to_dict(), indent=2, sort_keys=True) + "\n")
        return path

    @classmethod
    def load(cls, path: str | Path) -> "PairManifest":
        return cls.from_dict(json.loads(Path(path).read_text()))


def diff(a: PairManifest, b: PairManifest) -> list[str]:
    """What differs between two pairs, one line per part; empty when they are the same pair."""
    out = []
    if a.base_fingerprint != b.base_fingerprint:
        out.append(f"base: {a.base_fingerprint[:12]} -> {b.base_fingerprint[:12]}")
    for role in sorted(set(a.adapters) | set(b.adapters)):
        x, y = a.adapters.get(role), b.adapters.get(role)
        if x is None:
            out.append(f"adapter {role}: added {y['id'][:12]}")
        elif y is None:
            out.append(f"adapter {role}: removed {x['id'][:12]}")
        elif x["id"] != y["id"]:
            out.append(f"adapter {role}: {x['id'][:12]} -> {y['id'][:12]}")
    if a.harness["id"] != b.harness["id"]:
        out.append(f"harness: {a.harness['id'][:12]} -> {b.harness['id'][:12]}")
        out += [f"  {line}" for line in harness_file_diff(a.harness["path"], b.harness["path"])]
    return out


def harness_file_diff(pa: str | Path, pb: str | Path) -> list[str]:
    """Files added, removed or changed between two bundle directories (when both still exist)."""
    from macaronic.harness.bundle import bundle_files

    pa, pb = Path(pa), Path(pb)
    if not (pa.is_dir() and pb.is_dir()):
        return ["(bundle files no longer on disk)"]
    fa, fb = set(bundle_files(pa)), set(bundle_files(pb))
    out = [f"+ {f}" for f in sorted(fb - fa)] + [f"- {f}" for f in sorted(fa - fb)]
    out += [f"~ {f}" for f in sorted(fa & fb) if (pa / f).read_bytes() != (pb / f).read_bytes()]
    return out
