"""Prometheus text exposition (format 0.0.4) for the server, without a client library.

Counters and histograms with labels, thread-safe, rendered on demand. The server records:
requests by endpoint and status, tokens by kind (prompt, completion, prefill, reused), routes
by adapter and policy, latency histograms (request, time to first token, route hop) and, with the
embedded engine, its own counters (tokens prefilled and generated, sequences running) read at each scrape.
Knows nothing about HTTP frameworks or the harness.
"""

from __future__ import annotations

import threading
from bisect import bisect_left

LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)


def _labels(names: tuple[str, ...], values: tuple) -> str:
    if not names:
        return ""
    esc = [str(v).replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"') for v in values]
    return "{" + ",".join(f'{n}="{v}"' for n, v in zip(names, esc)) + "}"


class Counter:
    def __init__(self, name: str, help_: str, labels: tuple[str, ...] = ()):
        self.name, self.help, self.labels = name, help_, labels
        self.values: dict[tuple, float] = {}
        self._lock = threading.Lock()

    def inc(self, *labels, by: float = 1.0) -> None:
        with self._lock:
            self.values[labels] = self.values.get(labels, 0.0) + by

    def render(self) -> list[str]:
        out = [f"# HELP {self.name} {self.help}", f"# TYPE {self.name} counter"]
        with self._lock:
            out += [f"{self.name}{_labels(self.labels, k)} {v:g}" for k, v in sorted(self.values.items())]
        return out


class Gauge(Counter):
    def set(self, *labels, value: float) -> None:
        with self._lock:
            self.values[labels] = value

    def render(self) -> list[str]:
        lines = super().render()
        lines[1] = f"# TYPE {self.name} gauge"
        return lines


class Histogram:
    def __init__(self, name: str, help_: str, labels: tuple[str, ...] = (), buckets=LATENCY_BUCKETS):
        self.name, self.help, self.labels, self.buckets = name, help_, labels, tuple(buckets)
        self.series: dict[tuple, list] = {}  # labels -> [bucket counts..., sum, count]
        self._lock = threading.Lock()

    def observe(self, value: float, *labels) -> None:
        with self._lock:
            s = self.series.setdefault(labels, [0] * len(self.buckets) + [0.0, 0])
            i = bisect_left(self.buckets, value)
            if i < len(self.buckets):
                s[i] += 1
            s[-2] += value
            s[-1] += 1

    def render(self) -> list[str]:
        out = [f"# HELP {self.name} {self.help}", f"# TYPE {self.name} histogram"]
        with self._lock:
            for labels, s in sorted(self.series.items()):
                cum = 0
                for b, n in zip(self.buckets, s):
                    cum += n
                    out.append(f"{self.name}_bucket{_labels(self.labels + ('le',), labels + (f'{b:g}',))} {cum}")
                out.append(f"{self.name}_bucket{_labels(self.labels + ('le',), labels + ('+Inf',))} {s[-1]}")
                out.append(f"{self.name}_sum{_labels(self.labels, labels)} {s[-2]:g}")
                out.append(f"{self.name}_count{_labels(self.labels, labels)} {s[-1]}")
        return out


class Metrics:
    def __init__(self):
        self.requests = Counter("macaronic_requests_total", "HTTP requests by endpoint and status.",
                                ("endpoint", "status"))
        self.tokens = Counter("macaronic_tokens_total",
                              "Tokens by kind: prompt, completion, prefill (computed) and reused (from cache).",
                              ("kind",))
        self.routes = Counter("macaronic_routes_total", "Turns by the adapter that answered and the routing policy.",
                              ("adapter", "policy"))
        self.in_flight = Gauge("macaronic_in_flight_requests", "Generations running now.")
        self.latency = Histogram("macaronic_request_seconds", "Request latency by endpoint.", ("endpoint",))
        self.ttft = Histogram("macaronic_ttft_seconds", "Time to first token of the answer hop.")
        self.route_latency = Histogram("macaronic_route_seconds", "Route hop latency.")
        self._flight = 0
        self._lock = threading.Lock()
        self.engine = None  # a callable giving the embedded engine's counters, read at each scrape

    def engine_lines(self) -> list[str]:
        """`macaronic_engine_<counter>_total` per engine counter; running / waiting as gauges."""
        if self.engine is None:
            return []
        out = []
        for k, v in sorted(self.engine().items()):
            gauge = k in ("running", "waiting")
            name = f"macaronic_engine_{k}" + ("" if gauge else "_total")
            what = f"Engine sequences {k} now." if gauge else f"Engine counter {k} since the server started."
            out += [f"# HELP {name} {what}", f"# TYPE {name} {'gauge' if gauge else 'counter'}", f"{name} {v:g}"]
        return out

    def flight(self, delta: int) -> None:
        with self._lock:
            self._flight += delta
            self.in_flight.set(value=self._flight)

    def record_turn(self, meta: dict, usage: dict) -> None:
        self.routes.inc(str(meta.get("adapter") or "base"), str(meta.get("policy")))
        for kind in ("prompt", "completion"):
            self.tokens.inc(kind, by=float(usage.get(f"{kind}_tokens") or 0))
        for kind in ("prefill", "reused"):
            self.tokens.inc(kind, by=float(meta.get(f"{kind}_tokens") or 0))
        if usage.get("ttft_ms") is not None:
            self.ttft.observe(usage["ttft_ms"] / 1000)
        if meta.get("policy") not in ("forced", "sticky", "sticky-action"):
            self.route_latency.observe((meta.get("route_ms") or 0) / 1000)

    def render(self) -> str:
        parts = [self.requests, self.tokens, self.routes, self.in_flight, self.latency, self.ttft, self.route_latency]
        return "\n".join([*(line for p in parts for line in p.render()), *self.engine_lines()]) + "\n"
