"""The entry-point layer: every `macaronic COMMAND`'s argument parsing, one module per command.

Each module's `main(argv) -> int` parses its arguments and calls library functions; library
folders hold no argparse and import nothing from here. This layer sits on top of every other
(docs/ARCHITECTURE.md, `tests/shape/test_layers.py`), and its imports stay lazy where they are
heavy, so `macaronic --help` is instant.
"""
