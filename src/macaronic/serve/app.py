"""The OpenAI-compatible HTTP server and `macaronic serve`.

Endpoints: GET /health, GET /v1/models, POST /v1/chat/completions (JSON or SSE), POST /v1/responses
(stateful via previous_response_id; JSON or SSE), GET|DELETE /v1/responses/{id}, GET /metrics,
GET / (the web chat) and /static/ (the files in STATIC). Every answer carries `macaronic`
metadata (also in the final SSE chunk).

A pure-ASGI guard in front checks the API key (constant-time compare; the key is never logged),
caps the body size and the time to receive it, counts requests and latency, and is the one
exception boundary: every request gets an `x-request-id`, every error (404, 405, 413, unparsable
bodies, validation) the OpenAI shape `{"error": {message, type, param, code}}`, and an unexpected
exception a 500 in that shape naming the request id, logged with its traceback. Server-side
details (file paths) stay in the log. `validate.py` checks every field before the harness runs.
A client that disconnects cancels its generation (status 499, not 500). The harness does the
work; this module only translates HTTP.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import logging
import re
import secrets
import time
from dataclasses import dataclass
from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, HTMLResponse, JSONResponse, PlainTextResponse, Response, StreamingResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from macaronic.serve import api, validate
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
HTTP_CODES = {404: "not_found", 405: "method_not_allowed", 408: "request_timeout", 413: "request_too_large"}
# absolute paths in engine messages (an adapter's directory): logged, never sent to a client
SERVER_PATH = re.compile(r"(?<![\w.:/])/[^\s'\"():,;]+")


@dataclass(frozen=True)
class ServeConfig:
    api_key: str | None = None
    max_body_bytes: int = 4 << 20
    engine_only: bool = False  # act as a plain multi-LoRA engine (no routing, no harness)
    body_timeout_s: float = 30.0  # the whole request body must arrive within this
    body_idle_s: float = 10.0  # and no gap between its parts may be longer


def public_message(message: str) -> str:
    """A server-side error message without server file paths (those go to the log only)."""
    return SERVER_PATH.sub("<server path>", message)


class ErrorResponse(JSONResponse):
    """The OpenAI error shape; ASCII-escaped, so no text in a message can fail to encode."""

    def render(self, content) -> bytes:
        return json.dumps(content, ensure_ascii=True).encode()


def error_response(status: int, message: str, type_: str | None = None, code: str | None = None,
                   param: str | None = None, headers: dict | None = None) -> ErrorResponse:
    type_ = type_ or ("invalid_request_error" if status < 500 else "server_error")
    return ErrorResponse(api.error_body(message, type_, code, param), status_code=status, headers=headers)


class Guard:
    """ASGI middleware: request id, API key, body size and time limits, request metrics, and the
    exception boundary (an exception that escapes the app is logged here with its traceback)."""

    def __init__(self, app, config: ServeConfig, metrics: Metrics):
        self.app, self.config, self.metrics = app, config, metrics

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        path, t0, status = scope["path"], time.perf_counter(), [500]
        endpoint = path if path in ENDPOINTS else "/v1/responses/{id}" if path.startswith("/v1/responses/") \
            else "/static" if path.startswith("/static/") else "other"
        rid = "req_" + secrets.token_hex(12)
        scope.setdefault("state", {})["request_id"] = rid
        started = [False]

        async def send_(message):
            if message["type"] == "http.response.start":
                status[0], started[0] = message["status"], True
                message = {**message, "headers": [*message.get("headers", []), (b"x-request-id", rid.encode())]}
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
                return await self._reply(send_, 413, api.error_body(f"request body over {limit} bytes",
                                                                    code="request_too_large"))
            chunks, total = [], 0
            deadline = time.monotonic() + self.config.body_timeout_s
            while True:
                wait = min(self.config.body_idle_s, deadline - time.monotonic())
                try:
                    message = await asyncio.wait_for(receive(), max(wait, 0.001))
                except asyncio.TimeoutError:  # a slow or stalled client must not hold the connection
                    return await self._reply(send_, 408, api.error_body(
                        f"the request body did not arrive in time (idle {self.config.body_idle_s:g} s, "
                        f"total {self.config.body_timeout_s:g} s)", code="request_timeout"), close=True)
                if message["type"] != "http.request":
                    return
                chunks.append(message.get("body", b""))
                total += len(chunks[-1])
                if total > limit:
                    return await self._reply(send_, 413, api.error_body(f"request body over {limit} bytes",
                                                                        code="request_too_large"))
                if not message.get("more_body"):
                    break
            data = b"".join(chunks)
            if data and path.startswith("/v1/"):
                try:
                    data.decode("utf-8")
                except UnicodeDecodeError as e:
                    return await self._reply(send_, 400, api.error_body(
                        f"request body is not valid UTF-8 (byte {e.start})", code="invalid_json"))
            replay = [{"type": "http.request", "body": data, "more_body": False}]

            async def receive_():
                return replay.pop() if replay else await receive()

            try:
                await self.app(scope, receive_, send_)
            except Exception:  # the boundary: log with the traceback; answer 500 if nothing was sent
                if not scope["state"].get("logged"):
                    log.exception("request %s %s %s failed", rid, scope.get("method"), path)
                if not started[0]:
                    await self._reply(send_, 500, api.error_body(
                        f"internal server error (request id {rid})", "server_error", "internal_error"))
        finally:
            self.metrics.requests.inc(endpoint, str(status[0]))
            self.metrics.latency.observe(time.perf_counter() - t0, endpoint)

    @staticmethod
    async def _reply(send, status: int, body: dict, close: bool = False):
        data = json.dumps(body).encode()
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())]
        await send({"type": "http.response.start", "status": status,
                    "headers": headers + ([(b"connection", b"close")] if close else [])})
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
            return error_response(400, "request body is not valid JSON", code="invalid_json")
        msg = f"{where or 'body'}: {first.get('msg', 'invalid')}"
        return error_response(400, msg, param=where or None)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException):
        if exc.status_code == 400:  # FastAPI could not parse the body (bad JSON, or nested too deep)
            message, code = "request body could not be parsed as JSON (invalid, or nested too deeply)", "invalid_json"
        elif exc.status_code == 404:
            message, code = f"no route {request.url.path!r}", "not_found"
        elif exc.status_code == 405:
            message, code = f"method {request.method} is not allowed on {request.url.path!r}", "method_not_allowed"
        else:
            message, code = str(exc.detail), HTTP_CODES.get(exc.status_code)
        return error_response(exc.status_code, message, code=code, headers=getattr(exc, "headers", None))

    @app.exception_handler(TurnError)
    async def turn_error(request: Request, exc: TurnError):
        return error_response(exc.status, turn_message(request, exc), code=exc.code, param=exc.param)

    @app.exception_handler(Exception)
    async def internal_error(request: Request, exc: Exception):  # Starlette re-raises it to the Guard next
        rid = getattr(request.state, "request_id", "-")
        log.error("request %s %s %s failed", rid, request.method, request.url.path, exc_info=exc)
        request.state.logged = True
        return error_response(500, f"internal server error (request id {rid})", code="internal_error")

    def turn_message(request: Request, exc: TurnError) -> str:
        if exc.status < 500:
            return str(exc)
        log.error("request %s: %s", getattr(request.state, "request_id", "-"), exc)  # with server paths
        return public_message(str(exc))

    async def guarded(request: Request, gen, on_error):
        """An SSE body whose unexpected failure is logged and ends the stream with `on_error(message)`."""
        try:
            async for part in gen:
                yield part
        except Exception:
            rid = getattr(request.state, "request_id", "-")
            log.exception("request %s: stream failed", rid)
            yield on_error(f"internal server error (request id {rid})")
        finally:
            with contextlib.suppress(Exception):
                await gen.aclose()

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
                    return None
        finally:
            metrics.flight(-1)
            if not task.done():
                task.cancel()
                # the task must leave the generator before it can be closed (else "aclose(): asynchronous
                # generator is already running", a 500 for a client that merely went away)
                with contextlib.suppress(BaseException):
                    await task
            await gen.aclose()

    @app.post("/v1/chat/completions")
    async def chat_completions(req: api.ChatRequest, request: Request):
        messages = [m.model_dump(exclude_none=True) for m in req.messages]
        validate.chat(req.model_dump(exclude_none=True), messages, req.tools, req.tool_choice,
                      engine_only=config.engine_only)
        try:
            k = req.logprobs_k()
        except ValueError as e:
            raise TurnError(str(e), param="top_logprobs") from None
        cid, created = api.new_id("chatcmpl-"), int(time.time())
        if (req.n or 1) > 1:
            results = await mol.asample(messages, req.n, req.tools, req.model, req.sampling(), req.tool_choice,
                                        response_format=req.response_format, logprobs=k)
            later(results[0])
            if req.stream:
                usage = bool(req.stream_options and req.stream_options.include_usage)
                return StreamingResponse(iter([api.sample_chunks(results, cid, created, req.model, usage)]),
                                         media_type="text/event-stream", headers={"Cache-Control": "no-cache"})
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
                yield api.sse_error(turn_message(request, e), e.code)
                yield "data: [DONE]\n\n"
            finally:
                metrics.flight(-1)
                await gen.aclose()

        return StreamingResponse(guarded(request, sse(), lambda m: api.sse_error(m, "internal_error") + "data: [DONE]\n\n"),
                                 media_type="text/event-stream", headers={"Cache-Control": "no-cache"})

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
        validate.chat(req.model_dump(exclude_none=True), lead + prior + new, tools, req.tool_choice)
        gen = mol.astream(lead + prior + new, tools, req.model, req.sampling(), req.tool_choice,
                          response_format=req.text_format())
        rid = api.new_id("resp_")

        def finish(result: TurnResult, fc_ids: list[str] | None = None) -> dict:
            obj = api.response_object(rid, req, result, fc_ids=fc_ids)
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
                item, fc_ids = first, []
                while not isinstance(item, TurnResult):
                    if isinstance(item, CallDelta):  # a function_call item per call, arguments as they decode
                        if item.id is not None:
                            fc_ids.append(api.new_id("fc_"))
                            yield api.event("response.output_item.added", seq := seq + 1, output_index=1 + item.index,
                                            item={"type": "function_call", "id": fc_ids[-1], "call_id": item.id,
                                                  "name": item.name, "arguments": "", "status": "in_progress"})
                        if item.arguments:
                            yield api.event("response.function_call_arguments.delta", seq := seq + 1,
                                            item_id=fc_ids[item.index], output_index=1 + item.index,
                                            delta=item.arguments)
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
                fc_ids = fc_ids if len(fc_ids) == len(item.tool_calls) else None
                for i, call in enumerate(item.tool_calls if fc_ids else []):
                    yield api.event("response.function_call_arguments.done", seq := seq + 1, item_id=fc_ids[i],
                                    output_index=1 + i, arguments=call["function"]["arguments"])
                    yield api.event("response.output_item.done", seq := seq + 1, output_index=1 + i,
                                    item=api.function_call_item(call, fc_ids[i]))
                yield api.event("response.completed", seq := seq + 1, response=finish(item, fc_ids))
            except TurnError as e:
                yield api.event("error", seq + 1, message=turn_message(request, e), code=e.code, param=e.param)
            finally:
                metrics.flight(-1)
                await gen.aclose()

        return StreamingResponse(guarded(request, sse(), lambda m: api.event("error", 0, message=m, code="internal_error",
                                                                              param=None)),
                                 media_type="text/event-stream", headers={"Cache-Control": "no-cache"})

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
