"""The OpenAI-compatible HTTP routes.

Endpoints: GET /health (with what the start-up warm-up did: `warmup.py`), GET /v1/models, POST /v1/chat/completions (JSON or SSE), POST /v1/responses
(stateful via previous_response_id; JSON or SSE), GET|DELETE /v1/responses/{id}, POST /v1/feedback
(a user's verdict on a reply, kept in the store; with an experience file, there too), GET /v1/tools and POST /v1/tools/execute (the
built-in tools, run on the server's substrate: `actions.py`; not with --engine-only), GET /metrics, GET / (the web chat) and /static/
(the files in STATIC); GET /openapi.json only with `--api-docs`. Every answer carries `macaronic`
metadata (also in the final SSE chunk).

`guard.py` is the boundary in front (API key, body limits, request ids, the one exception
boundary); every error here (404, 405, unparsable bodies, validation) answers the OpenAI shape.
`validate.py` checks every field before the harness runs (off the event loop, within the
budgets of `budgets.py`); `streams.py` turns a turn generator into a JSON answer or SSE. A client that disconnects cancels its generation (status 499, not 500).
With `experience` (`macaronic serve --experience FILE`, off by default) each request's history is read
against the recorded turns and each answered turn is recorded (`experience.py`).
The harness (`mol.py`) does the work; this module only translates HTTP. `macaronic serve` is
`commands/serve.py`.
"""

from __future__ import annotations

import asyncio
import logging
import time
from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, HTMLResponse, JSONResponse, PlainTextResponse, Response, StreamingResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from macaronic.genui.convert import DEFAULT_VERSION
from macaronic.serve import api, pools, streams, validate
from macaronic.serve.actions import ServedSubstrate
from macaronic.serve.budgets import BudgetError, off_loop
from macaronic.serve.experience import Experience
from macaronic.serve.follow import Served
from macaronic.serve.guard import HTTP_CODES, Guard, ServeConfig, error_response, public_message
from macaronic.serve.metrics import Metrics
from macaronic.serve.mol import MoL, TurnError, TurnResult
from macaronic.serve.store import StoreDamaged
from macaronic.serve.warmup import Warmup

log = logging.getLogger("macaronic.serve")
WEB = Path(__file__).resolve().parent.parent / "web"
STATIC = {"chat.js": "text/javascript", "chat.css": "text/css", "a2ui-demo.html": "text/html",
          "a2ui-demo.js": "text/javascript", "a2ui-demo.css": "text/css", "a2ui-card.js": "text/javascript",
          "a2ui-card-v09.js": "text/javascript", "vendor/a2ui-lit-v09.js": "text/javascript",
          "markdown.js": "text/javascript", "vendor/a2ui-lit.js": "text/javascript",
          "vendor/LICENSES.txt": "text/plain; charset=utf-8",
          "vendor/material-icons-outlined.woff2": "font/woff2", "favicon.svg": "image/svg+xml",
          "conversations.js": "text/javascript", "badge.js": "text/javascript", "cardstream.js": "text/javascript",
          "feedback.js": "text/javascript", "settings.js": "text/javascript",
          "toolrun.js": "text/javascript"}

__all__ = ["ServeConfig", "create_app"]


def turn_message(request: Request, exc: TurnError) -> str:
    """A TurnError as the client sees it: server errors lose their server paths (kept in the log)."""
    if exc.status < 500:
        return str(exc)
    log.error("request %s: %s", getattr(request.state, "request_id", "-"), exc)  # with server paths
    return public_message(str(exc))


def install_error_handlers(app: FastAPI) -> None:
    """Every error the app raises answers the OpenAI error shape."""

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

    @app.exception_handler(StoreDamaged)
    async def store_damaged(request: Request, exc: StoreDamaged):  # a stored row failed its checksum
        log.error("request %s: %s", getattr(request.state, "request_id", "-"), exc)
        return error_response(500, public_message(str(exc)), code="store_damaged")

    @app.exception_handler(Exception)
    async def internal_error(request: Request, exc: Exception):  # Starlette re-raises it to the Guard next
        rid = getattr(request.state, "request_id", "-")
        log.error("request %s %s %s failed", rid, request.method, request.url.path, exc_info=exc)
        request.state.logged = True
        return error_response(500, f"internal server error (request id {rid})", code="internal_error")


def offered(tools, tool_choice, response_format, **more) -> dict:
    """What a request offered the turn (recorded beside it in the experience file)."""
    out = {"tools": [t.get("function", {}).get("name") for t in tools or [] if isinstance(t, dict)],
           "tool_choice": tool_choice, "response_format": (response_format or {}).get("type"), **more}
    return {k: v for k, v in out.items() if v not in (None, [])}


