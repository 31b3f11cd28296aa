"""The training-speed probes behind the LOG entry of 2026-12-04 (evening), issue 40 item 6:

    .venv/bin/python scripts/train_speed_probes.py sharing BASE [N]    # history tokens shared with an earlier example
    .venv/bin/python scripts/train_speed_probes.py profile BASE        # torch profiler, turn mode, bf16 autocast
    .venv/bin/python scripts/train_speed_probes.py variants BASE       # s/example: sdpa vs eager, autocast vs bf16 weights

BASE: a registered base (smollm2-135m-instruct, qwen2.5-coder-0.5b). Two torch threads.
"""

from __future__ import annotations

import sys
import time

import numpy as np
import torch

from macaronic.bench import training
from macaronic.engine.base import resolve_base
from macaronic.train import sft
from macaronic.train.sft import PrefixCache, TrainConfig, example_loss


def sharing(base: str, n: int = 200) -> None:
    _, enc = training.examples(resolve_base(base), base, n)
    seen, shared, hist = [], 0, 0
    for e in enc:
        h = np.asarray(e.ids[:e.turn_start])
        best = 0
        for s in seen:
            m = min(len(s), len(h))
            diff = np.flatnonzero(s[:m] != h[:m])
            best = max(best, int(diff[0]) if len(diff) else m)
        seen.append(h)
        shared, hist = shared + best, hist + len(h)
    print(f"{base}: {len(enc)} examples, history {hist} tokens, shared with an earlier one {shared} ({shared / hist:.3f})")


def _model(base_dir, attn: str = "sdpa", bf16_weights: bool = False):
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    m = AutoModelForCausalLM.from_pretrained(str(base_dir), dtype=torch.float32, attn_implementation=attn)
    if bf16_weights:
        m.to(torch.bfloat16)
    torch.manual_seed(0)
    pm = get_peft_model(m, LoraConfig(r=8, lora_alpha=16, target_modules=list(sft.TARGETS), lora_dropout=0.0,
                                      bias="none", task_type="CAUSAL_LM"))
    for _, p in sft.lora_params(pm):
        p.data = p.data.float()
    return pm


def _step(pm, cache, e, mode: str, autocast: bool) -> None:
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
        loss, n, _ = example_loss(pm, e, mode, cache)
    (loss / n).backward()


def profile(base: str) -> None:
    from torch.profiler import ProfilerActivity, profile as prof

    bd = resolve_base(base)
    _, enc = training.examples(bd, base, 8)
    pm = sft.load_model(TrainConfig(role="probe"), bd)
    cache = PrefixCache(pm)
    _step(pm, cache, enc[0], "turn", True)
    with prof(activities=[ProfilerActivity.CPU]) as p:
        for e in enc[5:8]:
            _step(pm, cache, e, "turn", True)
    print(p.key_averages().table(sort_by="self_cpu_time_total", row_limit=15))


def variants(base: str) -> None:
    bd = resolve_base(base)
    _, enc = training.examples(bd, base, 6)
    for attn, bf16_weights, autocast in (("sdpa", False, False), ("sdpa", False, True), ("sdpa", True, True),
                                         ("eager", False, False), ("eager", False, True), ("eager", True, True)):
        pm = _model(bd, attn, bf16_weights)
        cache = PrefixCache(pm)
        _step(pm, cache, enc[0], "turn", autocast)
        for mode in ("turn", "full"):
            t = time.perf_counter()
            for e in enc[1:6]:
                _step(pm, cache, e, mode, autocast)
            print(base, attn, "bf16 weights" if bf16_weights else "fp32 weights", "autocast" if autocast else "fp32",
                  mode, f"{(time.perf_counter() - t) / 5:.3f} s/example", flush=True)


if __name__ == "__main__":
    torch.set_num_threads(2)
    what, base, *rest = sys.argv[1:]
    {"sharing": lambda: sharing(base, *(int(x) for x in rest)), "profile": lambda: profile(base),
     "variants": lambda: variants(base)}[what]()
