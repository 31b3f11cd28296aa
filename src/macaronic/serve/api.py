"""The OpenAI wire format: request schemas (they make /openapi.json) and response builders for
Chat Completions (JSON and SSE chunks) and the Responses API (objects, items, stream events).

Every builder takes a harness `TurnResult` and adds the `macaronic` metadata. Knows nothing
about the app, the engine or routing.
"""

from __future__ import annotations

import json
import secrets
import time
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from macaronic.genui.convert import Version

SEED_MAX = 2**63 - 1


def error_body(message: str, type_: str = "invalid_request_error", code: str | None = None,
               param: str | None = None) -> dict:
    return {"error": {"message": message, "type": type_, "param": param, "code": code}}


def new_id(prefix: str) -> str:
    return f"{prefix}{secrets.token_hex(12)}"


# ---- request schemas ---------------------------------------------------------------------

class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="allow")
    role: str = Field(description="system | developer | user | assistant | tool")
    content: str | list[dict[str, Any]] | None = None
    tool_calls: list[dict[str, Any]] | None = None
    tool_call_id: str | None = None
    adapter: str | None = Field(None, description="Macaronic: the adapter that produced this assistant message")


class StreamOptions(BaseModel):
    include_usage: bool = False


class ChatRequest(BaseModel):
    model_config = ConfigDict(extra="allow")
    model: str = Field(description="'macaronic' (routed) or an adapter name (forced)")
    messages: list[ChatMessage] = Field(min_length=1)
    max_tokens: int | None = Field(None, ge=1)
    max_completion_tokens: int | None = Field(None, ge=1)
    temperature: float | None = Field(None, ge=0, le=2)
    top_p: float | None = Field(None, gt=0, le=1)
    top_k: int | None = Field(None, ge=0, le=100_000)
    repetition_penalty: float | None = Field(None, gt=0, le=5)
    seed: int | None = Field(None, ge=0, le=SEED_MAX)
    stop: str | list[str] | None = None
    ignore_eos: bool | None = Field(None, description="vLLM's extension: the end-of-turn token ends no text reply, "
                                    "max_tokens or stop does (benchmarks of equal lengths); a reply under a grammar "
                                    "(tools, response_format, a card) still ends where the grammar does")
    n: int | None = Field(None, ge=1, le=8, description="answers to sample; they share the prompt's prefill")
    stream: bool = False
    stream_options: StreamOptions | None = None
    tools: list[dict[str, Any]] | None = None
    tool_choice: str | dict[str, Any] | None = None
    parallel_tool_calls: bool | None = Field(None, description="false: at most one tool call (its grammar ends there)")
    response_format: dict[str, Any] | None = Field(
        None, description="{'type': 'text' | 'json_object' | 'json_schema', 'json_schema': {...}}: decoded under its grammar")
    logprobs: bool | None = None
    top_logprobs: int | None = Field(None, ge=0, le=20)
    user: str | None = None
    a2ui_version: Version | None = Field(
        None, description="the A2UI version the client renders ('0.8', the default, or '0.9'): a card is served in it")
    def logprobs_k(self) -> int | None:
        """None when no logprobs were asked; else how many top alternatives per token."""
        if not self.logprobs:
            if self.top_logprobs:
                raise ValueError("top_logprobs needs logprobs: true")
            return None
        return self.top_logprobs or 0

    def sampling(self) -> dict:
        return {"max_tokens": self.max_completion_tokens or self.max_tokens, "temperature": self.temperature,
                "top_p": self.top_p, "top_k": self.top_k, "repetition_penalty": self.repetition_penalty,
                "seed": self.seed, "stop": self.stop, "ignore_eos": self.ignore_eos}


class FeedbackRequest(BaseModel):
    """What a user says of one reply (Macaronic's own route, kept for the loop: DESIGN "Served experience")."""
    model_config = ConfigDict(extra="forbid")
    response_id: str = Field(min_length=1, max_length=200, description="the reply's id (a chatcmpl- or resp_ id)")
    rating: Literal["up", "down"] | None = None
    expected_specialist: str | None = Field(None, max_length=100,
                                            description="the specialist that should have answered")
    comment: str | None = Field(None, max_length=4000)


class ToolExecuteRequest(BaseModel):
    """One call of a built-in tool (GET /v1/tools lists them), run on the server's substrate."""
    model_config = ConfigDict(extra="forbid")
    name: str = Field(min_length=1, max_length=200)
    arguments: dict[str, Any] | str | None = Field(None, description="an object, or JSON text as in OpenAI tool calls")
    call_id: str | None = Field(None, max_length=200, description="echoed back, to pair the result with its call")


