"""A turn's generator as HTTP bodies: drained for a JSON answer, or as the two SSE protocols
(Chat Completions chunks, Responses events).

A turn generator (`MoL.astream`) yields text deltas (str), streamed tool-call deltas (`CallDelta`)
and last one `TurnResult`. These functions only translate that to wire events; the caller passes
`turn_message` (a TurnError as the client may see it) and `later` (what to do with the finished
result: metrics, summaries, storage). Knows nothing of routes or the harness.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import AsyncIterator, Callable

from fastapi import Request

from macaronic.serve import api
from macaronic.serve.callstream import CallDelta
from macaronic.serve.metrics import Metrics
from macaronic.serve.mol import TurnError, TurnResult

log = logging.getLogger("macaronic.serve")


GONE = object()  # prime's answer when the client went away first


async def prime(gen, request: Request | None = None):
    """The first item, so request errors become HTTP statuses before any streaming starts. Until it
    comes (a grammar may still be compiling) a client that goes away cancels the work: `GONE`."""
    me, gone = asyncio.current_task(), []

    async def watch():
        while not await request.is_disconnected():
            await asyncio.sleep(0.25)
        gone.append(True)
        me.cancel()

    watcher = asyncio.ensure_future(watch()) if request is not None else None
    try:
        return await gen.__anext__()
    except asyncio.CancelledError:
        await gen.aclose()
        if not gone:
            raise
        me.uncancel()
        return GONE
    except BaseException:
        await gen.aclose()
        raise
    finally:
        if watcher is not None:
            watcher.cancel()


async def until_gone(request: Request, coro, metrics: Metrics):
    """Await `coro` (the whole of a JSON answer's work, or the n samples of a request); `GONE` if the
    client went away first, and then the work is cancelled (its engine requests with it)."""
    task = asyncio.ensure_future(coro)
    metrics.flight(+1)
    try:
        while True:
            done, _ = await asyncio.wait({task}, timeout=0.25)
            if done:
                return task.result()
            if await request.is_disconnected():
                return GONE
    finally:
        metrics.flight(-1)
        if not task.done():
            task.cancel()
            with contextlib.suppress(BaseException):
                await task


async def collect(request: Request, gen, metrics: Metrics) -> TurnResult | None:
    """Drain a turn; None if the client went away (its generation is then cancelled)."""
    async def drain():
        async for item in gen:
            if isinstance(item, TurnResult):
                return item
        raise TurnError("the turn ended without a result", 502)

    try:
        # the drain must leave the generator before it can be closed (else "aclose(): asynchronous
        # generator is already running", a 500 for a client that merely went away): until_gone awaits it
        result = await until_gone(request, drain(), metrics)
        return None if result is GONE else result
    finally:
        await gen.aclose()


async def guarded(request: Request, body: AsyncIterator[str], on_error: Callable[[str], str]):
    """An SSE body whose unexpected failure is logged and ends the stream with `on_error(message)`."""
    try:
        async for part in body:
            yield part
    except Exception:
        rid = getattr(request.state, "request_id", "-")
        log.exception("request %s: stream failed", rid)
        yield on_error(f"internal server error (request id {rid})")
    finally:
        with contextlib.suppress(Exception):
            await body.aclose()


async def chat_sse(first, gen, metrics: Metrics, *, cid: str, created: int, model: str, include_usage: bool,
                   later: Callable[[TurnResult], None], turn_message: Callable[[TurnError], str]):
    """Chat Completions chunks: a role chunk, content / tool-call deltas, the final chunks, [DONE]."""
    metrics.flight(+1)
    try:
        yield api.chunk(cid, created, model, {"role": "assistant", "content": ""})
        item, streamed_calls = first, False
        while True:
            if isinstance(item, TurnResult):
                yield api.final_chunks(item, cid, created, model, include_usage, streamed_calls)
                later(item)
                break
            if isinstance(item, CallDelta):
                streamed_calls = True
                yield api.chunk(cid, created, model, {"tool_calls": [api.call_delta(item)]})
            else:
                yield api.chunk(cid, created, model, {"content": item})
            item = await gen.__anext__()
        yield "data: [DONE]\n\n"
    except TurnError as e:
        yield api.sse_error(turn_message(e), e.code)
        yield "data: [DONE]\n\n"
    finally:
        metrics.flight(-1)
        await gen.aclose()


async def responses_sse(first, gen, metrics: Metrics, *, rid: str, req, finish: Callable[..., dict],
                        turn_message: Callable[[TurnError], str]):
    """Responses events: created, the message item's text deltas, a function_call item per call
    (arguments as they decode), the done events, and `response.completed` with `finish(result)`."""
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
            if isinstance(item, CallDelta):
                if item.id is not None:
                    fc_ids.append(api.new_id("fc_"))
                    yield api.event("response.output_item.added", seq := seq + 1, output_index=1 + item.index,
                                    item={"type": "function_call", "id": fc_ids[-1], "call_id": item.id,
                                          "name": item.name, "arguments": "", "status": "in_progress"})
                if item.arguments:
                    yield api.event("response.function_call_arguments.delta", seq := seq + 1,
                                    item_id=fc_ids[item.index], output_index=1 + item.index, delta=item.arguments)
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
        yield api.event("error", seq + 1, message=turn_message(e), code=e.code, param=e.param)
    finally:
        metrics.flight(-1)
        await gen.aclose()


def sse_response(request: Request, body, on_error: Callable[[str], str]):
    from fastapi.responses import StreamingResponse

    return StreamingResponse(guarded(request, body, on_error), media_type="text/event-stream",
                             headers={"Cache-Control": "no-cache"})
