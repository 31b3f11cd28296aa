"""The HTTP boundary in front of the app: a pure-ASGI guard and the OpenAI error shape.

The guard checks the API key (constant-time compare; the key is never logged), caps the body size
and the time to receive it, measures a large body's tools and schemas against the budgets off the
event loop (`budgets.py`: a 4 MB tool list is refused before FastAPI parses it on the loop), counts
requests and latency (a stream its client left before the end counts as 499, client closed), and
is the one exception boundary: every request gets an `x-request-id`, and an exception that
escapes the app is logged with its traceback and answered as a 500 in the OpenAI shape
`{"error": {message, type, param, code}}` naming the request id. Server-side details (file paths)
stay in the log (`public_message`). Every response carries SECURITY_HEADERS: the web page loads
and talks to nothing but its own server. Knows nothing of routes, turns or the harness.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import re
import secrets
import time
from dataclasses import dataclass

from fastapi.responses import JSONResponse

from macaronic.serve import api, pools
from macaronic.serve.budgets import BudgetError, Budgets, check_request
from macaronic.serve.metrics import Metrics

log = logging.getLogger("macaronic.serve")
ENDPOINTS = ("/health", "/v1/models", "/v1/chat/completions", "/v1/responses", "/v1/feedback", "/metrics", "/")
PROTECTED = ("/v1/", "/metrics", "/openapi.json")
# The page is locked to its server: scripts, styles, images and requests only from it (images also
# as data: URLs), no inline script or style sheet, never framed, no Referer sent out, no MIME
# sniffing. Style *attributes* are allowed: the official A2UI renderer (Lit's styleMap) writes a
# component's styles as one on first render; an attribute runs no script and loads only what
# img-src allows.
CSP = ("default-src 'self'; script-src 'self'; style-src 'self'; style-src-attr 'unsafe-inline'; "
       "img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'")
SECURITY_HEADERS = [(b"content-security-policy", CSP.encode()), (b"x-content-type-options", b"nosniff"),
                    (b"x-frame-options", b"DENY"), (b"referrer-policy", b"no-referrer")]
HTTP_CODES = {404: "not_found", 405: "method_not_allowed", 408: "request_timeout", 413: "request_too_large"}
# absolute paths in engine messages (an adapter's directory): logged, never sent to a client
SERVER_PATH = re.compile(r"(?<![\w.:/])/[^\s'\"():,;]+")


@dataclass(frozen=True)
class ServeConfig:
    api_key: str | None = None
    max_body_bytes: int = 4 << 20
    engine_only: bool = False  # act as a plain multi-LoRA engine (no routing, no harness)
    api_docs: bool = False  # serve /openapi.json (behind the key); never /docs or /redoc (CDN scripts)
    body_timeout_s: float = 30.0  # the whole request body must arrive within this
    body_idle_s: float = 10.0  # and no gap between its parts may be longer
    budgets: Budgets | None = None  # tools and schemas of a large body, checked before it is parsed on the loop
    large_body_bytes: int = 64 * 1024  # from this size on
    substrate: str = ":memory:"  # SQLite file of the built-in tools' state (actions.py)


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


def over_budget(data: bytes, budgets: Budgets) -> dict | None:
    """The OpenAI error body when a request's tools or schemas are over a budget, else None (also
    for a body that is not JSON: the app answers that)."""
    try:
        body = json.loads(data)
    except (ValueError, RecursionError):
        return None
    if not isinstance(body, dict):
        return None
    text = body.get("text") if isinstance(body.get("text"), dict) else {}
    try:
        check_request(body.get("tools"), body.get("response_format") or text.get("format"), budgets)
    except BudgetError as e:
        return api.error_body(str(e), code=e.code, param=e.param)
    return None


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
        started, completed = [False], [False]

        async def send_(message):
            if message["type"] == "http.response.start":
                status[0], started[0] = message["status"], True
                message = {**message, "headers": [*message.get("headers", []), *SECURITY_HEADERS,
                                                  (b"x-request-id", rid.encode())]}
            elif message["type"] == "http.response.body" and not message.get("more_body", False):
                completed[0] = True
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
            if self.config.budgets is not None and len(data) >= self.config.large_body_bytes \
                    and path in ("/v1/chat/completions", "/v1/responses"):
                refusal = await pools.run(pools.CHECKS, over_budget, data, self.config.budgets)
                if refusal is not None:
                    return await self._reply(send_, 400, refusal)
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
            if started[0] and not completed[0]:  # a stream whose client left before its end: client closed
                status[0] = 499
            self.metrics.requests.inc(endpoint, str(status[0]))
            self.metrics.latency.observe(time.perf_counter() - t0, endpoint)

    @staticmethod
    async def _reply(send, status: int, body: dict, close: bool = False):
        data = json.dumps(body).encode()
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())]
        await send({"type": "http.response.start", "status": status,
                    "headers": headers + ([(b"connection", b"close")] if close else [])})
        await send({"type": "http.response.body", "body": data})
