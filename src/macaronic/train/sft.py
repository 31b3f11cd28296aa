"""LoRA SFT on a frozen base: PEFT LoRA, loss on the current turn's assistant tokens only.

Three modes, the engine's: `full` puts the adapter on every token; `turn` follows the turn-activated
rule: the history (everything before the last user header) is computed by the bare base with no
gradient, and the adapter applies from that header on; `upper` is `full` restricted to the top
`top_k` layers (PEFT `layers_to_transform`), so the layers below hold no LoRA and build no graph. The history's K/V are cached by content,
so a system prompt shared by every example is computed once per run. The saved `turn` adapter
carries `alora_invocation_tokens`, so PEFT loads it as Activated LoRA and the engine as `turn`.
A `turn` adapter's `activation` says where in the turn it switches on: at the user header (the
default) or at the reply's assistant header (PEFT aLoRA's own invocation point), in which case the
user message too is the bare base's: `Encoded.answer_start` instead of `turn_start`, the engine's
`TurnRule.active_from` for the same ids.

Examples are processed one at a time (no padding) and gradients accumulate over a step's
`batch` examples; the loss is the sum of target-token cross-entropies over the step divided by
the step's target-token count, so a step is the same whether it runs in one process or is split
over DDP ranks (gloo all-reduce of the LoRA grads). Knows nothing about where examples come from.
"""

from __future__ import annotations

import json
import math
import os
import random
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from macaronic.datagen.examples import Encoded
from macaronic.engine.adapters import ACTIVATIONS  # one list of activation points, the engine's

MODES = ("turn", "full", "upper")
AUTOCAST = ("none", "bfloat16")
TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


@dataclass(frozen=True)
class TrainConfig:
    role: str
    mode: str = "turn"  # "turn", "full" or "upper"
    activation: str = "user"  # turn: the adapter switches on at the latest "user" header or the reply's "assistant" header
    top_k: int = 0  # upper: LoRA in the top top_k layers only (required for upper, 0 otherwise)
    rank: int = 8
    alpha: float = 16.0
    targets: tuple[str, ...] = TARGETS
    steps: int = 100
    batch: int = 4  # examples per optimizer step, all ranks together
    lr: float = 3e-4
    warmup: int = 5
    weight_decay: float = 0.0
    max_len: int = 2048  # whole conversation
    max_turn: int = 384  # tokens from the turn start on (what the adapter computes in turn mode)
    seed: int = 0
    save_every: int = 25
    save_dtype: str = "bfloat16"
    base: str | None = None  # base directory or registered name; None = the default base
    description: str = ""
    threads: int = 0  # torch threads; 0 = leave torch's default
    init_adapter: str | None = None  # warm start: an adapter directory with the same rank and targets
    max_seconds: float = 0.0  # stop once this run's steps took this long (0 = run all steps); the schedule stays cfg.steps
    stop_after: int = 0  # stop after this many steps (0 = all); the schedule stays cfg.steps: replays a --max-seconds run
    autocast: str = "none"  # "bfloat16": forward and backward under CPU bf16 autocast (LoRA weights and Adam stay fp32)

    def __post_init__(self):
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {self.mode!r}")
        if self.activation not in ACTIVATIONS:
            raise ValueError(f"activation must be one of {ACTIVATIONS}, got {self.activation!r}")
        if self.activation != "user" and self.mode != "turn":
            raise ValueError("--activation assistant goes with --mode turn")
        if (self.mode == "upper") != (self.top_k > 0):
            raise ValueError("--top-k K (K > 0) goes with --mode upper, and only with it")
        if self.rank <= 0 or self.steps <= 0 or self.batch <= 0:
            raise ValueError("rank, steps and batch must be positive")
        if not 0 <= self.stop_after <= self.steps:
            raise ValueError(f"stop_after must be between 0 and steps ({self.steps}), got {self.stop_after}")
        if self.autocast not in AUTOCAST:
            raise ValueError(f"autocast must be one of {AUTOCAST}, got {self.autocast!r}")
        bad = [t for t in self.targets if t not in TARGETS]
        if bad:
            raise ValueError(f"unknown LoRA targets {bad}; choose from {TARGETS}")


# ---- distributed helpers ------------------------------------------------------------------

