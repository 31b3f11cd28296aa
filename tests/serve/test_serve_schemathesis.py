"""Schemathesis against the server's own /openapi.json: a bounded property-based run over every
operation, on a real `macaronic serve` subprocess, finding no 5xx."""

from __future__ import annotations

import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

EXAMPLES = 12  # per operation; bounded so the suite stays fast on a small CPU


def test_no_server_errors(server):
    schema = schemathesis.openapi.from_url(server.url + "/openapi.json")
    operations = [r.ok() for r in schema.get_all_operations()]
    assert {"/v1/chat/completions", "/v1/responses", "/v1/models"} <= {op.path for op in operations}
    calls = []
    for op in operations:
        # half the generated bodies name a served model, so generation paths run too
        @given(case=op.as_strategy(), model=st.sampled_from([None, "macaronic", "chat", "agent"]))
        @settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
                  phases=[Phase.explicit, Phase.generate], suppress_health_check=list(HealthCheck))
        def run(case, model):
            if model and isinstance(case.body, dict) and "model" in case.body:
                case.body["model"] = model
            response = case.call(timeout=120)
            calls.append(response.status_code)
            assert response.status_code < 500, \
                f"{case.as_curl_command()}\n-> {response.status_code} {response.text[:400]}"

        run()
    assert len(calls) >= len(operations) and any(400 <= c < 500 for c in calls) and calls.count(200) > 3
