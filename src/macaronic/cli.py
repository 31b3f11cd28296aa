"""The `macaronic` command: a thin dispatcher over the entry-point layer.

Each command's module in `macaronic.commands` owns its `main(argv) -> int`, its argument parsing
and its imports, so `macaronic --help` imports nothing heavy. A command's stages (`macaronic train
grpo`, `macaronic eval ablate`, ...) are listed by that command's --help.
"""

from __future__ import annotations

import importlib
import sys

# name -> (module:function, one-line help)
COMMANDS: dict[str, tuple[str, str]] = {
    "serve": ("macaronic.commands.serve:main", "serve the OpenAI-compatible MoL API and the web chat"),
    "store": ("macaronic.commands.store:main", "check or back up the server's SQLite store"),
    "experience": ("macaronic.commands.experience:main", "export or forget the served experience (serve --experience)"),
    "chat": ("macaronic.commands.chat:main", "chat in the terminal with the routed MoL"),
    "generate": ("macaronic.commands.generate:main", "stream one reply from one adapter"),
    "info": ("macaronic.commands.info:main", "describe the base and the registered adapters"),
    "route": ("macaronic.commands.route:main", "classify turns, benchmark the routers"),
    "probe": ("macaronic.commands.probe:main", "the external-suite probes (BFCL, instructions) through the served MoL"),
    "genui": ("macaronic.commands.genui:main", "validate A2UI v0.8 GenUI output (probe: the genui specialist's cards)"),
    "mcp": ("macaronic.commands.mcp:main", "serve the action substrate's tools over MCP stdio"),
    "specialist": ("macaronic.commands.specialist:main", "add your own specialist from an examples file; list, remove"),
    "train": ("macaronic.commands.train:main", "train a specialist LoRA adapter (SFT; grpo, compare, check, distill)"),
    "eval": ("macaronic.commands.eval:main", "evaluate a pair under a contract (ablate, report-only, table, toolnames)"),
    "contract": ("macaronic.commands.contract:main", "check, seal or stratify a contract file"),
    "pair": ("macaronic.commands.pair:main", "show or diff model-harness pairs"),
    "evolve": ("macaronic.commands.evolve:main", "run generations of the recursive loop (probe: pairs on hand-written requests)"),
    "bench": ("macaronic.commands.bench:main", "benchmark switch cost, adapters and decode speed (vllm, modes, bases)"),
    "export": ("macaronic.commands.export:main", "export base and adapters for vLLM"),
    "llamacpp": ("macaronic.commands.llamacpp:main", "build llama.cpp's server (the exact-switch peer) from its pinned source"),
}


def usage() -> str:
    lines = ["usage: macaronic COMMAND [ARGS]...", "", "commands:"]
    width = max(map(len, COMMANDS))
    lines += [f"  {name:<{width}}  {help_}" for name, (_, help_) in COMMANDS.items()]
    lines += ["", "Run `macaronic COMMAND --help` for a command's options."]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("-h", "--help", "help"):
        print(usage())
        return 0
    if argv[0] in ("-V", "--version"):
        from macaronic import __version__

        print(__version__)
        return 0
    name, rest = argv[0], argv[1:]
    if name not in COMMANDS:
        print(f"macaronic: unknown command {name!r}\n\n{usage()}", file=sys.stderr)
        return 2
    target = COMMANDS[name][0]
    module_name, func_name = target.split(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as e:
        if e.name and module_name.startswith(e.name):
            print(f"macaronic: command {name!r} is not available in this build", file=sys.stderr)
            return 2
        raise
    return int(getattr(module, func_name)(rest) or 0)


if __name__ == "__main__":
    sys.exit(main())
