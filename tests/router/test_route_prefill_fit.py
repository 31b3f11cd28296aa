"""The head on the answer's own prefill (`head_prefill`): fitted on the real engine's route prefills,
bound to the identity it read, and `route fit --prefill-only` gives what a full refit gives."""

from __future__ import annotations

import numpy as np
import pytest

from macaronic.router.config import RouterConfig
from macaronic.router.data import data_hash
from macaronic.router.features import PREFILL_VIEWS, prefill_features, prefill_ids
from macaronic.router.handwritten import load_handwritten
from macaronic.router.router import Router
from macaronic.router.state import RouterState, identity_hash


@pytest.fixture(scope="module")
def llm():
    from macaronic.testing import tiny_llm

    m = tiny_llm()
    yield m
    m.close()


def _data():
    def pick(split, n):
        rows = [e for e in load_handwritten(split) if e["kind"] in ("hand", "multiturn")]
        by = {}
        for e in rows:
            by.setdefault(e["label"], []).append(e)
        return [e for label in sorted(by) for e in by[label][:n]]
    return pick("train", 6), pick("dev", 3)


def test_the_prefill_views_read_the_user_turn_as_served(llm):
    from macaronic.harness import load_bundle

    bundle = load_bundle()
    convo = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "Hello!"},
             {"role": "user", "content": "Make me a form to report a bug."}]
    ids, start = prefill_ids(llm, bundle, convo)
    assert llm.tokenizer.decode(ids[start:]).count("Make me a form") == 1
    assert "Hello!" in llm.tokenizer.decode(ids[:start]) and bundle.identity.strip()[:20] in llm.tokenizer.decode(ids)
    X = prefill_features(llm, bundle, [convo, convo[:1]], 1)
    assert X.shape == (2, 4 * llm.args.dim) and np.isfinite(X).all()
    assert np.array_equal(X[:1], prefill_features(llm, bundle, [convo], 1))  # nothing carried between reads


def test_prefill_only_refit_gives_what_the_full_fit_gives(llm, tmp_path):
    from macaronic.harness import load_bundle
    from macaronic.router.shipped import refit_prefill_part

    bundle = load_bundle()
    train, dev = _data()
    cfg = RouterConfig.from_dict({**bundle.router, "head_depth": 0.5, "head_prefill": True, "fast_layer": 0})
    full = Router.fit(llm, train, dev, bundle, cfg, data_hash=data_hash(train, dev))
    p = full.state.prefill
    assert p is not None and p.views == PREFILL_VIEWS and p.layer == full.state.head.layer
    assert full.state.binding["identity"] == identity_hash(bundle) and full.reads_prefill(bundle)
    # the same state without its prefill head, refitted with --prefill-only
    bare = RouterState(**{k: getattr(full.state, k) for k in ("embedding", "probe", "head", "arrow", "bands", "fast")})
    bare.bind(llm, full.state.binding["data"]).save(tmp_path / "s")
    again = refit_prefill_part(llm, tmp_path / "s", bundle, data=(train, dev))
    assert again.state.id == full.state.id
    with pytest.raises(ValueError, match="routing data changed"):
        refit_prefill_part(llm, tmp_path / "s", bundle, data=(train[1:], dev))
    # a saved state loads with its prefill head, and routes a turn with it
    full.save(tmp_path / "f")
    loaded = Router.load(tmp_path / "f", llm, bundle)
    assert loaded.state.prefill is not None and loaded.state.id == full.state.id
    read = lambda: prefill_features(llm, bundle, [train[0]["messages"]], p.layer)[0, :2 * llm.args.dim]  # noqa: E731
    d = loaded.route_prefilled(train[0]["messages"], read)
    assert d.policy in ("prefill", "head") and d.role in ("chat", "agent", "coding", "genui")
