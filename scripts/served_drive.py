"""Served experience for the loop (issue 38): hand-written conversations driven through a real
`macaronic serve --experience FILE`, each judged by the check its writer wrote beside it, and the
judgement sent back as a user would through POST /v1/feedback:

- the route differs from the role the writer expected: thumbs down and "should have been ROLE";
- the route is right and the check passes: thumbs up;
- the route is right and the check fails: thumbs down, and the request asked once more (a
  regenerate); the second answer gets its own thumbs up or down.

The conversations below were written by hand for this script (2026-12-05); none is a contract task
or an external-suite item (`macaronic evolve served` drops any that overlaps one, by text). The loop
reads the file with `macaronic evolve --experience FILE`. Nothing here leaves the machine.

    .venv/bin/python scripts/served_drive.py --experience docs/evolve/run-r1/served/experience.sqlite \\
        --json docs/evolve/run-r1/served/drive.json

starts `macaronic serve` on the default base with the shipped specialists on a free loopback port
(`--url` drives a server that is already running instead, recorded with its own --experience).
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import time
from pathlib import Path

import httpx
import openai



def tool(name: str, description: str, props: dict, required: list[str]) -> dict:
    return {"type": "function", "function": {"name": name, "description": description,
                                             "parameters": {"type": "object", "properties": props, "required": required}}}


S = {"type": "string"}
WEATHER = tool("get_weather", "Current weather for a city.", {"city": S, "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}}, ["city"])
EMAIL = tool("send_email", "Send an email.", {"to": S, "subject": S, "body": S}, ["to", "body"])
TIMER = tool("set_timer", "Start a countdown timer.", {"minutes": {"type": "integer"}}, ["minutes"])
FX = tool("convert_currency", "Convert an amount between currencies (ISO codes).",
          {"amount": {"type": "number"}, "from_currency": S, "to_currency": S}, ["amount", "from_currency", "to_currency"])
ORDER = tool("lookup_order", "Status of an order by its id.", {"order_id": S}, ["order_id"])
EVENT = tool("create_event", "Add an event to the calendar.", {"title": S, "date": {"type": "string", "description": "YYYY-MM-DD"},
                                                             "time": {"type": "string", "description": "HH:MM"}}, ["title", "date"])
KIT = [WEATHER, EMAIL, TIMER, FX, ORDER, EVENT]


def words(t: str) -> int:
    return len(re.findall(r"\w+", t))


def code_of(t: str) -> str:
    m = re.findall(r"```(?:python)?\n(.*?)```", t, re.S)
    return "\n".join(m) if m else t


def passes(tests: str):
    """The reply's Python, then `tests`, in a fresh interpreter with a 10 s limit."""
    def check(content: str, calls: list) -> bool:
        try:
            p = subprocess.run([sys.executable, "-c", code_of(content) + "\n" + tests], capture_output=True, timeout=10)
        except subprocess.TimeoutExpired:
            return False
        return p.returncode == 0
    return check


def shows(*values: str, components: tuple[str, ...] = ()):
    def check(content: str, calls: list) -> bool:
        low = content.lower()
        return all(v.lower() in low for v in values) and all(f'"{c}"' in content for c in components)
    return check


def calls(name: str, **args):
    def check(content: str, cs: list) -> bool:
        if not cs or cs[0].function.name != name:
            return False
        try:
            got = json.loads(cs[0].function.arguments or "{}")
        except json.JSONDecodeError:
            return False
        return all(str(got.get(k, "")).lower() == str(v).lower() for k, v in args.items())
    return check


def no_call(content: str, cs: list) -> bool:
    return not cs and words(content) >= 3