def create_app(mol: MoL | Served, config: ServeConfig = ServeConfig(), metrics: Metrics | None = None,
               experience: Experience | None = None, warmup: Warmup | None = None):
    from macaronic import __version__

    metrics = metrics or Metrics()
    # /docs and /redoc load their scripts from a CDN, which the page's CSP forbids: never served;
    # the schema itself only with --api-docs (and behind the API key: guard.PROTECTED)
    app = FastAPI(title="Macaronic", version=__version__, docs_url=None, redoc_url=None,
                  openapi_url="/openapi.json" if config.api_docs else None,
                  description="OpenAI-compatible Mixture-of-LoRA server: one specialist adapter per turn.")
    # every request reads the served pair once, when it starts (follow.py swaps it between turns)
    served = mol if isinstance(mol, Served) else Served(mol)
    app.state.served, app.state.metrics, app.state.experience = served, metrics, experience
    metrics.engine = getattr(served.mol.backend, "engine_stats", None)  # the embedded engine's own counters
    background: set[asyncio.Task] = set()

    def later(result: TurnResult, mol: MoL) -> None:
        metrics.record_turn(result.macaronic(), result.usage)
        if not config.engine_only and result.needs_summary:
            t = asyncio.create_task(mol.summarize(result))
            background.add(t)
            t.add_done_callback(background.discard)

    def record(rid: str, endpoint: str, messages: list[dict], result: TurnResult, model: str, what: dict) -> None:
        if experience is not None:
            experience.record(rid, endpoint, messages, result, model, what)

    install_error_handlers(app)

    async def checked(req, *args, **kw) -> list[dict]:
        """validate.chat off the event loop (a large request takes a while to copy and walk)."""
        b = served.mol.config.budgets

        def check():
            return validate.chat(req.model_dump(exclude_none=True), *args, budgets=b, **kw)

        light = not kw.get("response_format") and not (args[1] if len(args) > 1 else None)  # no schemas to walk
        try:
            return await off_loop(check, budget_s=b.compile_s, what="checking the request",
                                  pool=pools.TURN if light else None)
        except BudgetError as e:
            raise TurnError(str(e), 400, e.code, e.param or "tools") from None

    @app.get("/health")
    async def health():
        mol = served.mol
        b = mol.backend.base()
        return {"status": "ok", "engine": mol.backend.label, "base": b["id"], "pair_id": mol.pair_id,
                "adapters": sorted(mol.backend.adapters()), "engine_only": config.engine_only,
                "warmup": (warmup or Warmup(enabled=False)).report()}

    @app.get("/v1/models")
    async def models():
        mol = served.mol
        now, b = int(time.time()), mol.backend.base()
        data = []
        if not config.engine_only:
            data.append({"id": mol.config.public_name, "object": "model", "created": now, "owned_by": "macaronic",
                         "macaronic": {"kind": "routed", "pair_id": mol.pair_id, "roles": mol.bundle.role_names,
                                       "harness": mol.bundle.id}})
        data.append({"id": b["id"], "object": "model", "created": now, "owned_by": "macaronic",
                     "macaronic": {"kind": "base", "fingerprint": b["fingerprint"]}})
        adapters = mol.backend.adapters()
        for name, meta in adapters.items():
            data.append({"id": name, "object": "model", "created": now, "owned_by": "macaronic", "parent": b["id"],
                         "macaronic": {"kind": "adapter", "mode": meta.mode, "role": meta.role, "id": meta.id,
                                       **({"activation": meta.activation} if meta.activation != "user" else {})}})
        if not config.engine_only:  # a role with no adapter (none shipped: the do-no-harm rule) is answered by the base
            have = set(adapters) | {m.role for m in adapters.values()}
            data += [{"id": r, "object": "model", "created": now, "owned_by": "macaronic", "parent": b["id"],
                      "macaronic": {"kind": "role", "adapter": None, "role": r}}
                     for r in mol.bundle.role_names if r not in have]
        return {"object": "list", "data": data}

    @app.post("/v1/chat/completions")
    async def chat_completions(req: api.ChatRequest, request: Request):
        mol = served.mol
        messages = [m.model_dump(exclude_none=True) for m in req.messages]
        await checked(req, messages, req.tools, req.tool_choice, engine_only=config.engine_only,
                      response_format=req.response_format)
        parallel = req.parallel_tool_calls is not False
        try:
            k = req.logprobs_k()
        except ValueError as e:
            raise TurnError(str(e), param="top_logprobs") from None
        cid, created = api.new_id("chatcmpl-"), int(time.time())
        what = offered(req.tools, req.tool_choice, req.response_format, stream=req.stream or None, n=req.n)
        if experience is not None:
            experience.observe(messages, cid)

        def done(result: TurnResult) -> None:
            later(result, mol)
            record(cid, "chat", messages, result, req.model, what)
        if (req.n or 1) > 1:  # the samples come whole; a client that leaves first cancels them (499)
            results = await streams.until_gone(request, mol.asample(
                messages, req.n, req.tools, req.model, req.sampling(), req.tool_choice,
                response_format=req.response_format, logprobs=k, parallel_tool_calls=parallel,
                a2ui_version=req.a2ui_version or DEFAULT_VERSION), metrics)
            if results is streams.GONE:
                return Response(status_code=499)
            done(results[0])
            if req.stream:
                usage = bool(req.stream_options and req.stream_options.include_usage)
                return StreamingResponse(iter([api.sample_chunks(results, cid, created, req.model, usage)]),
                                         media_type="text/event-stream", headers={"Cache-Control": "no-cache"})
            return JSONResponse(api.chat_completion(results, req.model, cid, created))
        gen = mol.astream(messages, req.tools, req.model, req.sampling(), req.tool_choice, raw=config.engine_only,
                          response_format=req.response_format, logprobs=k, parallel_tool_calls=parallel,
                          a2ui_version=req.a2ui_version or DEFAULT_VERSION)
        if not req.stream:
            result = await streams.collect(request, gen, metrics)
            if result is None:
                return Response(status_code=499)
            done(result)
            return JSONResponse(api.chat_completion(result, req.model, cid, created))
        first = await streams.prime(gen, request)
        if first is streams.GONE:
            return Response(status_code=499)
        include_usage = bool(req.stream_options and req.stream_options.include_usage)
        body = streams.chat_sse(first, gen, metrics, cid=cid, created=created, model=req.model,
                                include_usage=include_usage, later=done,
                                turn_message=lambda e: turn_message(request, e))
        return streams.sse_response(request, body, lambda m: api.sse_error(m, "internal_error") + "data: [DONE]\n\n")

    @app.post("/v1/responses")
    async def responses(req: api.ResponsesRequest, request: Request):
        mol = served.mol
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
        await checked(req, lead + prior + new, tools, req.tool_choice, response_format=req.text_format())
        rid = api.new_id("resp_")
        if experience is not None:
            experience.observe(lead + prior + new, rid)
        gen = mol.astream(lead + prior + new, tools, req.model, req.sampling(), req.tool_choice,
                          response_format=req.text_format(), parallel_tool_calls=req.parallel_tool_calls is not False,
                          a2ui_version=req.a2ui_version or DEFAULT_VERSION)

        def finish(result: TurnResult, fc_ids: list[str] | None = None) -> dict:
            obj = api.response_object(rid, req, result, fc_ids=fc_ids)
            if req.store:
                mol.store.save_response(obj, result.messages[len(lead):], req.previous_response_id)
            later(result, mol)
            record(rid, "responses", lead + prior + new, result, req.model,
                   offered(tools, req.tool_choice, req.text_format(), stream=req.stream or None))
            return obj

        if not req.stream:
            result = await streams.collect(request, gen, metrics)
            if result is None:
                return Response(status_code=499)
            return JSONResponse(finish(result))
        first = await streams.prime(gen, request)
        if first is streams.GONE:
            return Response(status_code=499)
        body = streams.responses_sse(first, gen, metrics, rid=rid, req=req, finish=finish,
                                     turn_message=lambda e: turn_message(request, e))
        return streams.sse_response(request, body, lambda m: api.event("error", 0, message=m, code="internal_error",
                                                                       param=None))

    @app.get("/v1/responses/{rid}")
    async def get_response(rid: str):
        mol = served.mol
        loaded = mol.store.load_response(rid)
        if loaded is None:
            raise TurnError(f"no stored response {rid!r}", 404, "response_not_found")
        return loaded[0]

    @app.delete("/v1/responses/{rid}")
    async def delete_response(rid: str):
        mol = served.mol
        if not mol.store.delete_response(rid):
            raise TurnError(f"no stored response {rid!r}", 404, "response_not_found")
        return {"id": rid, "object": "response", "deleted": True}

    @app.post("/v1/feedback")
    async def feedback(req: api.FeedbackRequest):
        mol = served.mol
        if req.rating is None and req.expected_specialist is None and not req.comment:
            raise TurnError("feedback needs a rating, an expected_specialist or a comment", param="rating")
        if req.expected_specialist is not None and req.expected_specialist not in mol.bundle.role_names:
            raise TurnError(f"expected_specialist {req.expected_specialist!r} is not one of "
                            f"{', '.join(mol.bundle.role_names)}", param="expected_specialist")
        row = mol.store.record_feedback(req.response_id, req.rating, req.expected_specialist, req.comment)
        if experience is not None:  # linked: the experience file holds the turn this reply came from
            row["linked"] = await asyncio.wrap_future(
                experience.feedback(req.response_id, req.rating, req.expected_specialist, req.comment))
        return {"object": "feedback", **row}

    if not config.engine_only:
        substrate = app.state.substrate = ServedSubstrate(config.substrate)

        @app.get("/v1/tools")
        async def builtin_tools():
            # `writes`: the tools that change the state (the web chat asks before running them)
            return {"object": "list", "data": substrate.tools(), "writes": substrate.writes()}

        @app.post("/v1/tools/execute")
        async def execute_tool(req: api.ToolExecuteRequest):
            result = await asyncio.to_thread(substrate.execute, req.name, req.arguments)
            return {"object": "tool.result", "name": req.name, "call_id": req.call_id,
                    "ok": "error" not in result, "result": result}

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

