"""Load and abuse: what one client's attack costs another client of the same `macaronic serve`.

One real server (the routed pair of the base, its default router), one victim client that sends
streaming routed requests one after another and records its time to first token and the gaps
between its content chunks; first with no attack, then while each attack runs, then with no
attack again (the box is shared: the second baseline shows the drift), all in one run:

- `long prompt`: a prompt as long as the context allows (about 27,000 tokens on a 32k base; the
  context less a margin on a smaller one), a new one (no cached prefix) as soon as one ends;
- `compile storm`: six clients at once, each sending tools whose parameters are 300-branch
  `anyOf`s under a forced tool choice (a new grammar every time, no cache);
- `n=8 disconnect`: a streamed n=8 request of 1,000 tokens whose client leaves after one second,
  again and again;
- `many tools`: as many small tools as the budget allows (128), calls required, back to back.

The ratio of each attack's figure to the first baseline is the figure to read. Knows HTTP and the
attacks; nothing of the engine's internals.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from urllib.parse import urlparse

from macaronic.bench.serving import WORDS, pct, start_server

ATTACKS = ("long prompt", "compile storm", "n=8 disconnect", "many tools")


def _victim(url: str, n: int, tokens: int, tag: str) -> dict:
    """`n` streaming routed requests one after another: TTFT and chunk gaps as the client sees them."""
    import httpx

    ttft, gaps, errors = [], [], 0
    for i in range(n):
        words = " ".join(WORDS[(i * 7 + k) % len(WORDS)] for k in range(12))
        body = {"model": "macaronic", "messages": [{"role": "user", "content": f"{tag} {i}: write a note about {words}."}],
                "max_tokens": tokens, "temperature": 0, "stream": True}
        t0, times = time.perf_counter(), []
        try:
            with httpx.stream("POST", url + "/v1/chat/completions", json=body, timeout=600) as r:
                for line in r.iter_lines():
                    if line.startswith("data:") and line.strip() != "data: [DONE]":
                        delta = ((json.loads(line[5:]).get("choices") or [{}])[0].get("delta") or {})
                        if delta.get("content"):
                            times.append(time.perf_counter())
                errors += r.status_code != 200
        except httpx.HTTPError:
            errors += 1
        if times:
            ttft.append((times[0] - t0) * 1000)
            gaps += [(b - a) * 1000 for a, b in zip(times, times[1:])]
    return {"requests": n, "errors": errors, "ttft_p50_ms": pct(ttft, 0.5), "ttft_p99_ms": pct(ttft, 0.99),
            "gap_p50_ms": pct(gaps, 0.5), "gap_p99_ms": pct(gaps, 0.99), "gaps": len(gaps)}


def _post(url: str, body: dict, timeout: float = 600) -> int:
    import httpx

    try:
        return httpx.post(url + "/v1/chat/completions", json=body, timeout=timeout).status_code
    except httpx.HTTPError:
        return 0


def long_text(base: str | None, tokens: int) -> str:
    """Prose of about `tokens` tokens of the base's tokenizer."""
    from macaronic.engine.base import resolve_base
    from macaronic.engine.llm import load_tokenizer

    tok = load_tokenizer(resolve_base(base))
    words = " ".join(f"{WORDS[i % len(WORDS)]} {i}" for i in range(tokens))
    return tok.decode(tok.encode(words, add_special_tokens=False)[:tokens])


def _long_prompt(url: str, stop: threading.Event, body: str, k: list) -> None:
    while not stop.is_set():
        text = f"Attempt {k[0]}: summarise this. " + body  # a new first line: no cached prefix
        k[0] += 1
        _post(url, {"model": "macaronic", "messages": [{"role": "user", "content": text}], "max_tokens": 4})


def _any_of_tool(name: str, branches: int = 300) -> dict:
    return {"type": "function", "function": {"name": name, "parameters": {
        "type": "object", "required": ["v"],
        "properties": {"v": {"anyOf": [{"type": "object", "properties": {f"k{j}": {"const": f"{name}-{j}"}},
                                        "required": [f"k{j}"]} for j in range(branches)]}}}}}


def _storm(url: str, stop: threading.Event, i: int, k: list) -> None:
    while not stop.is_set():
        k[0] += 1
        name = f"storm{i}_{k[0]}"  # a new grammar each time: the cache never answers
        _post(url, {"model": "macaronic", "messages": [{"role": "user", "content": "call it"}], "max_tokens": 8,
                    "tools": [_any_of_tool(name)], "tool_choice": {"type": "function", "function": {"name": name}}})


def _disconnect(url: str, stop: threading.Event, k: list) -> None:
    u = urlparse(url)
    while not stop.is_set():
        k[0] += 1
        data = json.dumps({"model": "macaronic", "n": 8, "stream": True, "max_tokens": 1000,
                           "messages": [{"role": "user", "content": f"story {k[0]}: a very long tale"}]}).encode()
        with socket.create_connection((u.hostname, u.port)) as s:
            s.sendall(f"POST /v1/chat/completions HTTP/1.1\r\nHost: {u.netloc}\r\nContent-Type: application/json\r\n"
                      f"Content-Length: {len(data)}\r\n\r\n".encode() + data)
            stop.wait(1.0)


def _many_tools(url: str, stop: threading.Event, n: int, k: list) -> None:
    while not stop.is_set():
        k[0] += 1
        tools = [{"type": "function", "function": {"name": f"t{k[0]}_{j}", "description": f"tool {j}", "parameters": {
            "type": "object", "properties": {"x": {"type": "integer"}}}}} for j in range(n)]
        _post(url, {"model": "macaronic", "messages": [{"role": "user", "content": "use a tool"}], "max_tokens": 16,
                    "tools": tools, "tool_choice": "required"})


