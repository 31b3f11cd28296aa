"""A remote OpenAI-compatible multi-LoRA engine as a harness backend (`--engine openai://HOST:PORT`).

Adapters are model ids, as vLLM serves them (`--enable-lora --lora-modules chat=DIR ...`; its
/v1/models lists them with `parent` = the base) and as SGLang does (`--lora-paths`). A
`macaronic serve --engine-only` instance is such an engine too, and its /v1/models entries also
carry `macaronic: {mode, role, id}`. From vLLM or SGLang an adapter counts as `full` mode (KV per
adapter; vLLM refuses Activated LoRA, so `macaronic export vllm` writes plain LoRA) with its role
from its name when the name is a bundle role. When vLLM's model card names a `root` directory this
machine can read (front and engine on one machine, or a shared export), its macaronic.json gives
the role and mode (the export writes the served mode there) and its content hash the adapter id.

Token accounting: the engine's `macaronic` usage when it sends one, else vLLM's
`usage.prompt_tokens_details.cached_tokens` as reused tokens. Closing `stream()` early closes
the HTTP response, and the engine cancels on disconnect. Knows nothing about routing or views.
"""

from __future__ import annotations

import hashlib
import json
import os
from urllib.parse import urlparse

import httpx

from macaronic.engine.sampling import SamplingParams
from macaronic.serve.backends import AdapterMeta, BackendError, Generation


def parse_engine_url(url: str) -> str:
    """openai://HOST:PORT[/prefix] (or http(s)://...) -> the HTTP base URL without /v1."""
    u = urlparse(url)
    if u.scheme not in ("openai", "http", "https") or not u.hostname or not u.port:
        raise ValueError(f"engine URL must look like openai://HOST:PORT, got {url!r}")
    scheme = "https" if u.scheme == "https" else "http"
    return f"{scheme}://{u.hostname}:{u.port}{u.path.rstrip('/').removesuffix('/v1')}"


def local_meta(root: str) -> dict:
    """{mode, role, id} of an adapter directory named by the engine, when it is readable here."""
    from pathlib import Path

    from macaronic.engine.adapters import dir_sha256

    path = Path(root)
    try:
        if not (path / "adapter_config.json").is_file():
            return {}
        meta = json.loads((path / "macaronic.json").read_text()) if (path / "macaronic.json").is_file() else {}
        cfg = json.loads((path / "adapter_config.json").read_text())
        mode = meta.get("mode") or ("turn" if cfg.get("alora_invocation_tokens") else "full")
        return {"mode": mode if mode in ("full", "turn") else "full", "role": meta.get("role"), "id": dir_sha256(path),
                "activation": meta.get("activation", "user")}  # trained at the assistant header: no role instruction
    except (OSError, ValueError):
        return {}