def dist_info() -> tuple[int, int]:
    """(rank, world) from torchrun's environment; initializes gloo once when world > 1."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world > 1:
        import torch.distributed as dist

        if not dist.is_initialized():
            dist.init_process_group("gloo")
        return dist.get_rank(), world
    return 0, 1


def dist_finish() -> None:
    """Every rank waits for rank 0 (which writes the adapter), then leaves the gloo group cleanly.
    Without it a rank that exits first can abort in gloo's teardown while rank 0 is still writing,
    and torchrun then kills the run (seen once in CI: rank 1 SIGABRT, 2026-12-08)."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        dist.barrier()
        dist.destroy_process_group()


# ---- model --------------------------------------------------------------------------------

def load_model(cfg: TrainConfig, base_dir: Path, marker: list[int] | None = None):
    """fp32 HF model with a fresh PEFT LoRA (seeded init) on cfg.targets."""
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    model = AutoModelForCausalLM.from_pretrained(str(base_dir), dtype=torch.float32)
    model.config.use_cache = True
    torch.manual_seed(cfg.seed)
    layers = None
    if cfg.mode == "upper":
        n = model.config.num_hidden_layers
        if cfg.top_k > n:
            raise ValueError(f"--top-k {cfg.top_k} exceeds the base's {n} layers")
        layers = list(range(n - cfg.top_k, n))
    lcfg = LoraConfig(r=cfg.rank, lora_alpha=cfg.alpha, target_modules=list(cfg.targets), lora_dropout=0.0,
                      bias="none", task_type="CAUSAL_LM", layers_to_transform=layers)
    pm = get_peft_model(model, lcfg)
    return pm


_LAYER = __import__("re").compile(r"\.layers\.(\d+)\.")


def init_from(pm, adapter_dir: str | Path, below: int = 0) -> int:
    """Warm start: copy an adapter directory's LoRA tensors into the PEFT model's (same rank and
    targets). Every mismatch is reported at once; nothing is copied unless all tensors fit.
    `below` > 0 (upper mode): the file's tensors of layers below it are dropped, not mismatches;
    returns how many were dropped."""
    from safetensors.torch import load_file

    adapter_dir = Path(adapter_dir)
    state = load_file(str(adapter_dir / "adapter_model.safetensors"))
    params = dict(lora_params(pm))
    named = {k.replace(".lora_A.weight", ".lora_A.default.weight").replace(".lora_B.weight", ".lora_B.default.weight"): v
             for k, v in state.items()}
    dropped = [k for k in named if below and (m := _LAYER.search(k)) and int(m.group(1)) < below]
    for k in dropped:
        del named[k]
    problems = [f"tensor {k} has no place in this LoRA" for k in sorted(set(named) - set(params))]
    problems += [f"tensor {k} is {tuple(v.shape)}, this LoRA's is {tuple(params[k].shape)}"
                 for k, v in sorted(named.items()) if k in params and v.shape != params[k].shape]
    problems += [f"this LoRA's {k} is missing from the file" for k in sorted(set(params) - set(named))]
    if problems:
        raise ValueError(f"{adapter_dir}: cannot warm-start from it (rank/targets differ?): " + "; ".join(problems[:5])
                         + (f" (+{len(problems) - 5} more)" if len(problems) > 5 else ""))
    with torch.no_grad():
        for k, v in named.items():
            params[k].copy_(v.float())
    return len(dropped)


def lora_params(pm) -> list[tuple[str, torch.nn.Parameter]]:
    return [(n, p) for n, p in pm.named_parameters() if p.requires_grad]