def _attack(name: str, url: str, stop: threading.Event, long_body: str, k: list) -> list[threading.Thread]:
    if name == "long prompt":
        targets = [(_long_prompt, (url, stop, long_body, k))]
    elif name == "compile storm":
        targets = [(_storm, (url, stop, i, k)) for i in range(6)]
    elif name == "n=8 disconnect":
        targets = [(_disconnect, (url, stop, k))]
    else:
        targets = [(_many_tools, (url, stop, 128, k))]
    threads = [threading.Thread(target=f, args=a, daemon=True) for f, a in targets]
    for t in threads:
        t.start()
    return threads


def load_and_abuse(base: str | None = None, quick: bool = False, threads: int | None = None, progress=None) -> dict:
    """Baseline, each attack, baseline again; the victim's figures and their ratios to the first baseline."""
    import tempfile

    import httpx

    from macaronic.engine.base import resolve_base
    from macaronic.engine.config import ModelArgs

    victims, tokens = (6, 24) if quick else (16, 32)
    context = ModelArgs.from_dir(resolve_base(base)).max_seq_len
    long_tokens = min(27_000, context - 600)  # the attack's prompt: the context less the template and the reply
    body = long_text(base, long_tokens)
    env = {"OMP_NUM_THREADS": str(threads)} if threads else {}
    with tempfile.TemporaryDirectory(prefix="macaronic-abuse-") as tmp:
        proc, url = start_server([*(["--base", base] if base else []), "--store", f"{tmp}/s.sqlite"], env=env)
        try:
            _victim(url, 2, 8, "warm-up")  # first-use costs (router state, adapters) out of the figures
            _post(url, {"model": "macaronic", "messages": [{"role": "user", "content": "x"}], "max_tokens": 4,
                        "tools": [_any_of_tool("warm", 3)], "tool_choice": "required"})  # the grammar workers
            phases = []
            for name in ("baseline", *ATTACKS, "baseline again"):
                stop, k = threading.Event(), [0]
                workers = [] if name.startswith("baseline") else _attack(name, url, stop, body, k)
                time.sleep(0 if not workers else 2.0)  # the attack is in flight before the victim starts
                t0 = time.perf_counter()
                row = {"phase": name, **_victim(url, victims, tokens, name), "attack_requests": k[0]}
                row["wall_s"] = round(time.perf_counter() - t0, 1)
                stop.set()
                for w in workers:
                    w.join(timeout=1)
                phases.append(row)
                _settle(url)
                if progress:
                    progress()
            health = httpx.get(url + "/metrics", timeout=60).text
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except Exception:
                proc.kill()
    first = phases[0]
    for row in phases:
        for key in ("ttft_p50_ms", "ttft_p99_ms", "gap_p99_ms"):
            a, b = row[key], first[key]
            row[key.replace("_ms", "_x")] = round(a / b, 2) if a is not None and b else None
    closed = sum(float(line.rsplit(" ", 1)[1]) for line in health.splitlines()
                 if line.startswith("macaronic_requests_total") and 'status="499"' in line)
    return {"base": base, "context": context, "long_prompt_tokens": long_tokens, "victim_requests": victims,
            "victim_tokens": tokens, "threads": threads, "closed_499": closed, "phases": phases}


def _settle(url: str, limit_s: float = 120) -> None:
    """Wait until the engine runs nothing (an attack's last request has ended or been cancelled)."""
    import httpx

    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        text = httpx.get(url + "/metrics", timeout=60).text
        running = [line for line in text.splitlines() if line.startswith(("macaronic_engine_running ",
                                                                          "macaronic_engine_waiting "))]
        if running and all(line.endswith(" 0") for line in running):
            return
        time.sleep(0.5)


def markdown(r: dict) -> list[str]:
    def f(x):
        return "n/a" if x is None else (f"{x:,.1f}" if isinstance(x, float) else str(x))

    out = ["### What one client's attack costs another", "",
           f"One `macaronic serve` on {r['base'] or 'the default base'} (context {r['context']:,}; its routed pair and "
           f"default router). A victim sends {r['victim_requests']} streaming routed requests of {r['victim_tokens']} "
           "tokens one after another: with no attack, while each attack runs, and with no attack again, in one run. "
           f"Attacks: a prompt of {r['long_prompt_tokens']:,} tokens (a new one as each ends); six clients sending "
           "300-branch `anyOf` tools under a forced call; streamed n=8 requests of 1,000 tokens whose client leaves "
           "after 1 s; 128 small tools with calls required. x: the ratio to the first baseline. "
           f"499s counted by the server (clients that left): {f(r['closed_499'])}.", "",
           "| phase | attack requests | TTFT p50 (ms) | TTFT p99 | gap p99 (ms) | TTFT p50 x | TTFT p99 x "
           "| gap p99 x | errors |",
           "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for p in r["phases"]:
        out.append(f"| {p['phase']} | {p['attack_requests']} | {f(p['ttft_p50_ms'])} | {f(p['ttft_p99_ms'])} | "
                   f"{f(p['gap_p99_ms'])} | {f(p['ttft_p50_x'])} | {f(p['ttft_p99_x'])} | {f(p['gap_p99_x'])} | "
                   f"{p['errors']} |")
    out += ["", "`macaronic.bench.abuse`.", ""]
    return out
