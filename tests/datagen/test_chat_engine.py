"""The chat data engine: seeded and diverse prompts, verifiers that tell a followed instruction from
an ignored one, no phrase shared with the chat suite's held-out families, and the rejection-sampling
driver (writes a row per prompt, resumes without redoing any) on the small real base."""

from __future__ import annotations

import json
import re
from collections import Counter

import pytest

from macaronic.datagen import chat


@pytest.fixture(scope="module")
def stream():
    return chat.prompts(3000, seed=0)


def grams(text: str, n: int = 6) -> set:
    w = re.findall(r"[a-z0-9']+", text.lower())
    return {tuple(w[i:i + n]) for i in range(len(w) - n + 1)}


def test_prompts_are_deterministic_extendable_and_diverse(stream):
    from macaronic.suites.instructions import CHECKS

    assert chat.prompts(200, seed=0) == stream[:200]  # a longer run extends a shorter one
    assert [p["prompt"] for p in chat.prompts(200, seed=1)] != [p["prompt"] for p in stream[:200]]
    texts = [p["prompt"] for p in stream]
    assert len(set(texts)) > 0.9 * len(texts)
    assert len({p["id"] for p in stream}) == len(stream)
    cats = Counter(p["category"] for p in stream)
    assert set(cats) == {*chat.CATEGORIES, "identity"} and min(cats.values()) >= 100
    assert cats["identity"] == len(stream) // chat.IDENTITY_EVERY
    kinds = {name for p in stream for name, _ in p["checks"]}
    assert kinds == set(CHECKS) | set(chat.ENGINE_CHECKS)  # every instruction kind of the suite, and the engine's
    assert len({p["prompt"] for p in stream if p["category"] == "identity"}) >= 40
    assert all(p["checks"] for p in stream)


def test_every_non_identity_prompt_is_checked_for_harness_vocabulary(stream):
    for p in stream:
        names = [n for n, _ in p["checks"]]
        assert ("no_harness" in names) == ("no_refusal" in names) == (p["category"] != "identity")
        if p["category"] != "identity":
            assert not chat.HARNESS.search(p["prompt"]), p["prompt"]  # the check is never asked to allow a word


CASES = [  # (kind, args, a reply that follows it, one that does not)
    ("answer", {"value": "14", "given": ["2", "3", "20"]}, "3 x 2 = 6 and 20 - 6 = 14.\nSo the change is 14 dollars.",
     "The change is 14 dollars minus the tax, so 12."),
    ("answer", {"value": "60", "given": ["5", "12"]}, "So after 5 hours there are 60 boxes.", "So there are 17 boxes, not 60."),
    ("answer", {"value": "1200", "given": []}, "It packs 1,200 boxes.", "It packs 120 boxes."),
    ("answer", {"value": "Friday", "candidates": ["Monday", "Friday", "Saturday"]}, "Counting on from Monday, it will be Friday.", "Friday is close, but it is Saturday."),
    ("answer", {"value": "14:05", "given": ["9:40", "145"]}, "The film ends at 14:05.", "It ends at 14:50."),
    ("answer", {"value": "Chloe", "candidates": ["Ana", "Ben", "Chloe"]}, "Chloe is taller than nobody, so the shortest is Chloe.", "The shortest is Ana."),
    ("no_harness", {}, "<<Hiking the Alps: Peaks, Huts and Morning Light>>",
     "Hiking: A Journey Through the World of LoRA Adapters"),
    ("no_harness", {}, "A cat is a small, soft animal that purrs.",
     "I have four specialists: chat for conversation and coding for code. A cat purrs."),
    ("no_harness", {}, "Rain falls on the hills.", "As Macaronic, I can tell you that rain falls on the hills."),
    ("no_refusal", {}, "Jet lag is tiredness after crossing time zones.",
     "I'm sorry, but as a text-based AI I can't provide medical advice."),
    ("no_echo", {"texts": ["Use at least 2 commas."]}, "Batteries store energy, power phones, and start cars.",
     "In this scenario, it is essential to use at least 2 commas to separate items."),
    ("substance", {"min": 15}, "Friction is the force that resists two surfaces sliding past each other, which is why "
     "brakes stop a bike.", "* **friction**\n* **hope this helps!**"),
]


