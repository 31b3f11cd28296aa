"""Fitted router state (embedding centroids, probe and head weights, Arrow prototypes, the
cascade's band table) and its storage.

A state directory holds `state.json` (format, per-policy metadata, the binding, the content id)
and one `<policy>.npz` per fitted policy. The id is a sha256 over the canonical content (sorted
array names, dtype, shape, bytes, the metadata and binding JSON with sorted keys). The npz files
are written with fixed zip timestamps, so the same state is the same bytes on disk.

The binding says what the state was fitted for: the base fingerprint (every policy reads the
base's hidden states) and, when the state holds Arrow prototypes (computed from adapter
weights), the adapter ids by route, plus the training data's hash. `check` compares it with a
backbone and names every mismatch; loading recomputes the id and refuses a mismatch.
"""

from __future__ import annotations

import hashlib
import io
import json
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from macaronic.router.arrow import ArrowPolicy
from macaronic.router.bands import BandTable
from macaronic.router.embedding import EmbeddingPolicy
from macaronic.router.head import HeadPolicy
from macaronic.router.probe import ProbePolicy

FORMAT = 2
KINDS = {"embedding": EmbeddingPolicy, "probe": ProbePolicy, "head": HeadPolicy, "arrow": ArrowPolicy,
         "bands": BandTable, "fast": HeadPolicy,  # fast: the head's first stage (HeadPolicy.exit_above)
         "prefill": HeadPolicy}  # prefill: the head on the answer's own prefill (features.PREFILL_VIEWS)


class StateMismatch(ValueError):
    """A router state fitted for another base or other adapters than the backbone's."""


def backbone_fingerprint(backbone) -> str | None:
    base = getattr(backbone, "base", None)
    return getattr(base, "fingerprint", None) or getattr(backbone, "fingerprint", None)


def adapter_ids(backbone, names) -> dict[str, str | None]:
    """{route: adapter id (None: no such adapter, or the registry has no ids)}."""
    reg = backbone.adapters
    ids = {i.name: i.id for i in reg.infos()} if hasattr(reg, "infos") else {}
    have = set(reg.names())
    return {n: (ids.get(n, "?") if n in have else None) for n in sorted(names)}


@dataclass(frozen=True, eq=False)
class RouterState:
    embedding: EmbeddingPolicy | None = None
    probe: ProbePolicy | None = None
    head: HeadPolicy | None = None
    arrow: ArrowPolicy | None = None
    bands: BandTable | None = None
    fast: HeadPolicy | None = None
    prefill: HeadPolicy | None = None
    binding: dict = field(default_factory=dict)

    def policies(self) -> dict:
        return {k: getattr(self, k) for k in KINDS if getattr(self, k) is not None}

    @property
    def id(self) -> str:
        metas = {k: p.meta() for k, p in self.policies().items()}
        if self.binding:
            metas = {**metas, "binding": self.binding}
        return state_hash(metas, {k: p.arrays() for k, p in self.policies().items()})

    def bind(self, backbone, data_hash: str | None = None, identity: str | None = None) -> "RouterState":
        """The same state with its binding to `backbone` (and the training data) recorded; with a
        prefill head, also the identity text its layout opened with (`identity_hash`)."""
        b = {"base": backbone_fingerprint(backbone)}
        if self.prefill is not None and identity is not None:
            b["identity"] = identity
        if self.arrow is not None:
            b["adapters"] = adapter_ids(backbone, [r for r, c in zip(self.arrow.routes, self.arrow.counts) if c])
        if data_hash:
            b["data"] = data_hash
        return RouterState(**{k: getattr(self, k) for k in KINDS}, binding=b)

    def mismatches(self, backbone, adapters: bool = True) -> list[str]:
        """What differs between the binding and `backbone` (empty: it matches or is unbound).
        `adapters=False` skips the adapter ids (for a config that never routes through Arrow)."""
        out = []
        if not self.binding:
            return out
        fp = backbone_fingerprint(backbone)
        if self.binding.get("base") != fp:
            out.append(f"fitted on base {str(self.binding.get('base'))[:16]}, this backbone is {str(fp)[:16]}")
        want = (self.binding.get("adapters") or {}) if adapters else {}
        have = adapter_ids(backbone, want)
        for name in sorted(want):
            if want[name] != have.get(name):
                out.append(f"adapter {name!r}: fitted on {str(want[name])[:16]}, this backbone has "
                           f"{str(have.get(name))[:16] if have.get(name) else 'none'}")
        return out

    def check(self, backbone, where: str = "router state", adapters: bool = True) -> "RouterState":
        errors = self.mismatches(backbone, adapters)
        if errors:
            raise StateMismatch(f"{where} (id {self.id[:16]}) does not match this backbone: " + "; ".join(errors)
                                + ". Refit it with `macaronic route fit --out DIR` and pass that directory, "
                                  "or choose --router-policy prompted")
        return self

    def nbytes(self) -> int:
        return sum(a.nbytes for p in self.policies().values() for a in p.arrays().values())

    def save(self, path: str | Path) -> str:
        """Write the state to a directory; returns its content id."""
        root = Path(path)
        root.mkdir(parents=True, exist_ok=True)
        metas = {k: p.meta() for k, p in self.policies().items()}
        for stale in root.glob("*.npz"):
            if stale.stem not in metas:
                stale.unlink()
        for k, p in self.policies().items():
            write_npz(root / f"{k}.npz", p.arrays())
        state_id = self.id
        (root / "state.json").write_text(json.dumps(
            {"format": FORMAT, "id": state_id, "policies": metas, "binding": self.binding},
            indent=2, sort_keys=True) + "\n")
        return state_id

    @classmethod
    def load(cls, path: str | Path) -> "RouterState":
        root = Path(path)
        doc = json.loads((root / "state.json").read_text())
        errors = []
        if doc.get("format") not in (1, FORMAT):
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
        state = cls(**parts, binding=doc.get("binding") or {})
        if not errors and state.id != doc.get("id"):
            errors.append(f"content id {state.id} does not match recorded {doc.get('id')}")
        if errors:
            raise ValueError(f"invalid router state {root}: " + "; ".join(errors))
        return state


def identity_hash(bundle) -> str:
    """What a prefill head's binding records of the harness: its identity text (the layout's header)."""
    return hashlib.sha256(bundle.identity.strip().encode()).hexdigest()[:16]


def state_hash(metas: dict, arrays: dict[str, dict[str, np.ndarray]]) -> str:
    h = hashlib.sha256(json.dumps(metas, sort_keys=True).encode())
    for k in sorted(arrays):
        for name in sorted(arrays[k]):
            a = np.ascontiguousarray(arrays[k][name])
            h.update(f"{k}/{name}:{a.dtype.str}:{a.shape}:".encode())
            h.update(a.tobytes())
    return h.hexdigest()


def write_npz(path: Path, arrays: dict[str, np.ndarray]) -> None:
    """np.savez with fixed zip metadata: the same arrays give the same bytes."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as z:
        for name in sorted(arrays):
            info = zipfile.ZipInfo(f"{name}.npy", date_time=(1980, 1, 1, 0, 0, 0))
            info.external_attr = 0o644 << 16
            data = io.BytesIO()
            np.lib.format.write_array(data, np.ascontiguousarray(arrays[name]), allow_pickle=False)
            z.writestr(info, data.getvalue())
    path.write_bytes(buf.getvalue())
