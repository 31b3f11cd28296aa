"""`macaronic chat`: a terminal chat on the embedded default, for quick manual use.

Each user line is one turn; the reply streams as it is generated, followed by the adapter that
answered and the prefill/reused token counts. Knows nothing about HTTP.
"""

from __future__ import annotations

import argparse
import sys

from macaronic.commands.generate import add_model_args, load_from_args


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="macaronic chat", description="Chat in the terminal (Ctrl-D to quit).")
    ap.add_argument("--adapter", default=None, help="answer every turn with this adapter (default: the bare base)")
    ap.add_argument("--system", default="You are Macaronic, a concise and helpful assistant.")
    ap.add_argument("--max-tokens", type=int, default=256)
    add_model_args(ap)
    a = ap.parse_args(argv)
    from macaronic.engine.sampling import SamplingParams

    llm = load_from_args(a)
    msgs = [{"role": "system", "content": a.system}]
    tty = sys.stdin.isatty()
    if tty:
        print(f"macaronic chat on {llm.base.name}; adapters: {', '.join(llm.adapters.names()) or 'none'}. Ctrl-D quits.")
    while True:
        if tty:
            print("> ", end="", flush=True)
        line = sys.stdin.readline()
        if not line:
            break
        if not line.strip():
            continue
        msgs.append({"role": "user", "content": line.strip()})
        h = llm.submit(llm.encode_chat(msgs), a.adapter, SamplingParams(max_tokens=a.max_tokens))
        reply = []
        for ev in h:
            sys.stdout.write(ev.text)
            sys.stdout.flush()
            reply.append(ev.text)
        u = h.usage or {}
        print(f"\n[{a.adapter or 'base'} · prefill {u.get('prefill_tokens')} · reused {u.get('reused_tokens')}]")
        msgs.append({"role": "assistant", "content": "".join(reply)})
    llm.close()
    return 0
