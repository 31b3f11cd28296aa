"""uvicorn's h11 protocol with the slow-client limit the stock server lacks, and its one plain-text
error in the OpenAI shape.

- A connection must send a complete request head within `head_timeout_s` of connecting, or of
  the end of its previous response: partial headers no longer hold a connection open forever
  (uvicorn's keep-alive timer stops at the first byte). A partial head gets a 408, a silent
  connection is closed.
- An unparsable request (bad request line, invalid Content-Length, ...) gets a 400 in the OpenAI
  error shape instead of uvicorn's "Invalid HTTP request received.".

The request body's limits (size, time) are the app's (`app.Guard`). Knows nothing about the API.
"""

from __future__ import annotations

import json

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from macaronic.serve.api import error_body

HEAD_TIMEOUT_S = 10.0


def _raw_reply(status: int, reason: str, body: dict) -> bytes:
    data = json.dumps(body).encode()
    return (f"HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\ncontent-length: {len(data)}\r\n"
            f"connection: close\r\n\r\n").encode() + data


class SlowClientH11(H11Protocol):
    head_timeout_s = HEAD_TIMEOUT_S

    def connection_made(self, transport) -> None:
        super().connection_made(transport)
        self._head_timer, self._head_cycle, self._head_bytes = None, None, False
        self._arm()

    def connection_lost(self, exc) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self._waiting():  # bytes of a head that is not complete yet
            self._head_bytes = True
            if self._head_timer is None or self._head_cycle is not self.cycle:
                self._arm()

    def _waiting(self) -> bool:
        return self.cycle is None or self.cycle.response_complete

    def _arm(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
        self._head_cycle = self.cycle
        self._head_timer = self.loop.call_later(self.head_timeout_s, self._head_timeout)

    def _head_timeout(self) -> None:
        self._head_timer = None
        if self.transport.is_closing() or self.cycle is not self._head_cycle or not self._waiting():
            return  # a request began since the timer was armed
        if self._head_bytes:
            self.transport.write(_raw_reply(408, "Request Timeout", error_body(
                f"the request head did not arrive within {self.head_timeout_s:g} s", code="request_timeout")))
        self.transport.close()

    def send_400_response(self, msg: str) -> None:
        data = json.dumps(error_body(f"invalid HTTP request ({msg.rstrip('.')})", code="invalid_http_request"))
        event = h11.Response(status_code=400, reason=b"Bad Request", headers=[
            (b"content-type", b"application/json"), (b"content-length", str(len(data)).encode()),
            (b"connection", b"close")])
        self.transport.write(self.conn.send(event))
        self.transport.write(self.conn.send(h11.Data(data=data.encode())))
        self.transport.write(self.conn.send(h11.EndOfMessage()))
        self.transport.close()


def protocol(head_timeout_s: float = HEAD_TIMEOUT_S) -> type[SlowClientH11]:
    """The protocol class for `uvicorn.Config(http=...)` with this head timeout."""
    return type("SlowClientH11", (SlowClientH11,), {"head_timeout_s": head_timeout_s})
