"""The engine benchmarks: switched-turn TTFT, adapter switch/load, decode and prefill throughput.

Each function measures its comparisons side by side in one process and returns plain data;
the CLI writes JSON and markdown. Peers that are not installed (llama-cpp-python) give null,
never a made-up number. Knows nothing about routing or HTTP.
"""

from __future__ import annotations

import importlib.util
import shutil
import statistics
import time
from pathlib import Path

import torch

from macaronic.engine.engine import EngineConfig
from macaronic.engine.llm import LLM, load_tokenizer
from macaronic.engine.sampling import SamplingParams
from macaronic.testing import make_random_adapter

FILLER = (
    "The committee reviewed the quarterly figures, noted that shipping delays had eased, and asked the "
    "team to prepare a short summary of open risks before the next planning meeting on Thursday. "
)


def med(xs: list[float]) -> float:
    return round(statistics.median(xs), 3)


def make_llm(base, tok, **cfg) -> LLM:
    return LLM(base, tok, EngineConfig(**cfg))


def conversation(tok, target_tokens: int) -> tuple[list[dict], list[dict]]:
    """A history of about `target_tokens` tokens ending in an assistant turn, and a next user turn."""
    msgs = [{"role": "system", "content": "You are a helpful assistant."}]
    i = 0
    while True:
        msgs += [{"role": "user", "content": f"Question {i}: " + FILLER * 2},
                 {"role": "assistant", "content": f"Answer {i}: " + FILLER * 3}]
        i += 1
        text = tok.apply_chat_template(msgs, tokenize=False)
        if len(tok.encode(text, add_special_tokens=False)) >= target_tokens:
            break
    return msgs, [{"role": "user", "content": "Now summarise the open risks in one sentence."}]


def _trim(llm: LLM, msgs: list[dict], target: int) -> list[int]:
    ids = llm.encode_chat(msgs, add_generation_prompt=False)
    return ids[:target]


def adapters_for(llm_args, workdir: Path, rank: int = 8) -> dict[str, Path]:
    out = {}
    for mode in ("turn", "full"):
        for j, name in enumerate(("a", "b")):
            out[f"{name}_{mode}"] = make_random_adapter(workdir / f"{name}_{mode}", llm_args, rank=rank,
                                                        seed=100 + j, mode=mode, scale=0.05)
    return out


def switch_ttft(base, workdir: Path, lengths=(512, 2048, 4096), reps: int = 3, progress=None) -> list[dict]:
    """TTFT of a turn on adapter B after a history computed on adapter A, four ways."""
    tok = load_tokenizer(base.path)
    paths = adapters_for(base.args, workdir)
    cached = make_llm(base, tok, max_context=8192, prefill_chunk=1024)
    cleared = make_llm(base, tok, max_context=8192, prefill_chunk=1024, prefix_cache=False)
    for llm in (cached, cleared):
        for name, p in paths.items():
            llm.add_adapter(p, name)
    peft_model = _peft_model(base.path, paths["a_full"], paths["b_full"])
    one = SamplingParams(max_tokens=1, stop_token_ids=())
    rows = []
    for n in lengths:
        hist, prompt = switch_prompt(cached, tok, n)
        res = {"turn_ms": [], "per_adapter_ms": [], "cleared_ms": [], "peft_ms": [], "turn_prefill_tokens": None}
        for _ in range(reps):
            usage = switched_turn(cached, hist, prompt, "a_turn", "b_turn")
            res["turn_ms"].append(usage["ttft_ms"])
            res["turn_prefill_tokens"] = usage["prefill_tokens"]
            # vLLM rule: the cache is keyed per adapter; B never computed this history
            cached.engine.cache.clear()
            cached.submit(hist, "a_full", one).result()
            h = cached.submit(prompt, "b_full", one)
            h.result()
            res["per_adapter_ms"].append(h.usage["ttft_ms"])
            # llama.cpp rule: a LoRA change clears the slot's cache
            h = cleared.submit(prompt, "b_full", one)
            h.result()
            res["cleared_ms"].append(h.usage["ttft_ms"])
            res["peft_ms"].append(_peft_ttft(peft_model, prompt))
            if progress:
                progress()
        row = {"history_tokens": n, "prompt_tokens": len(prompt)}
        row.update({k: med(v) if isinstance(v, list) else v for k, v in res.items()})
        row["cleared_over_turn"] = round(row["cleared_ms"] / row["turn_ms"], 1)
        rows.append(row)
    cached.close(), cleared.close()
    return rows


