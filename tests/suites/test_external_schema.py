"""BFCL's Python-typed schemas -> JSON Schema, including an argument literally named "type"."""

from macaronic.suites.external import to_json_schema


def test_python_words_become_json_schema_words_and_a_type_argument_survives():
    bfcl = {"type": "dict", "properties": {"type": {"type": "string", "description": "kind"},
                                           "n": {"type": "integer"}, "xs": {"type": "tuple", "items": {"type": "float"}}},
            "required": ["type"]}
    assert to_json_schema(bfcl) == {
        "type": "object", "required": ["type"],
        "properties": {"type": {"type": "string", "description": "kind"}, "n": {"type": "integer"},
                       "xs": {"type": "array", "items": {"type": "number"}}}}
