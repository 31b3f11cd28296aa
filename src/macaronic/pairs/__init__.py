"""Model-harness pairs: content ids, manifests on disk, and the append-only lineage."""

from macaronic.pairs.ids import PairManifest, harness_id, pair_id
from macaronic.pairs.lineage import Lineage, LineageError

__all__ = ["Lineage", "LineageError", "PairManifest", "harness_id", "pair_id"]