def switch_prompt(llm: LLM, tok, n: int) -> tuple[list[int], list[int]]:
    """(history of `n` tokens, that history + the next user turn as it follows an assistant turn)."""
    msgs, nxt = conversation(tok, n + 200)
    hist = _trim(llm, msgs, n)
    tail = llm.encode_chat([{"role": "user", "content": nxt[0]["content"]}])
    return hist, hist + tail[llm.turn_start(tail):]


def switched_turn(llm: LLM, hist: list[int], prompt: list[int], a: str, b: str) -> dict:
    """From an empty cache, `hist` computed by turn adapter `a` (one token), then `prompt` on turn adapter `b`:
    the second request's usage (its `ttft_ms`, `prefill_tokens`). Everything before the new turn is reused."""
    one = SamplingParams(max_tokens=1, stop_token_ids=())
    llm.engine.cache.clear()
    llm.submit(hist, a, one, active_from=llm.turn_start(hist)).result()
    h = llm.submit(prompt, b, one)
    h.result()
    return h.usage


def _peft_model(base_dir: Path, a: Path, b: Path):
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(str(base_dir), dtype=torch.float32).eval()
    model = PeftModel.from_pretrained(model, str(a), adapter_name="a")
    model.load_adapter(str(b), adapter_name="b")
    return model


@torch.inference_mode()
def _peft_ttft(model, prompt: list[int]) -> float:
    model.set_adapter("a")
    model.set_adapter("b")  # the switch, then a full recompute of the prompt
    t = time.perf_counter()
    model(input_ids=torch.tensor([prompt]), use_cache=True, logits_to_keep=1)
    return (time.perf_counter() - t) * 1000


def adapter_latency(base, workdir: Path, counts=(4, 400), rank: int = 8) -> dict:
    """Switch (resident, pin+unpin) and load (disk -> slot) latency with N registered adapters."""
    tok = load_tokenizer(base.path)
    proto = make_random_adapter(workdir / "proto", base.args, rank=rank, seed=7, mode="turn")
    out: dict = {}
    for n in counts:
        llm = make_llm(base, tok, max_loras=4, max_registered=max(512, n))
        t = time.perf_counter()
        for i in range(n):  # distinct ids, shared tensor bytes (hard links keep the disk small)
            d = workdir / f"n{n}" / f"ad{i}"
            d.mkdir(parents=True, exist_ok=True)
            for f in ("adapter_config.json", "adapter_model.safetensors"):
                if not (d / f).exists():
                    try:
                        (d / f).hardlink_to(proto / f)
                    except OSError:
                        shutil.copy(proto / f, d / f)
            (d / "macaronic.json").write_text(f'{{"mode": "turn", "description": "bench adapter {i}"}}')
            llm.add_adapter(d, f"ad{i}")
        register_ms = (time.perf_counter() - t) * 1000 / n
        reg = llm.adapters
        slot = reg.acquire("ad0")
        reg.release(slot)
        sw = []
        for k in range(2000):
            t = time.perf_counter_ns()
            s = reg.acquire("ad0")
            reg.release(s)
            sw.append((time.perf_counter_ns() - t) / 1000)
        loads = []
        for k in range(1, min(n, 21)):
            t = time.perf_counter()
            s = reg.acquire(f"ad{k}")  # not resident: read from disk, copy into an evicted slot
            loads.append((time.perf_counter() - t) * 1000)
            reg.release(s)
        suffix = "" if n == counts[0] else f"_{n}"
        out[f"switch_us{suffix}"] = med(sw)
        out[f"load_ms{suffix}"] = med(loads)
        out[f"register_ms{suffix}"] = round(register_ms, 3)
        if n == counts[0]:
            out["bytes_per_adapter"] = llm.engine.bank.nbytes_per_slot()
            out["file_bytes_per_adapter"] = (proto / "adapter_model.safetensors").stat().st_size
            out["slot_rank"] = llm.engine.bank.r_max
        llm.close()
    out["adapter_rank"] = rank
    return out