class ResponsesRequest(BaseModel):
    model_config = ConfigDict(extra="allow")
    model: str
    input: str | list[dict[str, Any]]
    instructions: str | None = None
    previous_response_id: str | None = None
    max_output_tokens: int | None = Field(None, ge=1)
    temperature: float | None = Field(None, ge=0, le=2)
    top_p: float | None = Field(None, gt=0, le=1)
    seed: int | None = Field(None, ge=0, le=SEED_MAX)
    stream: bool = False
    store: bool = True
    tools: list[dict[str, Any]] | None = None
    tool_choice: str | dict[str, Any] | None = None
    parallel_tool_calls: bool | None = None
    text: dict[str, Any] | None = Field(None, description="{'format': {'type': 'text' | 'json_object' | 'json_schema', ...}}")
    a2ui_version: Version | None = Field(
        None, description="the A2UI version the client renders ('0.8', the default, or '0.9'): a card is served in it")

    def text_format(self) -> dict | None:
        fmt = (self.text or {}).get("format") if isinstance(self.text, dict) else None
        return fmt if isinstance(fmt, dict) else None

    def sampling(self) -> dict:
        return {"max_tokens": self.max_output_tokens, "temperature": self.temperature, "top_p": self.top_p,
                "seed": self.seed}


# ---- Chat Completions --------------------------------------------------------------------

def chat_usage(usage: dict) -> dict:
    p, c = int(usage.get("prompt_tokens") or 0), int(usage.get("completion_tokens") or 0)
    return {"prompt_tokens": p, "completion_tokens": c, "total_tokens": p + c,
            "prompt_tokens_details": {"cached_tokens": int(usage.get("reused_tokens") or 0)}}


def logprobs_of(result) -> dict | None:
    return None if result.logprobs is None else {"content": result.logprobs, "refusal": None}


def choice(result, index: int = 0) -> dict:
    message = {"role": "assistant", "content": result.content}
    if result.tool_calls:
        message["tool_calls"] = result.tool_calls
    return {"index": index, "message": message, "finish_reason": result.finish_reason, "logprobs": logprobs_of(result)}


def chat_completion(results, model: str, cid: str, created: int) -> dict:
    """One completion for one TurnResult or a list of them (`n`: usage counts the prompt once)."""
    results = results if isinstance(results, list) else [results]
    usage = chat_usage(results[0].usage)
    usage["completion_tokens"] = sum(int(r.usage.get("completion_tokens") or 0) for r in results)
    usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
    out = {"id": cid, "object": "chat.completion", "created": created, "model": model,
           "choices": [choice(r, i) for i, r in enumerate(results)], "usage": usage,
           "macaronic": results[0].macaronic()}
    if len(results) > 1:
        out["macaronic"]["choices"] = [r.macaronic() for r in results]
    return out


def chunk(cid: str, created: int, model: str, delta: dict, finish: str | None = None, logprobs: dict | None = None,
          index: int = 0, **extra) -> str:
    body = {"id": cid, "object": "chat.completion.chunk", "created": created, "model": model,
            "choices": [{"index": index, "delta": delta, "finish_reason": finish, "logprobs": logprobs}], **extra}
    return f"data: {json.dumps(body, ensure_ascii=False)}\n\n"


def call_delta(d) -> dict:
    """A harness CallDelta as one entry of a chunk's `delta.tool_calls`."""
    if d.id is not None:
        return {"index": d.index, "id": d.id, "type": "function", "function": {"name": d.name, "arguments": d.arguments}}
    return {"index": d.index, "function": {"arguments": d.arguments}}


def final_chunks(result, cid: str, created: int, model: str, include_usage: bool, streamed_calls: bool = False) -> str:
    delta = {}
    if result.tool_calls and not streamed_calls:
        delta["tool_calls"] = [{"index": i, **c} for i, c in enumerate(result.tool_calls)]
    # the tokens' logprobs come with the last chunk (text deltas and tokens need not align one to one)
    out = chunk(cid, created, model, delta, result.finish_reason, logprobs_of(result), macaronic=result.macaronic())
    if include_usage:
        body = {"id": cid, "object": "chat.completion.chunk", "created": created, "model": model, "choices": [],
                "usage": chat_usage(result.usage), "macaronic": result.macaronic()}
        out += f"data: {json.dumps(body, ensure_ascii=False)}\n\n"
    return out


def sample_chunks(results: list, cid: str, created: int, model: str, include_usage: bool) -> str:
    """`n` > 1 with `stream`: each choice as its own chunks (role, content, calls, finish), by index,
    then one usage chunk. The samples decode together; their chunks are sent once all are done."""
    out = ""
    for i, r in enumerate(results):
        delta = {"role": "assistant", "content": r.content or ""}
        if r.tool_calls:
            delta["tool_calls"] = [{"index": j, **c} for j, c in enumerate(r.tool_calls)]
        out += chunk(cid, created, model, delta, None, logprobs_of(r), index=i)
        out += chunk(cid, created, model, {}, r.finish_reason, index=i, macaronic=r.macaronic())
    if include_usage:
        usage = chat_completion(results, model, cid, created)["usage"]
        body = {"id": cid, "object": "chat.completion.chunk", "created": created, "model": model, "choices": [],
                "usage": usage}
        out += f"data: {json.dumps(body, ensure_ascii=False)}\n\n"
    return out + "data: [DONE]\n\n"


