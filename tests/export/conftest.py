import pytest

from macaronic.testing import make_role_models


@pytest.fixture(scope="session")
def tiny_models(tmp_path_factory):
    return make_role_models(tmp_path_factory.mktemp("export-models"))
