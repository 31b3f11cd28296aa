import pytest

from macaronic.router import Router
from macaronic.router.data import load_routing_data
from macaronic.testing.router_fakes import FakeBackbone


@pytest.fixture(scope="session")
def splits():
    return {s: load_routing_data(s) for s in ("train", "dev", "test")}


@pytest.fixture(scope="session")
def fitted(splits):
    """A router fitted on the fake backbone (shared: fitting takes about a second)."""
    return Router.fit(FakeBackbone(), splits["train"], splits["dev"])