def sse_error(message: str, code: str | None = None) -> str:
    return f"data: {json.dumps(error_body(message, 'server_error', code))}\n\n"


# ---- Responses API -----------------------------------------------------------------------

def responses_tools(tools: list[dict] | None) -> list[dict] | None:
    """Responses tools ({type, name, parameters}) -> Chat Completions tools ({type, function})."""
    if not tools:
        return None
    out = []
    for i, t in enumerate(tools):
        if not isinstance(t, dict) or t.get("type") != "function":
            raise ValueError(f"tools[{i}]: only function tools are supported")
        fn = t.get("function") if isinstance(t.get("function"), dict) else t
        if not isinstance(fn.get("name"), str):
            raise ValueError(f"tools[{i}] needs a name")
        out.append({"type": "function", "function": {k: fn[k] for k in ("name", "description", "parameters")
                                                      if k in fn}})
    return out


def input_messages(inp: str | list[dict]) -> list[dict]:
    """Responses `input` -> chat messages (message items, function_call, function_call_output)."""
    if isinstance(inp, str):
        return [{"role": "user", "content": inp}]
    out: list[dict] = []
    for i, item in enumerate(inp):
        kind = item.get("type", "message")
        if kind == "message":
            out.append({"role": item.get("role"), "content": item.get("content")})
        elif kind == "function_call":
            call = {"id": item.get("call_id") or item.get("id") or "", "type": "function",
                    "function": {"name": item.get("name"), "arguments": item.get("arguments") or "{}"}}
            if out and out[-1]["role"] == "assistant" and out[-1].get("tool_calls") is not None:
                out[-1]["tool_calls"].append(call)
            else:
                out.append({"role": "assistant", "content": None, "tool_calls": [call]})
        elif kind == "function_call_output":
            output = item.get("output")
            out.append({"role": "tool", "tool_call_id": item.get("call_id"),
                        "content": output if isinstance(output, str) else json.dumps(output)})
        else:
            raise ValueError(f"input[{i}]: unsupported item type {kind!r}")
    return out


def function_call_item(call: dict, item_id: str | None = None) -> dict:
    return {"type": "function_call", "id": item_id or new_id("fc_"), "call_id": call["id"], "status": "completed",
            "name": call["function"]["name"], "arguments": call["function"]["arguments"]}


def output_items(result, fc_ids: list[str] | None = None) -> list[dict]:
    items = []
    if result.content:
        items.append({"type": "message", "id": new_id("msg_"), "status": "completed", "role": "assistant",
                      "content": [{"type": "output_text", "text": result.content, "annotations": []}]})
    for i, c in enumerate(result.tool_calls):
        items.append(function_call_item(c, fc_ids[i] if fc_ids else None))
    return items


def response_object(rid: str, req: ResponsesRequest, result=None, status: str = "completed",
                    fc_ids: list[str] | None = None) -> dict:
    u = result.usage if result is not None else {}
    p, c = int(u.get("prompt_tokens") or 0), int(u.get("completion_tokens") or 0)
    incomplete = result is not None and result.finish_reason == "length"
    return {
        "id": rid, "object": "response", "created_at": int(time.time()),
        "status": "incomplete" if incomplete and status == "completed" else status,
        "incomplete_details": {"reason": "max_output_tokens"} if incomplete else None,
        "error": None, "model": req.model, "instructions": req.instructions,
        "previous_response_id": req.previous_response_id,
        "output": output_items(result, fc_ids) if result is not None else [],
        "parallel_tool_calls": req.parallel_tool_calls is not False, "tool_choice": req.tool_choice or "auto",
        "tools": req.tools or [],
        "temperature": req.temperature, "top_p": req.top_p, "max_output_tokens": req.max_output_tokens,
        "store": req.store, "text": {"format": req.text_format() or {"type": "text"}}, "metadata": {},
        "usage": {"input_tokens": p, "output_tokens": c, "total_tokens": p + c,
                  "input_tokens_details": {"cached_tokens": int(u.get("reused_tokens") or 0)},
                  "output_tokens_details": {"reasoning_tokens": 0}} if result is not None else None,
        **({"macaronic": result.macaronic()} if result is not None else {}),
    }


def event(kind: str, seq: int, **body) -> str:
    return f"event: {kind}\ndata: {json.dumps({'type': kind, 'sequence_number': seq, **body}, ensure_ascii=False)}\n\n"


MessageStatus = Literal["in_progress", "completed"]


def message_item(item_id: str, text: str, status: MessageStatus) -> dict:
    return {"type": "message", "id": item_id, "status": status, "role": "assistant",
            "content": [{"type": "output_text", "text": text, "annotations": []}] if status == "completed" else []}
