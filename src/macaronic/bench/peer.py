"""Decode against llama.cpp on the same GGUF, side by side in one run, at 1 and 2 threads, on any
registered base.

Ours: the base at int4 (the native kernel; requantized from the GGUF, the served default) and, where
the native kernels run, at gguf (the GGUF's own blocks, csrc/ggml.cpp), each with a rank-8 turn adapter
on every stream (4 adapters over 16 streams), greedy; llama.cpp (llama-cpp-python, the optional `bench`
extra): the same GGUF (a split base is assembled in the workdir), no adapter, greedy, one stream and 16
sequences in one batch per step. Each repetition runs the variants back to back, and the figures are
medians of the per-repetition ratios (a busy machine slows both sides of a pair alike); the tokens/s
columns are medians too. llama.cpp's threads are pinned to the same count as torch's, and it decodes in a
process of its own (`_PeerProcess`), idle while ours runs and the other way round.
Knows nothing about HTTP or the harness.
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path

import torch

from macaronic.engine.sampling import SamplingParams


def run(base_dir, workdir: Path, threads=(1, 2), reps: int = 3, tokens: int = 32, quants=None, progress=None) -> dict:
    """`quants`: ours at each of these ("int4", "gguf"); None: int4, and gguf too where the native kernels
    run and the base has a GGUF."""
    from macaronic.bench.suite import _llama_model, make_llm, peer_gguf
    from macaronic.engine import native
    from macaronic.engine.base import load_base
    from macaronic.engine.llm import load_tokenizer
    from macaronic.testing import make_random_adapter

    first = load_base(base_dir, dtype=torch.bfloat16, quant="int4")
    tok = load_tokenizer(first.path)
    gguf = peer_gguf(first, scratch=workdir)
    if quants is None:
        quants = ("int4", "gguf") if gguf is not None and native.ops() is not None else ("int4",)
    loaded = {"int4": first}
    for q in quants:
        if q not in loaded:
            loaded[q] = load_base(base_dir, dtype=torch.bfloat16, quant=q)
    model = _llama_model(gguf)  # only to know it loads: it decodes in its own process (_PeerProcess)
    if model is not None:
        import llama_cpp as lc

        lc.llama_model_free(model)
        model = _PeerProcess(gguf)
    out: dict = {"tokens": tokens, "reps": reps, "llamacpp": model is not None, "quants": list(quants),
                 "int4_x8": getattr(first.model, "int4_path", 0) == 5 and native.ops().q8_supported(),
                 "base": getattr(first, "name", None) or Path(base_dir).name, "rows": []}
    prompts = None

    def engine(th: int, q: str):
        """A fresh engine at `th` threads: its loop thread takes torch's thread count when it
        starts, so a count set afterwards would never reach it."""
        nonlocal prompts
        torch.set_num_threads(th)
        b = loaded[q]
        llm = make_llm(b, tok, max_batch=16, prefix_cache=False)
        try:
            for i in range(4):
                d = workdir / f"peer{i}"
                if not (d / "adapter_config.json").exists():
                    make_random_adapter(d, b.args, rank=8, seed=500 + i, mode="turn", scale=0.05)
                llm.add_adapter(d, f"p{i}")
        except BaseException:
            llm.close()  # not yet among the engines `close` ends
            raise
        prompts = prompts or [llm.encode_chat([{"role": "user", "content": f"Write item {i} of a long list."}])
                              for i in range(16)]
        return llm

    sp = SamplingParams(max_tokens=tokens, stop_token_ids=())
    llms: dict = {}

    def ours(q: str, n: int) -> float:
        llm = llms[q]
        hs = [llm.submit(p, f"p{i % 4}", sp) for i, p in enumerate(prompts[:n])]
        for h in hs:  # prompts first: only decode is timed, as on the peer's side
            next(iter(h))
        t = time.perf_counter()
        for h in hs:
            h.result()
        return n * (tokens - 1) / (time.perf_counter() - t)

    def peer(n: int) -> float | None:
        return None if model is None else model.generate(prompts[:n], tokens, torch.get_num_threads())

    def close() -> None:
        for llm in llms.values():
            llm.close()
        llms.clear()

    try:
        for th in threads:
            close()
            for q in quants:
                llms[q] = engine(th, q)
                ours(q, 2)  # warm-up at this thread count
            runs: dict[str, list] = {"peer1": [], "peer16": [], **{f"{q}{n}": [] for q in quants for n in (1, 16)}}
            for _ in range(reps):
                for n in (1, 16):
                    for q in quants:
                        runs[f"{q}{n}"].append(ours(q, n))
                    runs[f"peer{n}"].append(peer(n))
                if progress:
                    progress()
            for q in quants:
                row = {"threads": th, "quant": q, "ours1_tok_s": round(statistics.median(runs[f"{q}1"]), 2),
                       "ours16_tok_s": round(statistics.median(runs[f"{q}16"]), 2)}
                for n in (1, 16):
                    peer_runs = runs[f"peer{n}"]
                    row[f"peer{n}_tok_s"] = round(statistics.median(peer_runs), 2) if peer_runs[0] is not None else None
                    if peer_runs[0] is not None:
                        row[f"ratio{n}"] = round(statistics.median(o / p for o, p in zip(runs[f"{q}{n}"], peer_runs)), 3)
                out["rows"].append(row)
    finally:
        close()
        if model is not None:
            model.close()
    return out


class _PeerProcess:
    """llama.cpp in a process of its own, driven over a pipe: it and our engine each use OpenMP (one
    libgomp per process), and libgomp throttles its spin-waits once one process holds more OpenMP
    threads than there are cores, which in one process cut llama.cpp's two-thread decode to a third."""

    def __init__(self, gguf: Path):
        import multiprocessing as mp

        self.conn, child = mp.get_context("spawn").Pipe()
        self.proc = mp.get_context("spawn").Process(target=_peer_main, args=(child, str(gguf)), daemon=True)
        self.proc.start()
        child.close()  # the child's end lives in the child: a dead peer is then EOF here, not a hang

    def generate(self, prompts: list[list[int]], tokens: int, threads: int) -> float:
        try:
            self.conn.send((prompts, tokens, threads))
            got = self.conn.recv()
        except (EOFError, OSError) as e:
            raise RuntimeError(f"llama.cpp peer process ended (exit code {self.proc.exitcode})") from e
        if isinstance(got, str):
            raise RuntimeError(f"llama.cpp peer: {got}")
        return got

    def close(self) -> None:
        try:
            if self.proc.is_alive():
                self.conn.send(None)
        except OSError:
            pass
        self.proc.join(timeout=30)
        if self.proc.is_alive():
            self.proc.terminate()