@pytest.mark.parametrize("kind,args,good,bad", CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_engine_checks_tell_a_followed_instruction_from_an_ignored_one(kind, args, good, bad):
    assert chat.check(kind, args, good) and not chat.check(kind, args, bad)


PASSAGE = ("The town of Barwen held its 12th annual kite festival last Sunday. Organisers said about 4000 visitors came, "
           "more than in any earlier year. Stalls lined the main square from early morning until late in the evening. "
           "Rain threatened in the afternoon, but the clouds cleared before the parade began. The mayor thanked the "
           "40 volunteers who cleaned the streets the next morning. Next year the committee hopes to add a second stage "
           "for young musicians.")


def test_summary_check_wants_a_short_reply_in_its_own_words():
    args = {"source": PASSAGE, "max_words": len(PASSAGE.split()) // 2}
    assert chat.check("summary", args, "Barwen's 12th kite festival drew a record 4000 visitors despite a threat of rain.")
    assert not chat.check("summary", args, PASSAGE)  # the text sent back word for word
    assert not chat.check("summary", args, "In short: the town of Barwen held its 12th annual kite festival last Sunday.")
    assert not chat.check("summary", args, "")


def test_verify_names_each_failed_kind_and_reuses_the_suite_checks():
    from macaronic.suites.instructions import CHECKS

    p = {"checks": [["bullets", {"n": 2}], ["lowercase", {}], ["exclude", {"words": ["very"]}], ["no_harness", {}]]}
    assert chat.verify(p, "- tides follow the moon\n- the sea rises twice a day") == []
    assert chat.verify(p, "- Tides follow the moon\n- the sea is very high twice a day\n- a LoRA") == \
        ["bullets", "lowercase", "exclude", "no_harness"]
    assert all(chat.check(k, {}, "x") == bool(CHECKS[k]("x", {})) for k in ("lowercase", "uppercase", "no_commas", "title"))


def test_generated_constraints_are_satisfiable_together():
    """For prompts whose checks are all of a few mechanical kinds, a reply built to follow them passes:
    the generator never pairs contradictory kinds (CONFLICTS)."""
    ok = 0
    for p in chat.prompts(600, seed=3):
        kinds = {n: a for n, a in p["checks"]}
        if p["category"] != "knowledge" or not set(kinds) <= {"bullets", "lowercase", "uppercase", "starts_with",
                                                              "no_commas", "exclude", "no_harness", "highlights",
                                                              "substance", "no_refusal", "no_echo"}:
            continue
        n = kinds.get("bullets", {}).get("n", 1)
        filler = "with enough plain words to count as a real answer to the question here"
        lines = [f"- point *number* {i} {filler}" for i in range(n)] if "bullets" in kinds else [f"a *plain* *reply* {filler}"]
        text = "\n".join(lines)
        if "starts_with" in kinds:
            text = kinds["starts_with"]["text"] + "\n" + text if "bullets" in kinds else kinds["starts_with"]["text"] + " " + text
        text = text.upper() if "uppercase" in kinds else text.lower() if "lowercase" in kinds else text
        assert chat.verify(p, text) == [], (p["prompt"], text)
        ok += 1
    assert ok >= 10


def test_a_reply_that_fails_only_mechanical_kinds_is_repaired_and_nothing_else_is():
    p = {"checks": [["uppercase", {}], ["bullets", {"n": 2}], ["no_harness", {}]]}
    assert chat.repair(p, "- Tides rise\n- Tides fall") == ("- TIDES RISE\n- TIDES FALL", ["uppercase"])
    assert chat.repair(p, "- Tides rise") is None  # fails bullets too
    assert chat.repair(p, "- TIDES RISE\n- TIDES FALL") is None  # nothing to repair
    q = {"checks": [["starts_with", {"text": "Great question"}], ["ends_with", {"text": "Cheers."}], ["lowercase", {}]]}
    assert chat.repair(q, "Tides follow the Moon.") == ("great question! tides follow the moon.\n\ncheers.",
                                                         ["starts_with", "ends_with", "lowercase"])
    assert chat.repair({"checks": [["quoted", {}]]}, "Tides rise.") == ('"Tides rise."', ["quoted"])
    assert chat.repair({"checks": [["quoted", {}], ["no_harness", {}]]}, "My LoRA adapter says hi.") is None


TIDES = ("Tides rise and fall twice a day. The Moon pulls the oceans, and the Sun helps. "
         "Spring tides are the strongest. Neap tides are weaker.")


@pytest.mark.parametrize("checks, expected", [
    ([["bullets", {"n": 3}]], "- Tides rise and fall twice a day.\n- The Moon pulls the oceans, and the Sun helps.\n"
                              "- Spring tides are the strongest."),
    ([["numbered", {"n": 2}], ["no_commas", {}]], "1. Tides rise and fall twice a day.\n"
                                                 "2. The Moon pulls the oceans and the Sun helps."),
    ([["sentences", {"n": 2}], ["question_end", {}]], "Tides rise and fall twice a day.\n\nWant me to go on?"),
    ([["words", {"max": 15}], ["title", {}]], "<<Tides Rise and Fall Twice>>\n\nTides rise and fall twice a day."),
])
def test_shapes_are_repaired_from_the_replys_own_sentences(checks, expected):
    fixed, kinds = chat.repair({"id": "x-1", "checks": checks}, TIDES)
    assert fixed == expected and kinds == [c for c, _ in checks]
    assert chat.verify({"checks": checks}, fixed) == []


def test_shapes_that_need_more_than_the_reply_has_are_not_repaired():
    assert chat.repair({"checks": [["bullets", {"n": 5}]]}, TIDES) is None  # four sentences, five bullets asked
    assert chat.repair({"checks": [["words", {"min": 80}]]}, TIDES) is None  # words cannot be added
    assert chat.repair({"checks": [["words", {"max": 3}]]}, TIDES) is None  # no first sentence fits
    assert chat.repair({"checks": [["bullets", {"n": 2}], ["include", {"words": ["Earth"]}]]}, TIDES) is None  # content
    two = chat.repair({"checks": [["paragraphs", {"n": 2}], ["highlights", {"min": 2}]]}, TIDES)[0]
    assert two.count("\n\n") == 1 and two.startswith("*Tides rise and fall twice a day*.")
    ps = chat.repair({"id": "x-1", "checks": [["postscript", {"marker": "P.S."}], ["question_end", {}]]}, TIDES)[0]
    assert ps.startswith(TIDES) and "\n\nP.S. " in ps and ps.endswith("?")


def test_a_cut_reply_is_kept_only_when_a_repair_keeps_its_finished_first_sentences():
    from macaronic.train.chat_rs import _repair

    two = {"id": "x-1", "checks": [["bullets", {"n": 2}]]}
    assert _repair(two, {"text": "A is one. B is two. C is thr", "failed": ["bullets", "complete"]}) == \
        ("- A is one.\n- B is two.", ["bullets", "complete"])
    assert _repair(two, {"text": "A is one. B is thr", "failed": ["bullets", "complete"]}) is None  # one finished
    loud = {"id": "x-1", "checks": [["uppercase", {}]]}
    assert _repair(loud, {"text": "A is one. B is thr", "failed": ["uppercase", "complete"]}) is None  # cut stays cut


def test_reselect_repairs_a_stored_greedy_reply_and_leaves_other_rows():
    from macaronic.train.chat_rs import _select, reselect

    p = {"id": "x-1", "category": "knowledge", "prompt": "q", "checks": [["bullets", {"n": 2}]]}
    row = _select(p, [{"k": 0, "text": "Tides.", "failed": ["bullets"], "tokens": 2}])
    assert row["reply"] is None and row["greedy"] == "Tides."  # not kept: the greedy reply is stored
    row = {**row, "greedy": TIDES}  # as a row sampled under an older rule, which could not lay out bullets
    cut = {**row, "checks": [["uppercase", {}]], "samples": [{"k": 0, "failed": ["uppercase", "complete"]}]}
    again = reselect([row, {**row, "greedy": None}, cut])
    assert again[0]["reply"].startswith("- Tides rise") and again[0]["repaired"] == ["bullets"]
    assert again[1]["reply"] is None and again[2]["reply"] is None  # no stored reply; a cut reply
    echo = {**p, "checks": [["no_harness", {}]], "reply": "**Format:** a list\n**Case:** capitals", "k": 0}
    assert reselect([echo])[0]["reply"] is None and reselect([echo])[0]["dropped"] == ["no_harness"]


def test_a_title_comes_from_a_name_the_reply_gives_or_its_first_words():
    assert chat._title('The mystery on the ferry is called "The Lost Ship".') == "The Lost Ship"
    assert chat._title("The mystery set on a ferry begins at dawn.") == "The Mystery Set on a Ferry"
    assert chat._title("Yes.") is None


def test_identity_answers_come_from_the_harness_and_only_when_asked():
    from macaronic.engine.bases import get
    from macaronic.harness import load_bundle

    b = load_bundle()
    ans = chat.identity_answer(b, "qwen2.5-coder-0.5b", "Who am I chatting with?")
    assert ans.startswith("I am Macaronic") and get("qwen2.5-coder-0.5b").identity in ans
    more = chat.identity_answer(b, "qwen2.5-coder-0.5b", "What are you good at?")
    assert all(r.description in more for r in b.roles)
    assert chat.identity_answer(b, "/some/model/dir", "Who are you?") == "I am Macaronic, a helpful assistant."
    assert not chat.check("no_harness", {}, ans)  # what an answer about anything else must not say
    ids = [p for p in chat.prompts(200, seed=0) if p["category"] == "identity"]
    assert ids and all(chat.verify(p, chat.identity_answer(b, None, p["prompt"])) == [] for p in ids)


def test_no_prompt_shares_a_phrase_or_a_prompt_with_the_chat_suite_held_out_families(stream):
    """The contract's chat suite dev and test families (every instance the generator can make) never
    appear in a generated prompt, nor six consecutive words of one."""
    from macaronic.engine.bases import BASES
    from macaronic.suites.chat import FAMILIES, make_task

    held = {make_task(f, i, s, b).prompt.lower() for f, (split, _) in FAMILIES.items() if split != "train"
            for i in range(60) for s in range(3) for b in BASES}
    held_grams = set().union(*(grams(h) for h in held))
    for p in stream:
        text = p["prompt"].lower()
        assert not grams(text) & held_grams, p["prompt"]
        assert not any(h in text for h in held), p["prompt"]


# ---- the rejection-sampling driver -----------------------------------------------------------

def test_select_keeps_the_first_passing_sample_greedy_first():
    from macaronic.train.chat_rs import _select

    p = {"id": "x-1", "category": "knowledge", "prompt": "q", "checks": []}
    s = [{"k": 0, "text": "a", "failed": ["words"], "tokens": 3}, {"k": 1, "text": "b", "failed": [], "tokens": 9},
         {"k": 2, "text": "c", "failed": [], "tokens": 2}]
    row = _select(p, s)
    assert (row["reply"], row["k"]) == ("b", 1) and all("text" not in x for x in row["samples"])
    assert _select(p, [s[0]])["reply"] is None
    up = {**p, "checks": [["uppercase", {}]]}
    row = _select(up, [{"k": 0, "text": "Loud", "failed": ["uppercase", "complete"], "tokens": 9},
                       {"k": 1, "text": "Loud and clear", "failed": ["uppercase"], "tokens": 4}])
    assert (row["reply"], row["k"], row["repaired"]) == ("LOUD AND CLEAR", 1, ["uppercase"])  # never a cut reply


def test_driver_on_the_small_base_writes_rows_and_resumes_without_redoing_them(real_llm, tmp_path, monkeypatch):
    from macaronic.train import chat_rs
    from macaronic.train.builders import GENERATORS, chat_engine_examples

    ps = [chat.prompt(i, 0) for i in (5, 6, chat.IDENTITY_EVERY // 2)]  # two sampled, one identity
    assert [p["category"] for p in ps][-1] == "identity" and "identity" not in [p["category"] for p in ps[:2]]
    out = tmp_path / "rs.jsonl"
    assert chat_rs.run(real_llm, ps[:2], out, 2, max_tokens=8, base="smollm2-135m-instruct") == 2
    rows = chat_rs.read(out)
    assert [r["id"] for r in rows] == [p["id"] for p in ps[:2]]
    assert all(len(r["samples"]) == 2 and r["base"] == "smollm2-135m-instruct" for r in rows)
    assert all("complete" in s["failed"] or s["tokens"] < 8 for r in rows for s in r["samples"])

    calls = []
    real_sample = chat_rs.sample
    monkeypatch.setattr(chat_rs, "sample", lambda llm, todo, *a, **k: calls.append([p["id"] for p in todo]) or real_sample(llm, todo, *a, **k))
    out.write_text(out.read_text() + '{"id": "cut mid-wri')  # a kill while writing: the broken line is ignored
    assert chat_rs.run(real_llm, ps, out, 2, max_tokens=8, base="smollm2-135m-instruct") == 1
    assert calls == [[ps[2]["id"]]]  # only the prompt not done yet
    rows = chat_rs.read(out)
    assert [r["id"] for r in rows] == [p["id"] for p in ps]
    assert rows[-1]["reply"].startswith("I am Macaronic") and "SmolLM2-135M" in rows[-1]["reply"]
    s = chat_rs.summary(rows)
    assert s["prompts"] == 3 and s["samples"] == 4 and s["kinds"]["complete"]["samples"] == 4

    # kept rows become examples under the head the chat adapter is served with: the chat instruction stays
    rows[0]["reply"], rows[0]["checks"] = "A reply that passed.", [["no_harness", {}]]  # today's checks re-run
    out.write_text("".join(json.dumps(r) + "\n" for r in rows))
    exs = chat_engine_examples(5, 0, path=out)
    assert len(exs) == 5 and {e.messages[-2]["content"] for e in exs} == {ps[0]["prompt"], ps[2]["prompt"]}
    assert all(e.role == "chat" and e.source.startswith("engine/chat/") for e in exs)
    from macaronic.harness import load_bundle
    from macaronic.prompts import first_turn, prompt_head

    b = load_bundle()
    head = prompt_head(b.served(["chat"]), "chat")
    assert all(list(e.messages[:-2]) == head for e in exs)
    assert head != prompt_head(b.served([]), "chat") or b.role("chat").without_adapter != "base"
    assert first_turn(b, "chat", ps[0]["prompt"]) == [*head, {"role": "user", "content": ps[0]["prompt"]}]  # what was sampled
    with pytest.raises(ValueError, match="sample-chat"):
        chat_engine_examples(3, 0, path=tmp_path / "none.jsonl")
    assert GENERATORS["chat_engine"] is chat_engine_examples


def test_a_reply_repeated_word_for_word_is_taught_not_drilled(tmp_path):
    from macaronic.train.builders import SAME_REPLY, chat_engine_examples

    same = [{"id": f"chat-engine-0-{i}", "category": "identity", "prompt": f"Who are you? ({i})", "reply": "I am X.",
             "checks": [], "samples": [], "k": None} for i in range(3 * SAME_REPLY)]
    other = [{**same[0], "id": "chat-engine-0-99", "prompt": "Hi?", "reply": "Hello."}]
    f = tmp_path / "rs.jsonl"
    f.write_text("".join(json.dumps(r) + "\n" for r in same + other))
    got = [e.messages[-1]["content"] for e in chat_engine_examples(None, 0, path=f)]
    assert got.count("I am X.") == SAME_REPLY and got.count("Hello.") == 1