def decode_throughput(base, workdir: Path, tokens: int = 32, progress=None, reps: int = 1) -> dict:
    """Aggregate decode tokens/s: 1 stream, 4 and 16 mixed-adapter streams, 16 base-only streams."""
    out = _decode(base, workdir, tokens, progress, reps)
    tok = load_tokenizer(base.path)
    prompts = [tok.encode(tok.apply_chat_template([{"role": "user", "content": f"Write item {i} of a long list."}],
                                                  tokenize=False, add_generation_prompt=True),
                          add_special_tokens=False) for i in range(16)]
    out.update(_llamacpp_decode(tokens, prompts, gguf=peer_gguf(base)))
    return out


PRECISIONS = {"bf16": ("bfloat16", "none"), "int8": ("bfloat16", "int8"), "int4": ("bfloat16", "int4")}


def decode_precision(base_dir, workdir: Path, precision: str, tokens: int = 32, reps: int = 1) -> dict:
    """The same decode figures with the base at another precision (bf16, or int8/int4 weight-only)."""
    from macaronic.engine.base import load_base

    dtype, quant = PRECISIONS[precision]
    b = load_base(base_dir, dtype=getattr(torch, dtype), quant=quant)
    return _decode(b, workdir, tokens, None, reps)


def precision_accuracy(base, tokens: int = 128) -> dict:
    """Each fast precision against fp32 on the same text, decoded one token at a time (the path
    decode takes): top-1 agreement, mean KL(fp32 || fast) and next-token NLL of the text."""
    from macaronic.engine.base import load_base
    from macaronic.engine.kvpool import KVBuffer
    from macaronic.engine.model import SeqSlice

    tok = load_tokenizer(base.path)
    msgs, _ = conversation(tok, tokens + 50)
    ids = torch.tensor(tok.encode(tok.apply_chat_template(msgs, tokenize=False), add_special_tokens=False)[:tokens])

    def logits(b) -> torch.Tensor:
        kv = KVBuffer(b.args, tokens, b.model.dtype)
        with torch.inference_mode():
            return torch.cat([b.model.decode(ids[i : i + 1], [SeqSlice(kv, 1)], logits="all").float() for i in range(tokens)])

    ref = logits(base).log_softmax(-1)
    nll = lambda lp: round(float(-lp[:-1].gather(1, ids[1:, None]).mean()), 4)  # noqa: E731
    out = {"tokens": tokens, "fp32_nll": nll(ref)}
    for name, (dtype, quant) in PRECISIONS.items():
        lp = logits(load_base(base.path, dtype=getattr(torch, dtype), quant=quant)).log_softmax(-1)
        out[name] = {"top1_agree": round(float((lp.argmax(-1) == ref.argmax(-1)).float().mean()), 4),
                     "kl": round(float((ref.exp() * (ref - lp)).sum(-1).mean()), 5), "nll": nll(lp)}
    return out