# (expected role, user text, tools, the writer's check)
CONVERSATIONS = [
    ("chat", "Give me three tips for sleeping better. Keep it under 60 words.", None, lambda c, _: 5 <= words(c) <= 60),
    ("chat", "What's the capital of Australia? One word, please.", None, lambda c, _: "canberra" in c.lower() and words(c) <= 3),
    ("chat", "How do I say 'good morning, how are you?' in Spanish?", None, lambda c, _: "buenos d" in c.lower()),
    ("chat", "Make this sound more polite: 'Send me the report now.'", None, lambda c, _: "please" in c.lower() or "could you" in c.lower()),
    ("chat", "write a short poem about rain, all lowercase letters only", None, lambda c, _: c.strip() and c == c.lower()),
    ("chat", "Sum this up in one sentence: The council voted on Tuesday to keep the library open until 9pm on "
             "weekdays, after 2,000 residents signed a petition asking for longer hours.", None,
     lambda c, _: "library" in c.lower() and len(re.findall(r"[.!?](\s|$)", c.strip())) <= 1),
    ("chat", "Is a tomato a fruit? Start your answer with the word 'Botanically'.", None, lambda c, _: c.strip().startswith("Botanically")),
    ("chat", "Name four planets, one per line, no numbers or bullets.", None,
     lambda c, _: len([l for l in c.splitlines() if l.strip()]) >= 4 and not re.search(r"^\s*([-*\d])", c, re.M)),
    ("chat", "Explain what a mortgage is to a ten-year-old in two sentences.", None,
     lambda c, _: "mortgage" in c.lower() or "house" in c.lower()),
    ("coding", "Write a Python function is_palindrome(s) that ignores case and spaces.", None,
     passes("assert is_palindrome('Never odd or even') and not is_palindrome('abc')")),
    ("coding", "python: count_vowels(text) -> number of vowels (a, e, i, o, u, any case)", None,
     passes("assert count_vowels('Banana SPLIT') == 4 and count_vowels('') == 0")),
    ("coding", "I need flatten(lst) in Python that removes one level of nesting, so [[1, 2], [3]] becomes [1, 2, 3].", None,
     passes("assert flatten([[1, 2], [3], []]) == [1, 2, 3]")),
    ("coding", "Write second_largest(nums) in Python: the second largest distinct value, or None if there isn't one.", None,
     passes("assert second_largest([4, 1, 4, 3]) == 3 and second_largest([7, 7]) is None")),
    ("coding", "This is wrong, fix it:\n\ndef add(a, b):\n    return a - b", None, passes("assert add(2, 3) == 5")),
    ("coding", "Python function celsius_to_fahrenheit(c), please.", None,
     passes("assert abs(celsius_to_fahrenheit(100) - 212) < 1e-9 and abs(celsius_to_fahrenheit(-40) + 40) < 1e-9")),
    ("coding", "Can you write word_lengths(sentence) in Python returning a dict from each word to its length?", None,
     passes("assert word_lengths('to be or not') == {'to': 2, 'be': 2, 'or': 2, 'not': 3}")),
    ("coding", "Write a Python function that merges two sorted lists into one sorted list, named merge_sorted(a, b).", None,
     passes("assert merge_sorted([1, 4, 9], [2, 3, 10]) == [1, 2, 3, 4, 9, 10]")),
    ("genui", "Show me a card to book a table: a name field, a party size slider from 1 to 10, and a Reserve button.", None,
     shows("Reserve", components=("TextField", "Slider", "Button"))),
    ("genui", "Make a form for reporting a bug with a title, a severity choice (low, medium, high) and a Submit button.", None,
     shows("low", "medium", "high", "Submit", components=("TextField", "Button"))),
    ("genui", "Display today's stats as a card: steps 8,421, calories 512, sleep 7h 20m.", None, shows("8,421", "512", "7h 20m")),
    ("genui", "Build me a packing checklist with passport, charger, sunscreen and tickets.", None,
     shows("passport", "charger", "sunscreen", "tickets", components=("CheckBox",))),
    ("genui", "Show a product card for a Wireless Mouse at $24.99, in stock, with an Add to cart button.", None,
     shows("Wireless Mouse", "24.99", "Add to cart", components=("Button",))),
    ("genui", "Give me a settings panel with switches for dark mode and notifications.", None,
     shows("dark mode", "notifications", components=("CheckBox",))),
    ("genui", "I'd like a date picker to choose my check-in date, plus a Confirm button.", None,
     shows("check-in", "Confirm", components=("DateTimeInput", "Button"))),
    ("genui", "Create a poll card asking 'Pizza or tacos?' with the two options to pick from.", None,
     shows("pizza", "tacos", components=("MultipleChoice",))),
    ("agent", "What's the weather like in Lisbon right now? Celsius please.", KIT, calls("get_weather", city="Lisbon", unit="celsius")),
    ("agent", "Email ana@example.com that the meeting moved to 3pm.", KIT, calls("send_email", to="ana@example.com")),
    ("agent", "Start a 25 minute timer.", KIT, calls("set_timer", minutes=25)),
    ("agent", "How much is 120 US dollars in euros?", KIT, calls("convert_currency", amount=120, from_currency="USD", to_currency="EUR")),
    ("agent", "Where's my order A-7731?", KIT, calls("lookup_order", order_id="A-7731")),
    ("agent", "Put 'dentist' in my calendar on 2027-01-14 at 09:30.", KIT, calls("create_event", title="dentist", date="2027-01-14", time="09:30")),
    ("agent", "Check order B-1200 and then email its status to sam@example.com.", KIT, calls("lookup_order", order_id="B-1200")),
    ("chat", "Tell me a short joke about cats.", KIT, no_call),
    ("chat", "What does 'ephemeral' mean?", KIT, no_call),
]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--experience", type=Path, help="the experience file a started server records to")
    ap.add_argument("--url", help="drive this running server instead of starting one")
    ap.add_argument("--json", type=Path, required=True, help="what was asked, the route, the check and the feedback, per turn")
    ap.add_argument("--max-tokens", type=int, default=384)
    a = ap.parse_args()
    if not a.url and not a.experience:
        ap.error("give --experience FILE (a server is started recording to it) or --url")
    proc, url = None, a.url
    if not url:
        from macaronic.bench.serving import start_server

        a.experience.parent.mkdir(parents=True, exist_ok=True)
        proc, url = start_server(["--experience", str(a.experience)])
    client = openai.OpenAI(base_url=url + "/v1", api_key="x", max_retries=0, timeout=900)
    rows = []
    try:
        for i, (role, text, tools, check) in enumerate(CONVERSATIONS):
            for attempt in (1, 2):
                kw = {"tools": tools} if tools else {}
                t = time.monotonic()
                r = client.chat.completions.create(model="macaronic", messages=[{"role": "user", "content": text}],
                                                   max_tokens=a.max_tokens, **kw)
                msg, info = r.choices[0].message, r.model_extra.get("macaronic", {})
                routed = info.get("specialist")
                ok = routed == role and bool(check(msg.content or "", msg.tool_calls or []))
                fb = {"response_id": r.id, "rating": "up" if ok else "down"}
                if routed != role:
                    fb["expected_specialist"] = role
                resp = httpx.post(url + "/v1/feedback", json=fb, timeout=30)
                rows.append({"i": i, "attempt": attempt, "expected": role, "routed": routed, "reason": info.get("reason"),
                             "tools": bool(tools), "check": ok, "feedback": {k: v for k, v in fb.items() if k != "response_id"},
                             "linked": resp.status_code == 200 and resp.json().get("linked"), "seconds": round(time.monotonic() - t, 1)})
                print(f"{i + 1:2d}.{attempt} {role:6s} -> {str(routed):6s} {'pass' if ok else 'FAIL'} "
                      f"{rows[-1]['seconds']:6.1f}s  {text[:60]}", flush=True)
                if ok or routed != role:
                    break  # a wrong route is corrected, not regenerated
    finally:
        if proc is not None:
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
    first = [r for r in rows if r["attempt"] == 1]
    summary = {"conversations": len(CONVERSATIONS), "turns": len(rows),
               "routed_as_expected": sum(r["expected"] == r["routed"] for r in first),
               "passed_first_time": sum(r["check"] for r in first),
               "by_role": {role: {"n": sum(r["expected"] == role for r in first),
                                  "routed": sum(r["expected"] == role == r["routed"] for r in first),
                                  "passed": sum(r["check"] for r in first if r["expected"] == role)}
                           for role in ("chat", "coding", "genui", "agent")}}
    a.json.parent.mkdir(parents=True, exist_ok=True)
    a.json.write_text(json.dumps({"summary": summary, "rows": rows}, indent=1) + "\n")
    print(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
