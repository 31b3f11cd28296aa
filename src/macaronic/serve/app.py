"""The OpenAI-compatible HTTP server and `macaronic serve`.

Endpoints: GET /health, GET /v1/models, POST /v1/chat/completions (JSON or SSE), POST /v1/responses
(stateful via previous_response_id; JSON or SSE), GET|DELETE /v1/responses/{id}, GET /metrics,
GET / (the web chat) and /static/ (the files in STATIC). Every answer carries `macaronic`
metadata (also in the final SSE chunk).

A pure-ASGI guard in front checks the API key (constant-time compare; the key is never logged),
caps the body size, and counts requests and latency. A client that disconnects cancels its
generation. The harness does the work; this module only translates HTTP.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import time
from dataclasses import dataclass
from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, HTMLResponse, JSONResponse, PlainTextResponse, Response, StreamingResponse

from macaronic.serve import api
from macaronic.serve.callstream import CallDelta
from macaronic.serve.harness import MoL, TurnError, TurnResult
from macaronic.serve.metrics import Metrics

log = logging.getLogger("macaronic.serve")
WEB = Path(__file__).resolve().parent.parent / "web"
STATIC = {"chat.js": "text/javascript", "chat.css": "text/css", "a2ui-demo.html": "text/html",
          "a2ui-card.js": "text/javascript", "markdown.js": "text/javascript", "vendor/a2ui-lit.js": "text/javascript",
          "vendor/LICENSES.txt": "text/plain; charset=utf-8"}
ENDPOINTS = ("/health", "/v1/models", "/v1/chat/completions", "/v1/responses", "/metrics", "/")
PROTECTED = ("/v1/", "/metrics")


@dataclass(frozen=True)
class ServeConfig:
    api_key: str | None = None
    max_body_bytes: int = 4 << 20
    engine_only: bool = False  # act as a plain multi-LoRA engine (no routing, no harness)


class Guard:
    """ASGI middleware: API key, body size limit, request metrics."""

    def __init__(self, app, config: ServeConfig, metrics: Metrics):
        self.app, self.config, self.metrics = app, config, metrics

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        path, t0, status = scope["path"], time.perf_counter(), [500]
        endpoint = path if path in ENDPOINTS else "/v1/responses/{id}" if path.startswith("/v1/responses/") \
            else "/static" if path.startswith("/static/") else "other"

        async def send_(message):
            if message["type"] == "http.response.start":
                status[0] = message["status"]
            await send(message)

        try:
            headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
            if self.config.api_key and path.startswith(PROTECTED):
                auth = headers.get("authorization", "")
                token = auth[7:].strip() if auth[:7].lower() == "bearer " else headers.get("x-api-key", "")
                if not hmac.compare_digest(token.encode(), self.config.api_key.encode()):
                    return await self._reply(send_, 401, api.error_body(
                        "missing or wrong API key (send 'Authorization: Bearer KEY')", code="invalid_api_key"))
            limit = self.config.max_body_bytes
            try:
                declared = int(headers.get("content-length", "0"))
            except ValueError:
                return await self._reply(send_, 400, api.error_body("invalid Content-Length header"))
            if declared > limit:
                return await self._reply(send_, 413, api.error_body(f"request body over {limit} bytes"))
            chunks, total = [], 0
            while True:
                message = await receive()
                if message["type"] != "http.request":
                    return
                chunks.append(message.get("body", b""))
                total += len(chunks[-1])
                if total > limit:
                    return await self._reply(send_, 413, api.error_body(f"request body over {limit} bytes"))
                if not message.get("more_body"):
                    break
            replay = [{"type": "http.request", "body": b"".join(chunks), "more_body": False}]

            async def receive_():
                return replay.pop() if replay else await receive()

            await self.app(scope, receive_, send_)
        finally:
            self.metrics.requests.inc(endpoint, str(status[0]))
            self.metrics.latency.observe(time.perf_counter() - t0, endpoint)

    @staticmethod
    async def _reply(send, status: int, body: dict):
        data = json.dumps(body).encode()
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())]})
        await send({"type": "http.response.body", "body": data})


def create_app(mol: MoL, config: ServeConfig = ServeConfig(), metrics: Metrics | None = None):
    from macaronic import __version__

    metrics = metrics or Metrics()
    app = FastAPI(title="Macaronic", version=__version__,
                  description="OpenAI-compatible Mixture-of-LoRA server: one specialist adapter per turn.")
    app.state.mol, app.state.metrics = mol, metrics
    background: set[asyncio.Task] = set()

    def later(result: TurnResult) -> None:
        metrics.record_turn(result.macaronic(), result.usage)
        if not config.engine_only and result.needs_summary:
            t = asyncio.create_task(mol.summarize(result))
            background.add(t)
            t.add_done_callback(background.discard)

    @app.exception_handler(RequestValidationError)
    async def bad_request(request: Request, exc: RequestValidationError):
        errs = exc.errors()
        first = errs[0] if errs else {}
        where = ".".join(str(x) for x in first.get("loc", ()) if x != "body")
        if first.get("type") == "json_invalid":
            return JSONResponse(api.error_body("request body is not valid JSON"), status_code=400)
        msg = f"{where or 'body'}: {first.get('msg', 'invalid')}"
        return JSONResponse(api.error_body(msg, param=where or None), status_code=400)

    @app.exception_handler(TurnError)
    async def turn_error(request: Request, exc: TurnError):
        kind = "invalid_request_error" if exc.status < 500 else "server_error"
        return JSONResponse(api.error_body(str(exc), kind, exc.code, exc.param), status_code=exc.status)

    @app.get("/health")
    async def health():
        b = mol.backend.base()
        return {"status": "ok", "engine": mol.backend.label, "base": b["id"], "pair_id": mol.pair_id,
                "adapters": sorted(mol.backend.adapters()), "engine_only": config.engine_only}

    @app.get("/v1/models")
    async def models():
        now, b = int(time.time()), mol.backend.base()
        data = []
        if not config.engine_only:
            data.append({"id": mol.config.public_name, "object": "model", "created": now, "owned_by": "macaronic",
                         "macaronic": {"kind": "routed", "pair_id": mol.pair_id, "roles": mol.bundle.role_names,
                                       "harness": mol.bundle.id}})
        data.append({"id": b["id"], "object": "model", "created": now, "owned_by": "macaronic",
                     "macaronic": {"kind": "base", "fingerprint": b["fingerprint"]}})
        for name, meta in mol.backend.adapters().items():
            data.append({"id": name, "object": "model", "created": now, "owned_by": "macaronic", "parent": b["id"],
                         "macaronic": {"kind": "adapter", "mode": meta.mode, "role": meta.role, "id": meta.id}})
        return {"object": "list", "data": data}

    async def prime(gen):
        """The first item, so request errors become HTTP statuses before any streaming starts."""
        try:
            return await gen.__anext__()
        except BaseException:
            await gen.aclose()
            raise

    async def collect(request: Request, gen) -> TurnResult | None:
        """Drain a turn; None if the client went away (its generation is then cancelled)."""
        async def drain():
            async for item in gen:
                if isinstance(item, TurnResult):
                    return item
            raise TurnError("the turn ended without a result", 502)

        task = asyncio.ensure_future(drain())
        metrics.flight(+1)
        try:
            while True:
                done, _ = await asyncio.wait({task}, timeout=0.25)
                if done:
                    return task.result()
                if await request.is_disconnected():
                    task.cancel()
                    return None
        finally:
            metrics.flight(-1)
            if not task.done():
                task.cancel()
            await gen.aclose()

    @app.post("/v1/chat/completions")
    async def chat_completions(req: api.ChatRequest, request: Request):
        messages = [m.model_dump(exclude_none=True) for m in req.messages]
        try:
            k = req.logprobs_k()
        except ValueError as e:
            raise TurnError(str(e), param="top_logprobs") from None
        cid, created = api.new_id("chatcmpl-"), int(time.time())
        if (req.n or 1) > 1:
            if req.stream:
                raise TurnError("n > 1 with stream is not supported; ask without stream", 400, "unsupported", "n")
            results = await mol.asample(messages, req.n, req.tools, req.model, req.sampling(), req.tool_choice,
                                        response_format=req.response_format, logprobs=k)
            later(results[0])
            return JSONResponse(api.chat_completion(results, req.model, cid, created))
        gen = mol.astream(messages, req.tools, req.model, req.sampling(), req.tool_choice, raw=config.engine_only,
                          response_format=req.response_format, logprobs=k)
        if not req.stream:
            result = await collect(request, gen)
            if result is None:
                return Response(status_code=499)
            later(result)
            return JSONResponse(api.chat_completion(result, req.model, cid, created))
        first = await prime(gen)
        include_usage = bool(req.stream_options and req.stream_options.include_usage)

        async def sse():
            metrics.flight(+1)
            try:
                yield api.chunk(cid, created, req.model, {"role": "assistant", "content": ""})
                item, streamed_calls = first, False
                while True:
                    if isinstance(item, TurnResult):
                        yield api.final_chunks(item, cid, created, req.model, include_usage, streamed_calls)
                        later(item)
                        break
                    if isinstance(item, CallDelta):
                        streamed_calls = True
                        yield api.chunk(cid, created, req.model, {"tool_calls": [api.call_delta(item)]})
                    else:
                        yield api.chunk(cid, created, req.model, {"content": item})
                    item = await gen.__anext__()
                yield "data: [DONE]\n\n"
            except TurnError as e:
                yield api.sse_error(str(e), e.code)
                yield "data: [DONE]\n\n"
            finally:
                metrics.flight(-1)
                await gen.aclose()

        return StreamingResponse(sse(), media_type="text/event-stream", headers={"Cache-Control": "no-cache"})

    @app.post("/v1/responses")
    async def responses(req: api.ResponsesRequest, request: Request):
        prior: list[dict] = []
        if req.previous_response_id:
            loaded = mol.store.load_response(req.previous_response_id)
            if loaded is None:
                raise TurnError(f"no stored response {req.previous_response_id!r}", 404, "response_not_found",
                                "previous_response_id")
            prior = loaded[1]
        try:
            new, tools = api.input_messages(req.input), api.responses_tools(req.tools)
        except (ValueError, AttributeError, TypeError) as e:
            raise TurnError(f"input: {e}", param="input") from None
        lead = [{"role": "system", "content": req.instructions}] if req.instructions else []
        gen = mol.astream(lead + prior + new, tools, req.model, req.sampling(), req.tool_choice,
                          response_format=req.text_format())
        rid = api.new_id("resp_")

        def finish(result: TurnResult) -> dict:
            obj = api.response_object(rid, req, result)
            if req.store:
                mol.store.save_response(obj, result.messages[len(lead):], req.previous_response_id)
            later(result)
            return obj

        if not req.stream:
            result = await collect(request, gen)
            if result is None:
                return Response(status_code=499)
            return JSONResponse(finish(result))
        first = await prime(gen)

        async def sse():
            metrics.flight(+1)
            seq, item_id, text = 0, api.new_id("msg_"), []
            try:
                yield api.event("response.created", seq, response=api.response_object(rid, req, status="in_progress"))
                yield api.event("response.output_item.added", seq := seq + 1, output_index=0,
                                item=api.message_item(item_id, "", "in_progress"))
                yield api.event("response.content_part.added", seq := seq + 1, item_id=item_id, output_index=0,
                                content_index=0, part={"type": "output_text", "text": "", "annotations": []})
                item = first
                while not isinstance(item, TurnResult):
                    if isinstance(item, CallDelta):  # function calls arrive whole in the output items
                        item = await gen.__anext__()
                        continue
                    text.append(item)
                    yield api.event("response.output_text.delta", seq := seq + 1, item_id=item_id, output_index=0,
                                    content_index=0, delta=item, logprobs=[])
                    item = await gen.__anext__()
                full = "".join(text)
                yield api.event("response.output_text.done", seq := seq + 1, item_id=item_id, output_index=0,
                                content_index=0, text=full, logprobs=[])
                yield api.event("response.content_part.done", seq := seq + 1, item_id=item_id, output_index=0,
                                content_index=0, part={"type": "output_text", "text": full, "annotations": []})
                yield api.event("response.output_item.done", seq := seq + 1, output_index=0,
                                item=api.message_item(item_id, full, "completed"))
                yield api.event("response.completed", seq := seq + 1, response=finish(item))
            except TurnError as e:
                yield api.event("error", seq + 1, message=str(e), code=e.code, param=e.param)
            finally:
                metrics.flight(-1)
                await gen.aclose()

        return StreamingResponse(sse(), media_type="text/event-stream", headers={"Cache-Control": "no-cache"})

    @app.get("/v1/responses/{rid}")
    async def get_response(rid: str):
        loaded = mol.store.load_response(rid)
        if loaded is None:
            raise TurnError(f"no stored response {rid!r}", 404, "response_not_found")
        return loaded[0]

    @app.delete("/v1/responses/{rid}")
    async def delete_response(rid: str):
        if not mol.store.delete_response(rid):
            raise TurnError(f"no stored response {rid!r}", 404, "response_not_found")
        return {"id": rid, "object": "response", "deleted": True}

    @app.get("/metrics", response_class=PlainTextResponse)
    async def prometheus():
        return PlainTextResponse(metrics.render(), media_type="text/plain; version=0.0.4; charset=utf-8")

    @app.get("/", response_class=HTMLResponse, include_in_schema=False)
    async def chat_page():
        return FileResponse(WEB / "chat.html", media_type="text/html")

    @app.get("/static/{name:path}", include_in_schema=False)
    async def static(name: str):
        if name not in STATIC or not (WEB / name).is_file():
            raise TurnError(f"no static file {name!r}", 404, "not_found")
        return FileResponse(WEB / name, media_type=STATIC[name])

    return Guard(app, config, metrics)


def main(argv: list[str]) -> int:
    from macaronic.serve.build import main as build_main

    return build_main(argv)
