"""`macaronic train sample-chat`: rejection-sampled chat data, the bare base's own replies to the chat
engine's prompts that pass every verifier (train/chat_rs.py)."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from macaronic.commands.sampling import base_llm, parser
from macaronic.train.chat_rs import DATA
from macaronic.train.chat_rs import __doc__ as CHAT_RS_DOC

FLAGS = (("--out", dict(type=Path, default=None, help="JSONL to append to (rows already there are skipped; default: "
                                                     "the committed chat_rs.jsonl for the bare base, chat_rs_<adapter "
                                                     "id[:8]>.jsonl beside it with --adapter)")),
         ("--adapter", dict(type=Path, default=None, metavar="DIR",
                            help="an on-policy round: this chat adapter answers, as it is served, instead of the bare "
                                 "base (its rows name its id; `train dpo --pairs chat_onpolicy` pairs them)")),
         ("--prompts", dict(type=int, default=100, help="prompts of the seeded stream to cover (0..N-1)")),
         ("--k", {}), ("--temperature", {}),
         ("--max-tokens", dict(default=300, help="a reply cut at this cap fails (check 'complete')")),
         ("--batch", dict(type=int, default=4, help="prompts in flight at once")),
         ("--seed", {}), ("--base", {}), ("--threads", {}),
         ("--quiet", dict(action="store_true", help="no progress bar")))


def main(argv: list[str]) -> int:
    p = parser("sample-chat", CHAT_RS_DOC, "prompt", FLAGS)
    a = p.parse_args(argv)
    if a.k < 1 or a.prompts < 0:
        p.error("--k must be at least 1 and --prompts at least 0")
    from macaronic.contract.opening import progress
    from macaronic.datagen.chat import prompts
    from macaronic.engine.adapters import AdapterError
    from macaronic.train.chat_rs import onpolicy_path, read, run, served_role, summary, todo

    if a.adapter is not None:  # checked before the base loads: a wrong directory costs nothing
        import json

        from macaronic.engine.adapters import dir_sha256

        try:
            role = json.loads((a.adapter / "macaronic.json").read_text()).get("role")
        except (OSError, ValueError) as e:
            p.error(f"--adapter {a.adapter}: not an adapter directory with a macaronic.json ({e})")
        if role != served_role():
            p.error(f"--adapter {a.adapter} is a {role!r} adapter; sample-chat samples a {served_role()} adapter")
        a.out = a.out or onpolicy_path(dir_sha256(a.adapter))
    a.out = a.out or DATA
    wanted = prompts(a.prompts, a.seed)
    left = len(todo(wanted, read(a.out)))
    t0 = time.time()
    written = 0
    if left:
        with base_llm(a.base, a.threads) as llm, progress(a.quiet) as bar:
            name = None
            if a.adapter is not None:
                try:
                    name = llm.add_adapter(a.adapter, served_role()).name
                except AdapterError as e:
                    p.error(f"--adapter {a.adapter}: {e}")
            task = bar.add_task("sample-chat", total=left)
            kept = [0]

            def tick(row):
                kept[0] += row["reply"] is not None
                bar.update(task, advance=1, description=f"sample-chat kept {kept[0]}")

            written = run(llm, wanted, a.out, a.k, on_row=tick, base=a.base, temperature=a.temperature,
                          max_tokens=a.max_tokens, seed=a.seed, batch=a.batch, adapter=name)
    dt = time.time() - t0
    s = summary(read(a.out))
    for c, v in s["categories"].items():
        print(f"  {c:<10} {v['kept']}/{v['prompts']} prompts kept", file=sys.stderr)
    for kind, v in s["kinds"].items():
        print(f"  {kind:<13} {v['passed']}/{v['samples']} samples pass ({v['rate']:.2f})", file=sys.stderr)
    per = f", {dt / written:.1f} s per prompt" if written else ""
    print(f"sample-chat: {written} new prompts ({len(wanted) - left} already done) in {dt:.0f} s{per}; "
          f"{s['kept']}/{s['prompts']} prompts kept (repaired: {s['repaired'] or 'none'}) in {a.out}", file=sys.stderr)
    return 0
