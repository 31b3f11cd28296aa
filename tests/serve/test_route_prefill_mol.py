"""The MoL routes on the answer's own prefill when its router state has a prefill head: the head
reads the bare base's state at the end of the user turn as served, and a route whose answer has
that layout (a role the bare base answers, or an assistant-header adapter) continues the kept
prefill instead of computing the user turn again. Real engine (tiny random model); the head is a
fixed linear state so the route is known (a fitted one is covered by `route fit --prefill-only`)."""

from __future__ import annotations

import numpy as np
import pytest

from macaronic.router.features import PREFILL_VIEWS
from macaronic.router.head import HeadPolicy
from macaronic.router.router import Router
from macaronic.router.state import RouterState, identity_hash
from macaronic.serve.mol import MoL

CONVO = [{"role": "user", "content": "What is a closure in Python?"},
         {"role": "assistant", "content": "A function that keeps the variables of the scope it was made in."},
         {"role": "user", "content": "Show me a short example with a counter."}]
GREEDY = {"max_tokens": 4, "temperature": 0.0}


@pytest.fixture(scope="module")
def llm():
    from macaronic.testing import tiny_llm

    m = tiny_llm(n_adapters=2)  # chat and agent adapters; coding answers as the bare base
    yield m
    m.close()


def _head(llm, favour: str, layer: int = 1) -> HeadPolicy:
    d = 4 * llm.args.dim
    routes = ("agent", "chat", "coding", "genui")
    intercept = np.array([6.0 if r == favour else 0.0 for r in routes], np.float32)
    return HeadPolicy(routes, PREFILL_VIEWS, np.zeros(d, np.float32), np.ones(d, np.float32),
                      np.zeros((4, d), np.float32), intercept, 1.0, 1.0, layer)


def _mol(llm, favour: str, identity: str | None = None) -> MoL:
    from macaronic.harness import load_bundle

    bundle = load_bundle()
    state = RouterState(prefill=_head(llm, favour), binding={"identity": identity or identity_hash(bundle)})
    return MoL.from_llm(llm, bundle, Router(llm, bundle, state))


def test_a_bare_route_continues_the_prefill_the_router_read(llm):
    llm.engine.cache.clear()
    mol = _mol(llm, "coding")
    r = mol.turn(CONVO, sampling=GREEDY)
    assert (r.route.specialist, r.route.adapter, r.route.policy) == ("coding", None, "prefill")
    # the user turn's lower layers came from the route's prefill: only the assistant header ran whole
    assert r.usage["upper_tokens"] > 0 and r.macaronic()["upper_tokens"] == r.usage["upper_tokens"]
    assert r.usage["prefill_tokens"] == 0  # the route's prefill ran on to the assistant header
    assert r.route.kept is None  # the result holds no K/V once the answer took it
    forced = _mol(llm, "coding").turn(CONVO, model="coding", sampling=GREEDY)
    assert forced.route.policy == "forced" and not forced.usage.get("upper_tokens")
    assert r.view == forced.view  # the same layout: the prefill the router read is the answer's


def test_a_user_header_adapter_computes_its_own_turn(llm):
    llm.engine.cache.clear()
    r = _mol(llm, "chat").turn(CONVO, sampling=GREEDY)
    assert (r.route.specialist, r.route.adapter, r.route.policy) == ("chat", "chat", "prefill")
    # its role instruction comes before the user turn: the kept prefill gives at most the part before
    # it (the history, as a cache would), and the adapter computes its own user turn
    ids = llm.encode_chat(r.view)
    assert r.usage.get("upper_tokens", 0) + r.usage["reused_tokens"] < llm.turn_start(ids)
    assert r.usage["prefill_tokens"] > len(ids) - llm.turn_start(ids)
    assert r.finish_reason in ("stop", "length")


def test_another_identity_routes_with_the_request_alone(llm):
    """A prefill head fitted on another identity's layout is not read (its states would move)."""
    mol = _mol(llm, "coding", identity="0" * 16)
    assert not mol.router.reads_prefill(mol.bundle)


def test_the_contracts_local_runner_routes_on_the_prefill_as_the_mol_does(llm):
    from macaronic.contract.runner import LocalRunner
    from macaronic.harness import load_bundle

    bundle = load_bundle()
    runner = LocalRunner.__new__(LocalRunner)  # its engine and router given here, not loaded from a manifest
    runner.bundle, runner.llm = bundle, llm
    runner._router = Router(llm, bundle, RouterState(prefill=_head(llm, "coding"),
                                                     binding={"identity": identity_hash(bundle)}))
    tools = [{"type": "function", "function": {"name": "noop", "parameters": {"type": "object", "properties": {}}}}]
    reply = runner.reply(CONVO, None, seed=0, max_tokens=4, tools=tools)  # (the substrate's would overflow this model)
    assert reply.role == "coding" and reply.route["policy"] == "prefill" and reply.tokens > 0
