"""The hand-written instruction suite: its file loads, every check passes a reply that follows it
and fails one that does not."""

from __future__ import annotations

import pytest

from macaronic.suites.instructions import CHECKS, grade, load


@pytest.mark.parametrize("which", [1, 2])
def test_each_set_is_about_100_distinct_prompts_with_known_checks(which):
    prompts = load(which=which)
    assert len(prompts) >= (100 if which == 1 else 95)
    assert len({p["id"] for p in prompts}) == len(prompts) == len({p["prompt"] for p in prompts})
    assert all(p["checks"] for p in prompts)
    assert {c for p in prompts for c, _ in p["checks"]} == set(CHECKS)  # every check is used


def test_the_sets_share_no_id_or_prompt_and_an_unknown_set_is_refused():
    from macaronic.suites.instructions import load_every

    every = load_every()
    assert len({p["id"] for p in every}) == len(every) == len({p["prompt"] for p in every})
    with pytest.raises(ValueError, match="no instruction set 3"):
        load(which=3)


CASES = [  # (check, args, a reply that follows it, a reply that does not)
    ("words", {"max": 5}, "Plants turn light into sugar.", "Plants turn light, water and air into sugar."),
    ("words", {"min": 6, "max": 6}, "For sale: baby shoes, never worn.", "For sale: baby shoes."),
    ("sentences", {"n": 2}, "It rains. Then light bends.", "It rains. Light bends. Colours appear."),
    ("sentences", {"min": 2, "max": 3}, "I chat. I code.", "I can help."),
    ("bullets", {"n": 2}, "- one\n- two", "- one\n- two\n- three"),
    ("numbered", {"n": 3}, "1. a\n2. b\n3. c", "1. a\n2. b"),
    ("paragraphs", {"n": 2}, "First part.\n\nSecond part.", "Only one part."),
    ("lines", {"n": 2}, "roses are red\nviolets are blue", "roses are red"),
    ("lowercase", {}, "quiet rain on leaves", "Quiet rain on leaves"),
    ("uppercase", {}, "YOU CAN DO IT!", "You can do it!"),
    ("starts_with", {"text": "Absolutely"}, "Absolutely! Water keeps you alive.", "Water keeps you alive."),
    ("ends_with", {"text": "woof"}, "Dogs are loyal. woof", "woof. Dogs are loyal."),
    ("question_end", {}, "Bees pollinate crops. Did you know?", "Bees pollinate crops."),
    ("include", {"words": ["trust"]}, "A good friend earns your trust.", "A good friend is kind."),
    ("exclude", {"words": ["fur"]}, "A cat is soft and purrs.", "A cat has soft fur."),
    ("no_letter", {"letter": "z"}, "Golden light spreads.", "A hazy glow."),
    ("no_commas", {}, "Two lovers die young.", "Two lovers, sadly, die."),
    ("commas", {"min": 2}, "apple, cherry, strawberry", "apple and cherry"),
    ("json", {"keys": ["city"]}, '```json\n{"city": "Paris"}\n```', "The city is Paris."),
    ("title", {}, "<<Peaks and Valleys>>", "Peaks and Valleys"),
    ("quoted", {}, '"Tokyo"', "Tokyo"),
    ("postscript", {"marker": "P.S."}, "Thanks!\n\nP.S. The basil loved you.", "Thanks!"),
    ("placeholders", {"min": 2}, "Join us on [date] at [place].", "Join us on Friday at [place]."),
    ("highlights", {"min": 2}, "A *black hole* bends *light*.", "A *black hole* bends light."),
    ("one_word", {}, "Blue.", "Blue, I think."),
    ("sections", {"marker": "SECTION", "n": 2}, "SECTION 1\nWeather.\nSECTION 2\nClimate.", "Weather and climate."),
    ("line_prefixes", {"prefixes": ["Cat:", "Dog:"]}, "Cat: hi\nDog: hello", "Cat: hi\nhello"),
]


@pytest.mark.parametrize("name,args,good,bad", CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_each_check_tells_a_followed_instruction_from_an_ignored_one(name, args, good, bad):
    p = {"checks": [[name, args]]}
    assert grade(p, good)["passed"] and not grade(p, bad)["passed"]


def test_every_check_kind_has_a_case():
    assert {c[0] for c in CASES} == set(CHECKS)


def test_no_routing_or_training_text_shares_a_phrase_with_the_suite():
    """Both sets are evaluation only: no hand-written routing turn, routing example or chat training
    example (the chat data engine's prompts included, a few thousand of them over two seeds) repeats
    six consecutive words of one of its prompts (never train on what you evaluate)."""
    import re

    from macaronic.datagen.chat import prompts as chat_engine_prompts
    from macaronic.router.data import load_routing_data
    from macaronic.router.handwritten import load_handwritten
    from macaronic.suites.instructions import load_every

    def grams(text: str, n: int = 6) -> set:
        w = re.findall(r"[a-z0-9']+", text.lower())
        return {tuple(w[i:i + n]) for i in range(len(w) - n + 1)}

    suite = set().union(*(grams(p["prompt"]) for p in load_every()))
    texts = [m["content"] for e in load_handwritten() + load_routing_data("train") + load_routing_data("dev")
             for m in e["messages"] if isinstance(m.get("content"), str)]
    texts += [p["prompt"] for seed in (0, 1) for p in chat_engine_prompts(2500, seed)]
    from macaronic.train.chat_rs import DATA, read

    rs = sorted(DATA.parent.glob("chat_rs*.jsonl"))  # the prompts the chat adapters trained on, every round
    assert DATA in rs and len(rs) > 1
    texts += [r["prompt"] for f in rs for r in read(f)]
    shared = [t[:80] for t in texts if grams(t) & suite]
    assert not shared, shared
