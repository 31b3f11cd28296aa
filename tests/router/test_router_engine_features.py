"""The shipped route head reads the same features through the engine's score requests as the
direct forwards it was fitted on: bit for bit the way `route fit` computes them (one text and view
group per call, nothing else running), within float noise the way a routed turn computes them
(both view groups in one engine step), with the same decisions (real base)."""

import numpy as np

from macaronic.bench.routing import DirectViews
from macaronic.router.conversation import request_text
from macaronic.router.features import head_features
from macaronic.router.handwritten import load_handwritten
from macaronic.router.shipped import SHIPPED_DIR
from macaronic.router.state import RouterState


def test_engine_features_match_the_fitted_ones_and_decide_the_same(real_llm):
    head = RouterState.load(SHIPPED_DIR).head
    texts = [request_text(e["messages"]) for e in load_handwritten("test")[::40]]
    fitted_way = head_features(DirectViews(real_llm), texts, head.views, layer=head.layer)  # the direct forwards
    assert np.array_equal(head_features(real_llm, texts, head.views, layer=head.layer), fitted_way)  # as `route fit` computes them
    served = head_features(real_llm, texts, head.views, together=True, layer=head.layer)  # as Router.route computes them
    assert np.abs(served - fitted_way).max() < 1e-3 * np.abs(fitted_way).max()
    p_fit, p_serve = head.predict(fitted_way)[0], head.predict(served)[0]
    assert (p_fit.argmax(1) == p_serve.argmax(1)).all()
    assert np.abs(p_fit - p_serve).max() < 1e-3