class PrefixCache:
    """Base-only K/V of history prefixes (turn mode), reused by their longest common prefix: a
    history that starts like one computed before (the same system prompt and tools, the same
    earlier turns) computes only its own rest, on top of that one's K/V cut to the common part (a
    position's K/V depend only on the tokens up to it). Least recently used first out, within
    `limit` entries and `max_bytes`."""

    def __init__(self, pm, limit: int = 64, max_bytes: int = 2 << 30, min_shared: int = 16):
        from collections import OrderedDict

        self.pm, self.limit, self.max_bytes, self.min_shared = pm, limit, max_bytes, min_shared
        self.store: "OrderedDict[tuple[int, ...], tuple[object, list]]" = OrderedDict()  # ids -> (np ids, K/V)
        self.nbytes = 0
        self.computed = self.reused = 0  # history tokens the bare base computed / took from the cache

    def get(self, prefix: tuple[int, ...], shared: int = 0):
        """A fresh cache holding the bare base's K/V of `prefix`. With 0 < `shared` < len(prefix),
        only prefix[:shared] (the history, common to many examples) is stored; the rest (an
        assistant-activated example's own user message) is computed on top of it each time."""
        from transformers.cache_utils import DynamicCache

        if not prefix:
            return None
        if not 0 < shared < len(prefix):
            return DynamicCache(ddp_cache_data=list(self._stored(prefix)))
        past = DynamicCache(ddp_cache_data=list(self._stored(prefix[:shared])))
        return self._forward(prefix[shared:], past)

    def _forward(self, ids, past):
        with torch.no_grad(), self.pm.disable_adapter():
            out = self.pm.base_model.model.model(input_ids=torch.tensor([list(ids)]), past_key_values=past,
                                                 use_cache=True)
        return out.past_key_values

    def _longest(self, arr) -> tuple[int, list | None]:
        """The longest common prefix of `arr` with a stored history, and that history's K/V."""
        import numpy as np

        best, kv_best = 0, None
        for key, (ids, kv) in self.store.items():
            m = min(len(ids), len(arr))
            if m <= best:
                continue
            diff = np.flatnonzero(ids[:m] != arr[:m])
            n = int(diff[0]) if len(diff) else m
            if n > best:
                best, kv_best = n, kv
        return best, kv_best

    def _stored(self, prefix: tuple[int, ...]) -> list[tuple[torch.Tensor, torch.Tensor]]:
        import numpy as np
        from transformers.cache_utils import DynamicCache

        hit = self.store.get(prefix)
        if hit is not None:
            self.store.move_to_end(prefix)
            self.reused += len(prefix)
            return hit[1]
        arr = np.asarray(prefix, dtype=np.int64)
        n, kv = self._longest(arr)
        n = min(n, len(prefix) - 1)  # at least one position computed: the forward needs an input
        if n >= self.min_shared:
            past = DynamicCache(ddp_cache_data=[(k[:, :, :n], v[:, :, :n]) for k, v in kv])
            out = self._forward(prefix[n:], past)
        else:
            n = 0
            out = self._forward(prefix, None)
        self.reused += n
        self.computed += len(prefix) - n
        kv = [(layer.keys, layer.values) for layer in out.layers]
        size = sum(k.nbytes + v.nbytes for k, v in kv)
        self.store[prefix] = (arr, kv)
        self.nbytes += size
        while len(self.store) > 1 and (len(self.store) > self.limit or self.nbytes > self.max_bytes):
            _, (_, old) = self.store.popitem(last=False)
            self.nbytes -= sum(k.nbytes + v.nbytes for k, v in old)
        return kv


def adapter_start(ex: Encoded, mode: str, activation: str = "user") -> int:
    """The first position the adapter computes: 0 (full, upper), else the turn's user header or,
    for activation "assistant", its first assistant header."""
    if mode != "turn":
        return 0
    return ex.answer_start if activation == "assistant" else ex.turn_start


def example_loss(pm, ex: Encoded, mode: str, cache: PrefixCache | None,
                 activation: str = "user") -> tuple[torch.Tensor, int, int]:
    """(sum of target-token CE, number of targets, tokens computed with the adapter)."""
    start = adapter_start(ex, mode, activation)
    ids = torch.tensor(ex.ids)
    past = cache.get(tuple(ex.ids[:start]), shared=ex.turn_start) if (mode == "turn" and start > 0) else None
    inner = pm.base_model.model  # the *ForCausalLM with LoRA layers injected
    hidden = inner.model(input_ids=ids[None, start:], past_key_values=past, use_cache=past is not None)
    h = hidden.last_hidden_state[0]  # [T - start, D]
    tgt = [j for j in range(max(start, 1), len(ex.ids)) if ex.labels[j]]
    if not tgt:
        return h.sum() * 0.0, 0, len(ex.ids) - start
    pos = torch.tensor([j - 1 - start for j in tgt])
    if (pos < 0).any():  # a target whose predicting position is in the history: not in this turn
        raise ValueError("target before the turn start")
    logits = inner.lm_head(h[pos]).float()  # [N, V] only where a target is predicted
    loss = torch.nn.functional.cross_entropy(logits, ids[tgt], reduction="sum")
    return loss, len(tgt), len(ex.ids) - start


