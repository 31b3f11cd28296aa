"""`macaronic serve`: parse the command line, assemble engine + bundle + router + store, run uvicorn.

The router policy comes from the bundle's router.json. Policies that need fitted state (head,
probe, embedding, arrow; the default cascade uses the head) load `--router-state DIR`, else the
state shipped with the specialists (specialists/router, see macaronic.router.shipped), from the
first request. Nothing is fitted at start-up: a state bound to another base or other adapters is
refused with the reason (refit with `macaronic route fit --out DIR`, or --router-policy
prompted). With a remote engine the router runs on a local backbone (the embedded default base
unless --base is given).
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import socket
import sqlite3
import sys
from pathlib import Path

from macaronic.engine.bases import BASE_HELP, served_precision

DESCRIPTION = """Serve the OpenAI-compatible Mixture-of-LoRA API and the web chat.

With no arguments: the embedded default (Qwen2.5-Coder-0.5B-Instruct + its shipped specialists) on
http://127.0.0.1:8200/ (web chat at /, API at /v1). model="macaronic" routes each turn to one
specialist; model=<adapter name> forces that adapter."""


def parser() -> argparse.ArgumentParser:
    from macaronic.router.config import POLICIES

    p = argparse.ArgumentParser(prog="macaronic serve", description=DESCRIPTION,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--host", default="127.0.0.1", help="interface to bind (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8200, help="port (default 8200; 0 = any free port)")
    key = p.add_mutually_exclusive_group()
    key.add_argument("--api-key", help="require this key (Authorization: Bearer KEY); visible in the process list, so prefer --api-key-file or $MACARONIC_API_KEY")
    key.add_argument("--api-key-file", help="read the required key from this file")
    p.add_argument("--engine", default="local",
                   help="local (embedded engine) or openai://HOST:PORT (a vLLM/SGLang/macaronic engine whose "
                        "model ids are the adapters; key in $MACARONIC_ENGINE_API_KEY)")
    p.add_argument("--base", help=BASE_HELP)
    p.add_argument("--adapter-dir", action="append", default=[], metavar="DIR",
                   help="register a PEFT adapter directory (repeatable; default: the shipped specialists)")
    p.add_argument("--bundle", help="harness bundle directory (default: the shipped one)")
    p.add_argument("--router-policy", choices=(*POLICIES, "none"),
                   help="override the bundle's routing policy (none: always the default route)")
    p.add_argument("--router-state", metavar="DIR", help="a saved router state (macaronic route fit --out DIR)")
    p.add_argument("--no-user-specialists", action="store_true",
                   help="serve only the shipped specialists, not those `macaronic specialist add` registered "
                        "(they are served by default, with their bundle and router state, unless --adapter-dir, "
                        "--bundle or --router-state is given)")
    p.add_argument("--store", help="SQLite file for Responses and segment memory "
                                   "(default $MACARONIC_HOME/serve/state.sqlite)")
    p.add_argument("--experience", metavar="FILE",
                   help="record what each turn did (route, pair, grammar, repairs, tool errors, what the client "
                        "did next, feedback) into this local SQLite file; off by default, nothing leaves the "
                        "machine (macaronic experience export / forget)")
    p.add_argument("--follow", action="store_true",
                   help="serve the lineage's champion pair and pick up each new one without a restart: swapped "
                        "between turns, turns in flight finish on the old pair (local engine, same base; "
                        "`macaronic pair rollback` goes back)")
    p.add_argument("--lineage", metavar="FILE", help="the lineage --follow reads (default $MACARONIC_LINEAGE or "
                                                     "$MACARONIC_HOME/lineage.sqlite)")
    p.add_argument("--follow-interval", type=float, default=2.0, metavar="S",
                   help="seconds between two reads of the champion (default 2)")
    p.add_argument("--substrate", metavar="FILE",
                   help="SQLite file of the built-in tools' state (reminders, calendar, contacts, notes, orders) "
                        "the web chat's agent acts on (default: substrate.sqlite beside the store; ':memory:' keeps none)")
    p.add_argument("--api-docs", action="store_true",
                   help="serve the OpenAPI schema at /openapi.json (behind the API key when one is set); "
                        "the /docs and /redoc pages are never served (they load scripts from a CDN)")
    p.add_argument("--public-name", default="macaronic", help="the routed model id (default macaronic)")
    p.add_argument("--max-tokens-limit", type=int, default=4096, help="largest max_tokens a request may ask for")
    p.add_argument("--max-body-bytes", type=int, default=4 << 20, help="request body size limit (default 4 MiB)")
    p.add_argument("--max-batch", type=int, default=32, help="concurrent sequences in the engine's batch")
    from macaronic.serve.budgets import Budgets

    b = Budgets()
    g = p.add_argument_group("budgets", "what one request's tools and schemas may cost (over one: a 400 naming it)")
    g.add_argument("--max-tools", type=int, default=b.max_tools, help=f"tools per request (default {b.max_tools})")
    g.add_argument("--max-schema-bytes", type=int, default=b.max_schema_bytes,
                   help=f"one tool's parameters or one response_format schema, as JSON (default {b.max_schema_bytes}); "
                        "all of a request's schemas together: 8 times this")
    g.add_argument("--max-schema-nodes", type=int, default=b.max_schema_nodes,
                   help=f"schema objects and lists in one request (default {b.max_schema_nodes})")
    g.add_argument("--max-schema-depth", type=int, default=b.max_schema_depth,
                   help=f"nesting of one schema (default {b.max_schema_depth})")
    g.add_argument("--compile-budget-s", type=float, default=b.compile_s,
                   help=f"seconds that checking a request, building its grammar and compiling it may each take; "
                        f"past it the worker process doing it is killed and the request gets a 400 "
                        f"(default {b.compile_s:g})")
    g.add_argument("--regex-budget-s", type=float, default=b.regex_s,
                   help=f"seconds one schema `pattern` may take on one decoded value (default {b.regex_s:g})")
    p.add_argument("--dtype", choices=("float32", "bfloat16"),
                   help="precision of the base weights and activations (default $MACARONIC_DTYPE, else the "
                        "registered base's served precision (engine/bases.py `served`, chosen by the README's rule); a "
                        "model directory: float32)")
    p.add_argument("--quant", choices=("none", "int8", "int4", "gguf"),
                   help="weight-only quantized base matmuls with bf16 activations: int8 is within 1%% of "
                        "bf16, int4 (groups of 32, like Q4_1) is fastest, gguf serves the GGUF's own blocks "
                        "(a registered base); see docs/BENCHMARKS.md "
                        "(default $MACARONIC_QUANT, else the registered base's served precision)")
    p.add_argument("--no-summaries", action="store_true", help="skip the summary hop of full-mode adapters")
    p.add_argument("--engine-only", action="store_true",
                   help="serve as a plain multi-LoRA engine (model ids = base or adapters; no routing, no "
                        "harness prompts): what --engine openai:// of another server talks to")
    p.add_argument("--no-warmup", action="store_true",
                   help="listen at once, without first running a few short turns that warm the kernels, the "
                        "router, the grammar cache and the prefix cache (the first request then pays for them)")
    p.add_argument("--log-level", default="warning", choices=("debug", "info", "warning", "error"))
    return p


def api_key_from(a) -> str | None:
    if a.api_key_file:
        key = Path(a.api_key_file).read_text().strip()
        if not key:
            raise SystemExit(f"macaronic serve: {a.api_key_file} is empty")
        return key
    return a.api_key or os.environ.get("MACARONIC_API_KEY") or None


def budgets_from(a):
    from macaronic.serve.budgets import Budgets

    return Budgets(max_tools=a.max_tools, max_schema_bytes=a.max_schema_bytes,
                   max_total_schema_bytes=8 * a.max_schema_bytes, max_schema_nodes=a.max_schema_nodes,
                   max_schema_depth=a.max_schema_depth, compile_s=a.compile_budget_s, regex_s=a.regex_budget_s,
                   stoppable=True)  # grammar work in worker processes, killed at the budget


def user_specialists(a) -> tuple[Path | None, list[str]]:
    """(the user directory of the served base, its user specialists' names) when `macaronic
    specialist add` registered some for it and the command line names no adapters, bundle or router
    state of its own; else (None, [])."""
    from macaronic.engine.bases import registered
    from macaronic.specialist import load_user, user_dir

    base = registered(a.base)
    if base is None or a.adapter_dir or a.bundle or a.router_state or a.no_user_specialists:
        return None, []
    names = [s.name for s in load_user() if s.base == base]
    return (user_dir() / base, names) if names else (None, [])


def load_local(a, user: tuple[Path | None, list[str]] = (None, [])):
    from macaronic.engine.llm import EngineConfig, load_base_llm

    precision = served_precision(a.base, a.dtype, a.quant)
    cfg = EngineConfig.from_env(max_tokens_limit=a.max_tokens_limit, max_batch=a.max_batch, **precision)
    llm = load_base_llm(a.base, a.adapter_dir, cfg)
    root, names = user
    for n in names:
        llm.add_adapter(root / "adapters" / n, n)
    return llm


def build(a):
    """(MoL or, with --follow, Served; ServeConfig; LLM; Experience | None; Follower | None)."""
    from macaronic.engine.base import home
    from macaronic.harness import load_bundle
    from macaronic.router.shipped import router_for
    from macaronic.serve.backends import LocalBackend
    from macaronic.serve.guard import ServeConfig
    from macaronic.serve.mol import HarnessConfig, MoL
    from macaronic.serve.store import Store

    store_path = Path(a.store) if a.store else home() / "serve" / "state.sqlite"
    store = Store(store_path)  # first: a damaged store refuses before the model loads
    experience = None
    if a.experience:
        from macaronic.serve.experience import Experience

        experience = Experience(a.experience)  # likewise a damaged experience file
    remote = a.engine != "local"
    user = user_specialists(a) if not remote else (None, [])  # a remote engine serves its own adapters
    bundle = load_bundle(user[0] / "bundle" if user[1] else a.bundle)
    state = user[0] / "router" if user[1] else a.router_state
    if remote:
        from macaronic.serve.remote import RemoteBackend

        backend = RemoteBackend(a.engine, roles=tuple(bundle.role_names))
        needs_local = not a.engine_only and a.router_policy != "none"
        llm = load_local(a) if needs_local else None
    else:
        llm = load_local(a, user)
        backend = LocalBackend(llm, compile_s=a.compile_budget_s, stoppable=True)
    router = router_for(llm, bundle, a.router_policy, state) \
        if llm is not None and not a.engine_only else None
    budgets = budgets_from(a)
    config = HarnessConfig(public_name=a.public_name, summaries=not a.no_summaries,
                           max_tokens_limit=a.max_tokens_limit, budgets=budgets)
    mol = MoL(backend, bundle, router, store, config)
    follower = None
    if a.follow:
        if remote or a.engine_only:
            raise ValueError("--follow needs the local engine and the routed harness")
        from macaronic.pairs.lineage import default_lineage
        from macaronic.serve.follow import Follower, Served

        mol = Served(mol)
        follower = Follower(mol, a.lineage or default_lineage(), pair_builder(a, llm, backend, store, config),
                            a.follow_interval)
    return mol, ServeConfig(api_key=api_key_from(a), max_body_bytes=a.max_body_bytes, engine_only=a.engine_only,
                            api_docs=a.api_docs, budgets=budgets,
                            substrate=a.substrate or substrate_beside(store_path)), llm, experience, follower


def pair_builder(a, llm, backend, store, config):
    """build(manifest) -> MoL for --follow: the pair's adapters registered in the running engine (an
    adapter already there, same content id, is shared), its harness bundle and its router."""
    from macaronic.harness import load_bundle
    from macaronic.router.shipped import router_for
    from macaronic.serve.follow import ScopedBackend
    from macaronic.serve.mol import MoL

    def build(m):
        if m.base_fingerprint != backend.base()["fingerprint"]:
            raise ValueError(f"pair {m.id[:16]} is on another base ({m.base}); restart the server to serve it")
        by_id = {i.id: i.name for i in llm.adapters.infos()}
        names = {}
        for role, ad in m.adapters.items():
            if ad["id"] not in by_id:
                by_id[ad["id"]] = llm.add_adapter(ad["path"], f"{role}-{ad['id'][:12]}").name
            names[role] = by_id[ad["id"]]
        bundle = load_bundle(m.harness["path"])
        router = router_for(llm, bundle, a.router_policy, a.router_state)
        mol = MoL(ScopedBackend(backend, names), bundle, router, store, config)
        if mol.pair_id != m.id:
            raise ValueError(f"the served parts hash to {mol.pair_id[:16]}, not the pair's {m.id[:16]}")
        return mol

    return build


def substrate_beside(store_path: Path) -> str:
    """The built-in tools' state file: beside the store (in memory when the store is)."""
    return ":memory:" if str(store_path) == ":memory:" else str(store_path.parent / "substrate.sqlite")


def bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.set_inheritable(True)
    return sock


def main(argv: list[str]) -> int:
    a = parser().parse_args(argv)
    logging.basicConfig(level=a.log_level.upper(), format="%(levelname)s %(name)s: %(message)s")
    try:
        sock = bind(a.host, a.port)
    except OSError as e:
        print(f"macaronic serve: cannot listen on {a.host}:{a.port}: {e}", file=sys.stderr)
        return 2
    try:
        mol, serve_config, llm, experience, follower = build(a)
    except (RuntimeError, ValueError, OSError, sqlite3.Error) as e:  # a damaged store: StoreDamaged
        print(f"macaronic serve: {e}", file=sys.stderr)
        return 2
    import uvicorn

    from macaronic.serve.app import create_app
    from macaronic.serve.http import protocol
    from macaronic.serve.warmup import Warmup, WarmServer, warm

    warmup = Warmup(enabled=not a.no_warmup)
    app = create_app(mol, serve_config, experience=experience, warmup=warmup)
    if follower is not None:
        follower.check()  # the champion now, before the first request
        mol = follower.served.mol  # the MoL serving at start (printed below; its store is every pair's)
    host, port = sock.getsockname()[:2]
    url = f"http://{'[' + host + ']' if ':' in host else host}:{port}"
    adapters = ", ".join(f"{n} ({m.role or '-'}, {m.mode})" for n, m in mol.backend.adapters().items()) or "none"
    print(f"macaronic serve: engine {mol.backend.label}, base {mol.backend.base()['id']}, adapters: {adapters}",
          flush=True)
    print(f"macaronic serve: pair {mol.pair_id[:16]}, {'engine only' if serve_config.engine_only else 'routed'}"
          f"{', API key required' if serve_config.api_key else ''}", flush=True)
    if experience is not None:
        print(f"macaronic serve: recording experience into {experience.path} (stays on this machine)", flush=True)
    if follower is not None:
        follower.start()
        print(f"macaronic serve: following the champion of {follower.lineage}", flush=True)

    async def warm_up():
        from macaronic.substrate.tools import openai_tools  # the built-in tools the web chat offers

        builtin = None if serve_config.engine_only else openai_tools()
        await warm(mol, serve_config.engine_only, builtin, warmup)
        print(warmup.line(), flush=True)

    def ready():  # printed once the warm-up is over, just before the socket opens
        print(f"Web chat: {url}/   API: {url}/v1", flush=True)

    # uvicorn re-raises the SIGTERM it caught once its graceful shutdown is over; the default action
    # would end the process there, before `finally` checkpoints and closes the store
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    server = WarmServer(uvicorn.Config(app, log_level=a.log_level, access_log=False,
                                       timeout_graceful_shutdown=5, lifespan="off",
                                       http=protocol(), timeout_keep_alive=5),  # slow clients: http.py
                        warm=warm_up if warmup.enabled else None, ready=ready)
    try:
        server.run(sockets=[sock])
    except KeyboardInterrupt:  # Ctrl-C, re-raised by uvicorn after its graceful shutdown: no traceback
        pass
    finally:
        if follower is not None:
            follower.stop()
        mol.store.close()
        if experience is not None:
            experience.close()
        if llm is not None:
            llm.close()
    return 0