def _decode(base, workdir: Path, tokens: int, progress, reps: int = 1) -> dict:
    tok = load_tokenizer(base.path)
    llm = make_llm(base, tok, max_batch=16, prefix_cache=False)
    for i in range(4):
        d = workdir / f"dec{i}"
        if not (d / "adapter_config.json").exists():
            make_random_adapter(d, base.args, rank=8, seed=200 + i, mode="turn", scale=0.05)
        llm.add_adapter(d, f"d{i}")
    sp = SamplingParams(max_tokens=tokens, stop_token_ids=())

    def run(n: int, mixed: bool) -> float:
        prompts = [llm.encode_chat([{"role": "user", "content": f"Write item {i} of a long list."}]) for i in range(n)]
        hs = [llm.submit(p, f"d{i % 4}" if mixed else None, sp) for i, p in enumerate(prompts)]
        for h in hs:  # wait for all prefills so only decode is timed
            next(iter(h))
        t = time.perf_counter()
        for h in hs:
            h.result()
        dt = time.perf_counter() - t
        if progress:
            progress()
        return round(n * (tokens - 1) / dt, 2)

    run(2, True)  # warm-up
    # each with-LoRA figure next to its base-only twin, repeated, medians: the machine is noisy
    pairs = {"single_tok_s": (1, True), "base_single_tok_s": (1, False), "mixed16_tok_s": (16, True),
             "base16_tok_s": (16, False), "mixed4_tok_s": (4, True)}
    runs: dict[str, list[float]] = {k: [] for k in pairs}
    for _ in range(reps):
        for k, (n, mixed) in pairs.items():
            runs[k].append(run(n, mixed))
    out = {k: med(v) for k, v in runs.items()}
    out["lora16_overhead_pct"] = round(100 * (out["base16_tok_s"] / out["mixed16_tok_s"] - 1), 1)
    llm.close()
    return out


def prefill_throughput(base, lengths=(512, 2048)) -> dict:
    """Prompt tokens/s (TTFT of a cold prompt) in fp32 and bf16, and llama.cpp's on the same ids."""
    from macaronic.engine.base import load_base

    tok = load_tokenizer(base.path)
    out = {}
    msgs, _ = conversation(tok, max(lengths) + 100)
    for key, b in (("", base), ("bf16_", load_base(base.path, dtype=torch.bfloat16))):
        llm = make_llm(b, tok, prefix_cache=False, prefill_chunk=4096)
        ids = llm.encode_chat(msgs, add_generation_prompt=False)
        for n in lengths:
            h = llm.submit(ids[:n], None, SamplingParams(max_tokens=1, stop_token_ids=()))
            h.result()
            out[f"{key}prefill{n}_tok_s"] = round(n / (h.usage["ttft_ms"] / 1000), 1)
            if not key:
                out[f"llamacpp_prefill{n}_tok_s"] = _llamacpp_prefill(ids[:n], gguf=peer_gguf(base))
        llm.close()
    return out


_QUIET: list = []  # llama.cpp's log callback, kept alive for the process


def peer_gguf(base, scratch: Path | None = None) -> Path | None:
    """The GGUF the llama.cpp peer loads for a benchmarked base: SmolLM2-135M's file; with `scratch`, any
    registered base's (a split one assembled there, checked); else None (its llama.cpp rows are left out)."""
    from macaronic.engine import bases
    from macaronic.engine.base import base_gguf, smollm2_gguf
    from macaronic.engine.bases import SMALL_BASE

    name = getattr(base, "name", None)
    if name == SMALL_BASE:
        return smollm2_gguf()
    if scratch is None or name not in bases.BASES:
        return None
    return base_gguf(name, scratch / bases.get(name).gguf)


def _llama_model(gguf: Path | None = None):
    """A GGUF loaded by llama.cpp (the optional `bench` extra), or None (no llama.cpp, or no GGUF).

    Extra buffer types (weight repacking, AMX) are off: on this VM their AMX path dies with an
    illegal instruction, so llama.cpp runs its plain CPU kernels (stated next to the figures)."""
    if importlib.util.find_spec("llama_cpp") is None:
        return None
    import llama_cpp as lc

    if gguf is None:
        return None
    if not _QUIET:
        _QUIET.append(lc.llama_log_callback(lambda level, text, user_data: None))
        lc.llama_log_set(_QUIET[0], None)
    lc.llama_backend_init()
    mp = lc.llama_model_default_params()
    mp.use_extra_bufts = False
    return lc.llama_model_load_from_file(str(gguf).encode(), mp)