@torch.no_grad()
def turn_logits(pm, ids: list[int], start: int) -> torch.Tensor:
    """[T, V] logits under the training rule: base on ids[:start], adapter from start on."""
    cache = PrefixCache(pm)
    past = cache.get(tuple(ids[:start])) if start > 0 else None
    inner = pm.base_model.model
    h = inner.model(input_ids=torch.tensor([ids[start:]]), past_key_values=past, use_cache=past is not None)
    tail = inner.lm_head(h.last_hidden_state[0])
    if start == 0:
        return tail
    with pm.disable_adapter():
        head = inner(input_ids=torch.tensor([ids[:start]])).logits[0]
    return torch.cat([head, tail])


# ---- schedule, order, checkpoints ------------------------------------------------------------

def lr_at(cfg: TrainConfig, step: int) -> float:
    if step < cfg.warmup:
        return cfg.lr * (step + 1) / cfg.warmup
    t = (step - cfg.warmup) / max(1, cfg.steps - cfg.warmup)
    return cfg.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(1.0, t))))


def optimizer_step(params, opt, cfg: TrainConfig, step: int) -> None:
    """Clip the gradients to norm 1, set the step's learning rate, step and clear (SFT's and DPO's)."""
    torch.nn.utils.clip_grad_norm_(params, 1.0)
    for g in opt.param_groups:
        g["lr"] = lr_at(cfg, step)
    opt.step()
    opt.zero_grad(set_to_none=True)


def step_indices(n: int, cfg: TrainConfig, step: int) -> list[int]:
    """The global batch of `step`: a seeded permutation per epoch, cycled."""
    out = []
    for k in range(step * cfg.batch, (step + 1) * cfg.batch):
        epoch, i = divmod(k, n)
        perm = list(range(n))
        random.Random(cfg.seed * 1_000_003 + epoch).shuffle(perm)
        out.append(perm[i])
    return out


