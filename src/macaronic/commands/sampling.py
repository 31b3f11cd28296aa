"""What the sampling stages share (`macaronic train sample-chat`, `sample-coding`, `distill`): the
flags they have in common and the run around the bare base (torch threads, the base loaded for the
sampler and closed after it). Each stage's module keeps its own flags, its sampler and its report;
it is not a command itself."""

from __future__ import annotations

import argparse
from contextlib import contextmanager

from macaronic.engine.bases import BASE_HELP


def shared(unit: str) -> dict[str, dict]:
    """The common flags' arguments; `unit` is what one sample answers (a prompt, a problem)."""
    return {"--k": dict(type=int, default=4, help=f"replies per {unit}: one greedy and k-1 sampled"),
            "--temperature": dict(type=float, default=0.8),
            "--max-tokens": dict(type=int),
            "--seed": dict(type=int, default=0, help=f"{unit} seed and sampling seed"),
            "--base": dict(default=None, help=BASE_HELP),
            "--threads": dict(type=int, default=1)}


def parser(stage: str, doc: str, unit: str, flags) -> argparse.ArgumentParser:
    """`macaronic train STAGE`'s parser: `flags` in --help order, each (flag, arguments); a common
    flag (`shared`) takes its shared arguments, updated by the ones given."""
    common = shared(unit)
    p = argparse.ArgumentParser(prog=f"macaronic train {stage}", description=doc,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    for flag, kw in flags:
        p.add_argument(flag, **{**common.get(flag, {}), **kw})
    return p


@contextmanager
def base_llm(base: str | None, threads: int):
    """The bare base (no adapters) for one sampling run, torch at `threads` (0: torch's default)."""
    import torch

    from macaronic.engine.llm import load_llm

    if threads:
        torch.set_num_threads(threads)
    llm = load_llm(base, [])
    try:
        yield llm
    finally:
        llm.close()