def _llamacpp_decode(tokens: int, prompts: list[list[int]], gguf: Path | None = None, n16: bool = True) -> dict:
    """llama.cpp on the same GGUF, greedy, 2 threads: one stream, and 16 sequences in one batch
    per step (its parallel-sequence API), timed after the prompts like ours."""
    model = _llama_model(gguf)
    if model is None:
        return {"llamacpp_single_tok_s": None, "llamacpp16_tok_s": None}
    import llama_cpp as lc

    try:
        return {"llamacpp_single_tok_s": _LlamaCpp(model, 1).generate(prompts[:1], tokens),
                "llamacpp16_tok_s": _LlamaCpp(model, 16).generate(prompts[:16], tokens) if n16 else None}
    finally:
        lc.llama_model_free(model)


class _LlamaCpp:
    """A llama.cpp context for n parallel sequences, driven through its batch API."""

    def __init__(self, model, n_seq: int, n_ctx_per_seq: int = 256):
        import llama_cpp as lc

        self.lc, self.model = lc, model
        cp = lc.llama_context_default_params()
        cp.n_ctx, cp.n_batch, cp.n_ubatch, cp.n_seq_max = n_ctx_per_seq * n_seq, 512, 512, n_seq
        cp.n_threads = cp.n_threads_batch = torch.get_num_threads()  # the same threads as ours
        self.ctx = lc.llama_init_from_model(model, cp)
        self.n_vocab = lc.llama_vocab_n_tokens(lc.llama_model_get_vocab(model))
        self.batch = lc.llama_batch_init(512, 0, 1)

    def decode(self, items) -> None:  # (token, position, sequence, wants logits), at most 512
        b = self.batch
        b.n_tokens = len(items)
        for i, (t, p, s, want) in enumerate(items):
            b.token[i], b.pos[i], b.n_seq_id[i], b.logits[i] = t, p, 1, want
            b.seq_id[i][0] = s
        if self.lc.llama_decode(self.ctx, b) != 0:
            raise RuntimeError("llama_decode failed")

    def greedy(self, i: int) -> int:
        import numpy as np

        return int(np.ctypeslib.as_array(self.lc.llama_get_logits_ith(self.ctx, i), shape=(self.n_vocab,)).argmax())

    def prefill(self, ids: list[int], seq: int = 0) -> None:
        for at in range(0, len(ids), 512):
            chunk = ids[at : at + 512]
            self.decode([(t, at + i, seq, at + i == len(ids) - 1) for i, t in enumerate(chunk)])

    def generate(self, prompts: list[list[int]], tokens: int) -> float:
        try:
            last, pos = [], []
            for s, p in enumerate(prompts):
                self.prefill(p, s)
                last.append(self.greedy(len(p) - 1 - ((len(p) - 1) // 512) * 512))
                pos.append(len(p))
            t0 = time.perf_counter()
            for _ in range(tokens - 1):
                self.decode([(last[s], pos[s], s, True) for s in range(len(prompts))])
                last = [self.greedy(s) for s in range(len(prompts))]
                pos = [p + 1 for p in pos]
            return round(len(prompts) * (tokens - 1) / (time.perf_counter() - t0), 2)
        finally:
            self.close()

    def close(self) -> None:
        self.lc.llama_batch_free(self.batch)
        self.lc.llama_free(self.ctx)


def _llamacpp_prefill(ids: list[int], gguf: Path | None = None) -> float | None:
    model = _llama_model(gguf)
    if model is None:
        return None
    import llama_cpp as lc

    try:
        cpp = _LlamaCpp(model, 1, n_ctx_per_seq=len(ids) + 16)
        try:
            t = time.perf_counter()
            cpp.prefill(ids)
            return round(len(ids) / (time.perf_counter() - t), 1)
        finally:
            cpp.close()
    finally:
        lc.llama_model_free(model)