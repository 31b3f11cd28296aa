"""The per-turn router: picks exactly one adapter for each user turn.

Policies (each its own module): prompted (route prompt scored by label log-probabilities),
embedding (nearest centroid), probe (logistic regression), arrow (training-free, from adapter
weights), and the cascade that combines a cheap one with the prompted one.
"""

from macaronic.router.config import RouterConfig
from macaronic.router.router import Router, decide
from macaronic.router.state import RouterState
from macaronic.router.types import AdapterInfo, Backbone, RouteDecision

__all__ = ["AdapterInfo", "Backbone", "RouteDecision", "Router", "RouterConfig", "RouterState", "decide"]
