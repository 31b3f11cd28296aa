"""Fitted router state (embedding centroids, probe weights, Arrow prototypes) and its storage.

A state directory holds `state.json` (format, per-policy metadata, the content id) and one
`<policy>.npz` per fitted policy. The id is a sha256 over the canonical content (sorted array
names, dtype, shape, bytes, and the metadata JSON with sorted keys), not over the npz files,
whose zip headers carry timestamps. Loading recomputes the id and refuses a mismatch.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from macaronic.router.arrow import ArrowPolicy
from macaronic.router.embedding import EmbeddingPolicy
from macaronic.router.probe import ProbePolicy

FORMAT = 1
KINDS = {"embedding": EmbeddingPolicy, "probe": ProbePolicy, "arrow": ArrowPolicy}


@dataclass(frozen=True, eq=False)
class RouterState:
    embedding: EmbeddingPolicy | None = None
    probe: ProbePolicy | None = None
    arrow: ArrowPolicy | None = None

    def policies(self) -> dict:
        return {k: getattr(self, k) for k in KINDS if getattr(self, k) is not None}

    @property
    def id(self) -> str:
        return state_hash({k: p.meta() for k, p in self.policies().items()},
                          {k: p.arrays() for k, p in self.policies().items()})

    def nbytes(self) -> int:
        return sum(a.nbytes for p in self.policies().values() for a in p.arrays().values())

    def save(self, path: str | Path) -> str:
        """Write the state to a directory; returns its content id."""
        root = Path(path)
        root.mkdir(parents=True, exist_ok=True)
        metas = {k: p.meta() for k, p in self.policies().items()}
        for k, p in self.policies().items():
            np.savez(root / f"{k}.npz", **p.arrays())
        state_id = self.id
        (root / "state.json").write_text(json.dumps(
            {"format": FORMAT, "id": state_id, "policies": metas}, indent=2, sort_keys=True) + "\n")
        return state_id

    @classmethod
    def load(cls, path: str | Path) -> "RouterState":
        root = Path(path)
        doc = json.loads((root / "state.json").read_text())
        errors = []
        if doc.get("format") != FORMAT:
            errors.append(f"format {doc.get('format')!r}, expected {FORMAT}")
        parts = {}
        for k, meta in doc.get("policies", {}).items():
            if k not in KINDS:
                errors.append(f"unknown policy {k!r}")
                continue
            f = root / f"{k}.npz"
            if not f.is_file():
                errors.append(f"missing {f.name}")
                continue
            with np.load(f) as z:
                parts[k] = KINDS[k].from_saved(meta, {n: z[n] for n in z.files})
        state = cls(**parts)
        if not errors and state.id != doc.get("id"):
            errors.append(f"content id {state.id} does not match recorded {doc.get('id')}")
        if errors:
            raise ValueError(f"invalid router state {root}: " + "; ".join(errors))
        return state


def state_hash(metas: dict, arrays: dict[str, dict[str, np.ndarray]]) -> str:
    h = hashlib.sha256(json.dumps(metas, sort_keys=True).encode())
    for k in sorted(arrays):
        for name in sorted(arrays[k]):
            a = np.ascontiguousarray(arrays[k][name])
            h.update(f"{k}/{name}:{a.dtype.str}:{a.shape}:".encode())
            h.update(a.tobytes())
    return h.hexdigest()
