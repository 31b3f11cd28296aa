"""The official A2UI Python SDK (`a2ui-agent-sdk`, its `validate_payload` over `a2ui-core`'s basic
catalog) as a second judge of our v0.9 cards. It cannot replace `genui/v09.py` (docs/LOG.md,
2026-12-04): it stops at the first problem and names no JSON pointer, which the closer
(`close.fix_one_v09`) needs, and it accepts cases the official conformance suite calls invalid.
Where it does judge, it agrees: every converted card passes it, and it accepts every card ours does."""

import json
import random
from pathlib import Path

import pytest
from a2ui_cases import EXAMPLES, corrupt, load

from macaronic.genui import v09
from macaronic.genui.convert import to_v09
from macaronic.genui.tasks import FAMILIES, make_task

from a2ui.core import A2uiError
from a2ui.core.basic_catalog.v0_9 import BasicCatalog
from a2ui.utils import validation  # the test extra pins a2ui-agent-sdk (scripts/setup --test)

CASES = Path(__file__).with_name("a2ui_v0_9_cases")


@pytest.fixture(scope="module")
def sdk():
    catalogs = [BasicCatalog()]

    def judge(messages) -> str | None:
        """None when the SDK accepts the payload, else its error."""
        try:
            validation.validate_payload(catalogs, messages)
        except A2uiError as e:
            return str(e)
        return None

    return judge


def v08_cards():
    return [make_task(f, i).gold["a2ui"] for f in FAMILIES for i in range(3)] + [load(p) for p in EXAMPLES]


def test_the_sdk_accepts_every_converted_card(sdk):
    for messages in v08_cards():
        assert sdk(to_v09(messages)) is None


def test_the_sdk_accepts_every_broken_card_ours_accepts(sdk):
    rng = random.Random(0)
    golds = [to_v09(m) for m in v08_cards()]
    for i in range(120):
        card = corrupt(golds[i % len(golds)], rng)
        if isinstance(card, list) and all(isinstance(m, dict) for m in card) and not v09.validate_messages(card)[0]:
            assert sdk(card) is None, card


def test_the_sdk_lets_through_official_invalid_cases_so_it_is_not_our_validator(sdk):
    """Server-to-client cases the spec marks invalid that the SDK accepts (our validator rejects
    all of them). If this drops to zero, the SDK could take over the schema layer: reconsider."""
    missed = []
    for path in sorted(CASES.glob("*.json")):
        suite = json.loads(path.read_text())
        if suite.get("schema", "server_to_client.json") != "server_to_client.json":
            continue
        for i, case in enumerate(suite["tests"]):
            if not case["valid"] and sdk([case["data"]]) is None:
                assert v09.message_errors(case["data"]), case["description"]
                missed.append(f"{path.stem}-{i}")
    assert missed, "the SDK now rejects every official invalid case"


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_every_genui_engine_card_is_served_in_v09_as_the_official_schema_and_the_sdk_accept(sdk, seed):
    """Every card the GenUI data engine writes (`datagen/genui.py`, what the genui specialist is
    trained to write), taken down the served path for a v0.9 client (`convert.served_card`):
    nothing to close, each message valid under the official `server_to_client.json` exactly as a
    conformance case is checked (`message_errors`, the function `test_a2ui_v09.py` runs the official
    cases through), the list valid as a whole, and the official SDK accepts it."""
    from macaronic.datagen.genui import INTENTS, examples
    from macaronic.genui.convert import served_card
    from macaronic.genui.output import parse_genui_output

    seen = set()
    for e in examples(40, seed, intents=tuple(INTENTS)):  # every intent, the first engine's and the wide one's
        out = parse_genui_output(e.messages[-1]["content"])
        assert out.valid, out.validation.errors
        served, text = served_card(out.to_dict(), "0.9")
        assert not served.get("closed") and served["a2ui_version"] == "0.9"
        messages = json.loads(text)["a2ui"]
        assert messages == served["a2ui"] and all(m["version"] == "v0.9" for m in messages)
        for m in messages:
            assert v09.message_errors(m) == [], m
        assert v09.validate_messages(messages)[0] == []
        assert sdk(messages) is None
        seen.add(e.source.rsplit("/", 1)[-1])
    assert len(seen) >= len(INTENTS) - 2, seen  # nearly every intent, each seed