class RemoteBackend:
    def __init__(self, url: str, api_key: str | None = None, timeout: float = 600.0, roles: tuple[str, ...] = ()):
        self.url = parse_engine_url(url)
        self.label = f"openai://{urlparse(self.url).netloc}"
        self.api_key = api_key if api_key is not None else os.environ.get("MACARONIC_ENGINE_API_KEY")
        self.timeout = timeout
        self.roles = roles
        self._models: list[dict] = []
        self.refresh()

    def _headers(self) -> dict:
        return {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}

    def refresh(self) -> None:
        try:
            r = httpx.get(f"{self.url}/v1/models", headers=self._headers(), timeout=30)
            r.raise_for_status()
        except httpx.HTTPError as e:
            raise RuntimeError(f"cannot list the models of the engine at {self.url}: {e}") from None
        self._models = r.json().get("data", [])
        if not self._models:
            raise RuntimeError(f"the engine at {self.url} serves no models")
        self._local = {m["id"]: local_meta(m["root"]) for m in self._models
                       if m.get("parent") and not m.get("macaronic") and isinstance(m.get("root"), str)}

    def _base_entry(self) -> dict:
        for m in self._models:
            if (m.get("macaronic") or {}).get("kind") == "base":
                return m
        for m in self._models:
            if not m.get("parent") and not m.get("macaronic"):
                return m
        return self._models[0]

    def base(self) -> dict:
        b = self._base_entry()
        fp = (b.get("macaronic") or {}).get("fingerprint") or hashlib.sha256(b["id"].encode()).hexdigest()
        return {"id": b["id"], "fingerprint": fp}

    def adapters(self) -> dict[str, AdapterMeta]:
        base_id = self._base_entry()["id"]
        out = {}
        for m in self._models:
            if m["id"] == base_id:
                continue
            meta = m.get("macaronic") or {}
            if meta and meta.get("kind") != "adapter":
                continue  # a macaronic server's routed public name is no adapter
            meta = meta or self._local.get(m["id"]) or {}
            role = meta.get("role") or (m["id"] if m["id"] in self.roles else None)
            out[m["id"]] = AdapterMeta(m["id"], meta.get("mode", "full"), role, meta.get("id"),
                                     meta.get("activation", "user"))
        return out

    async def stream(self, messages: list[dict], adapter: str | None, sampling: SamplingParams, *,
                     structure=None, logprobs: int | None = None):
        body = {"model": adapter or self._base_entry()["id"], "messages": messages, "stream": True,
                "stream_options": {"include_usage": True}, "max_tokens": sampling.max_tokens,
                "temperature": sampling.temperature, "top_p": sampling.top_p}
        if sampling.seed is not None:
            body["seed"] = sampling.seed
        if sampling.stop:
            body["stop"] = list(sampling.stop)
        if sampling.top_k:
            body["top_k"] = sampling.top_k
        if sampling.repetition_penalty != 1.0:
            body["repetition_penalty"] = sampling.repetition_penalty
        if sampling.ignore_eos:  # vLLM's own field
            body["ignore_eos"] = True
        if structure is not None:  # vLLM's structured-output field; xgrammar on its side too
            key = {"json_schema": "json", "structural_tag": "structural_tag", "ebnf": "grammar"}[structure.kind]
            body["structured_outputs"] = {key: json.loads(structure.source) if key == "json" else structure.source}
        if logprobs is not None:
            body["logprobs"], body["top_logprobs"] = True, logprobs
        parts: list[str] = []
        finish, usage, mac = None, {}, {}
        async with httpx.AsyncClient(timeout=self.timeout) as client:
            async with client.stream("POST", f"{self.url}/v1/chat/completions", json=body,
                                     headers=self._headers()) as r:
                if r.status_code != 200:
                    raw = await r.aread()
                    try:
                        msg = json.loads(raw)["error"]["message"]
                    except (ValueError, KeyError, TypeError):
                        msg = raw.decode(errors="replace")[:500]
                    raise BackendError(f"engine: {msg}", r.status_code if r.status_code < 500 else 502)
                async for line in r.aiter_lines():
                    if not line.startswith("data:"):
                        continue
                    data = line[5:].strip()
                    if data == "[DONE]":
                        break
                    chunk = json.loads(data)
                    mac = chunk.get("macaronic") or mac
                    usage = chunk.get("usage") or usage
                    for choice in chunk.get("choices") or []:
                        delta = (choice.get("delta") or {}).get("content")
                        if delta:
                            parts.append(delta)
                            yield delta
                        finish = choice.get("finish_reason") or finish
        prompt = int(usage.get("prompt_tokens") or 0)
        cached = int(((usage.get("prompt_tokens_details") or {}).get("cached_tokens")) or 0)
        reused = int(mac.get("reused_tokens", cached) or 0)
        yield Generation("".join(parts), finish or "stop", {
            "prompt_tokens": prompt, "completion_tokens": int(usage.get("completion_tokens") or 0),
            "prefill_tokens": int(mac.get("prefill_tokens", prompt - reused) or 0), "reused_tokens": reused,
            "ttft_ms": None, "total_ms": None})

    def close(self) -> None:
        pass