def _peer_main(conn, gguf: str) -> None:
    from macaronic.bench.suite import _LlamaCpp, _llama_model

    try:
        model = _llama_model(Path(gguf))
    except Exception as e:  # noqa: BLE001 - the parent raises it at its first request
        model, failed = None, f"loading {gguf}: {type(e).__name__}: {e}"
    while (job := conn.recv()) is not None:
        if model is None:
            conn.send(failed)
            continue
        prompts, tokens, threads = job
        torch.set_num_threads(threads)  # _LlamaCpp takes torch's thread count
        try:
            conn.send(_LlamaCpp(model, len(prompts)).generate(prompts, tokens))
        except Exception as e:  # noqa: BLE001 - reported to the parent, which raises it
            conn.send(f"{type(e).__name__}: {e}")


def markdown(r: dict) -> list[str]:
    from macaronic.engine.bases import SMALL_BASE

    if not r["llamacpp"]:
        return ["No peer figures: llama.cpp (llama-cpp-python, the optional `bench` extra) is not installed, or the "
                "base is not a registered one with a GGUF the peer can load.", ""]
    quants = r.get("quants", ["int4"])
    out = [f"Base: {r.get('base', SMALL_BASE)}. Decode tokens/s after the prompt, {r['tokens']} tokens per "
           f"stream, median of {r['reps']} interleaved repetitions. Ours: "
           + " and ".join({"int4": "int4 (requantized from the GGUF, the served default"
                                   + ("; x rounded to 8 bits up to 128 rows, integer products on VNNI, as the base "
                                      "asks" if r.get("int4_x8") else "") + ")",
                           "gguf": "gguf (the GGUF's own blocks; up to 32 rows x rounded to 8 bits and integer dot "
                                   "products, as llama.cpp's kernels)"}.get(q, q) for q in quants)
           + ", native kernels, a rank-8 turn adapter on every stream (4 adapters over 16 streams; the decode step in "
           "one native call); llama.cpp: the same GGUF, no adapter, its extra buffer types off (their AMX path faults "
           "on the Intel Xeon VMs these benches also ran on), in a process of its own, idle while ours runs. Both at "
           "the row's thread count. Goals (issue 40, for the default base): 1 stream at least 1.5x, 16 streams at least 3x.",
           "", "| threads | ours | ours, 1 stream | llama.cpp, 1 | ours / llama.cpp | ours, 16 mixed | llama.cpp, 16 | ours / llama.cpp |",
           "|---:|---|---:|---:|---:|---:|---:|---:|"]
    for row in r["rows"]:
        out.append(f"| {row['threads']} | {row.get('quant', 'int4')} | {row['ours1_tok_s']} | {row['peer1_tok_s']} | "
                   f"{row.get('ratio1', 'n/a')}x | {row['ours16_tok_s']} | {row['peer16_tok_s']} | {row.get('ratio16', 'n/a')}x |")
    rows = {row["threads"]: row for row in r["rows"]}
    slow = [t for t, row in rows.items() if t > 1 and 1 in rows and row["peer1_tok_s"] < rows[1]["peer1_tok_s"]]
    if slow:
        out += ["", f"llama.cpp at {', '.join(map(str, slow))} threads ran slower than at 1: its OpenMP threads spin "
                "when a core is busy (see the load average above), so that row measures the machine, not the engines."]
    return [*out, ""]
