"""GenUI harness for A2UI v0.8 (and v0.9 beside it): validate, repair, parse, constrain, render, grade.

Import from the submodules; this package imports nothing heavy (xgrammar and torch load only in
`grammar.py`, when a `GrammarConstraint` is built).

    validate.validate(obj) -> ValidationResult          repair.repair(text) -> RepairResult
    output.parse_genui_output(text) -> GenUIOutput      render_html.render_html(messages) -> str
    grammar.GrammarConstraint(tokenizer, vocab_size)    actions.user_action_to_message / approval_from
    tasks.generate_tasks(seed, per_family)              grade.grade(task, output_text)
    v09.validate_messages(messages)                     convert.to_v09(v08_messages) / to_v08(v09_messages)
"""

from macaronic.genui.output import GenUIOutput, parse_genui_output
from macaronic.genui.repair import RepairResult, repair
from macaronic.genui.validate import ValidationResult, validate

__all__ = ["GenUIOutput", "RepairResult", "ValidationResult", "parse_genui_output", "repair", "validate"]