def save_checkpoint(path: Path, pm, opt, step: int, cfg: TrainConfig, extra: dict | None = None) -> None:
    """LoRA, optimizer and step into `path`, whole or not at all; `extra` (e.g. DPO's objective) goes in its
    state.json."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.mkdir(parents=True, exist_ok=True)
    torch.save({n: p.detach().clone() for n, p in lora_params(pm)}, tmp / "lora.pt")
    torch.save(opt.state_dict(), tmp / "optimizer.pt")
    (tmp / "state.json").write_text(json.dumps({"step": step, "config": asdict(cfg), **(extra or {})}, indent=2))
    if path.exists():
        import shutil

        shutil.rmtree(path)
    tmp.rename(path)


def load_checkpoint(path: Path, pm, opt) -> int:
    state = torch.load(path / "lora.pt")
    params = dict(lora_params(pm))
    missing = sorted(set(params) - set(state))
    if missing:
        raise ValueError(f"checkpoint {path} lacks {len(missing)} LoRA tensors (e.g. {missing[0]})")
    with torch.no_grad():
        for n, p in params.items():
            p.copy_(state[n])
    opt.load_state_dict(torch.load(path / "optimizer.pt"))
    return int(json.loads((path / "state.json").read_text())["step"])


# ---- the loop -------------------------------------------------------------------------------

def train(cfg: TrainConfig, encoded: list[Encoded], out: Path, resume: bool = False, base_dir: Path | None = None,
          progress: bool = True, on_step=None):
    """Run SFT; returns (peft model, history [{step, loss, tokens, lr}]). Writes checkpoints to
    out/checkpoint every cfg.save_every steps (rank 0). The caller saves the final adapter."""
    from macaronic.engine.base import resolve_base

    rank, world = dist_info()
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    if not encoded:
        raise ValueError("no training examples (all were filtered out?)")
    base_dir = base_dir or resolve_base(cfg.base)
    pm = load_model(cfg, base_dir)
    if cfg.init_adapter:
        below = pm.base_model.model.config.num_hidden_layers - cfg.top_k if cfg.mode == "upper" else 0
        dropped = init_from(pm, cfg.init_adapter, below=below)
        if dropped and rank == 0:
            print(f"warm start: dropped {dropped} tensors of layers below {below} (upper mode)", file=__import__("sys").stderr)
    params = [p for _, p in lora_params(pm)]
    opt = torch.optim.AdamW(params, lr=cfg.lr, weight_decay=cfg.weight_decay, betas=(0.9, 0.99))
    ckpt = Path(out) / "checkpoint"
    start_step = 0
    if resume and (ckpt / "state.json").exists():
        start_step = load_checkpoint(ckpt, pm, opt)
    cache = PrefixCache(pm) if cfg.mode == "turn" else None
    history = []
    bar = None
    if progress and rank == 0:
        from tqdm import tqdm

        bar = tqdm(total=cfg.steps, initial=start_step, desc=f"train {cfg.role} ({cfg.mode}"
                   f"{'@assistant' if cfg.activation == 'assistant' else ''}, r{cfg.rank})",
                   dynamic_ncols=True)
    pm.train()
    spent = 0.0
    for step in range(start_step, cfg.steps):
        if cfg.max_seconds and spent >= cfg.max_seconds:  # a wall-clock budget (comparisons at equal time)
            break
        if cfg.stop_after and step >= cfg.stop_after:
            break
        t0 = time.perf_counter()
        batch = step_indices(len(encoded), cfg, step)
        n_tgt = sum(encoded[i].n_targets for i in batch)  # global: every rank knows the whole batch
        loss_sum, tokens = 0.0, 0
        for i in batch[rank::world]:
            # bf16 autocast: 1.8x the examples per second on an AVX512-BF16 core (docs/LOG.md, 2026-12-03)
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=cfg.autocast == "bfloat16"):
                loss, _, tk = example_loss(pm, encoded[i], cfg.mode, cache, cfg.activation)
            (loss / max(1, n_tgt)).backward()
            loss_sum += loss.item()
            tokens += tk
        if world > 1:
            import torch.distributed as dist

            for p in params:
                if p.grad is None:
                    p.grad = torch.zeros_like(p)
                dist.all_reduce(p.grad)
            stats = torch.tensor([loss_sum, float(tokens)], dtype=torch.float64)
            dist.all_reduce(stats)
            loss_sum, tokens = stats[0].item(), int(stats[1].item())
        optimizer_step(params, opt, cfg, step)
        dt = time.perf_counter() - t0
        spent += dt
        rec = {"step": step + 1, "loss": loss_sum / max(1, n_tgt), "tokens": tokens, "lr": lr_at(cfg, step),
               "seconds": round(dt, 3)}
        history.append(rec)
        if bar is not None:
            bar.update(1)
            bar.set_postfix(loss=f"{rec['loss']:.3f}", tok_s=f"{tokens / dt:.0f}")
        if on_step is not None:
            on_step(rec)
        if rank == 0 and cfg.save_every and (step + 1) % cfg.save_every == 0 and step + 1 < cfg.steps:
            save_checkpoint(ckpt, pm, opt, step + 1, cfg)
    if bar is not None:
        bar.close()
    if cache is not None and rank == 0 and progress and cache.computed + cache.reused:
        print(f"history K/V (bare base, no gradient): {cache.computed:,} tokens computed, {cache.reused:,} reused "
              f"({cache.reused / (cache.computed + cache.reused):.0%})", file=__import__("sys").stderr)
    return pm, history


def lora_pairs(pm, n_layers: int) -> dict[tuple[int, str], tuple[torch.Tensor, torch.Tensor]]:
    """{(layer, target): (A [r, d_in], B [d_out, r])} from a PEFT model (B unscaled)."""
    import re

    pat = re.compile(r"layers\.(\d+)\.(?:self_attn|mlp)\.(\w+)\.lora_([AB])\.default\.weight$")
    acc: dict[tuple[int, str], dict[str, torch.Tensor]] = {}
    for n, p in lora_params(pm):
        m = pat.search(n)
        if m:
            acc.setdefault((int(m.group(1)), m.group(2)), {})[m.group(3)] = p.detach().float().cpu()
    return {k: (v["A"], v["B"]) for k, v in sorted(acc.items())}
