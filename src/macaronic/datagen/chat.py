"""The chat data engine: generated prompts across knowledge, writing, summarising, reasoning and
formats, each carrying machine-checkable instructions, and the verifiers that decide whether a
reply followed them. Targets come from the base itself (`macaronic.train.chat_rs`: best of k by
these verifiers), so training moves the base toward replies that follow instructions without
replacing what it knows.

A prompt is a task from a generated bank (a concept to explain, a form and theme to write, a
generated passage to summarise, a word problem with a computed answer, a format task) plus 0-3
constraints of the instruction suite's kinds (counts, case, start/end phrases, include/exclude,
JSON keys, titles, placeholders, highlights, postscript, sections, ...), in one of several
phrasings and joins. The checks are the instruction suite's own (`suites.instructions.CHECKS`,
shared, not copied) plus the engine's own: `answer` (the computed answer in the last sentence),
`summary` (at most half the passage, no 10-word run copied), `substance` (enough words to be an
answer, not only its format), `no_echo` (no five words of an instruction repeated: talking about an
instruction is not following it), `no_refusal` (every prompt is benign) and `no_harness` (no
harness vocabulary: the assistant names itself only when asked). `repair` makes a reply that fails
only mechanical kinds (opening or closing phrase, quotes, case) follow them, keeping its words. One
prompt in twenty asks who the assistant is; its answer is written from the harness's own identity
text and role descriptions (`identity_answer`), not sampled. No prompt shares six consecutive words
with the hand-written instruction suite or a dev/test chat-suite prompt
(`tests/datagen/test_chat_engine.py`). Knows nothing about models or training.

    prompts(n, seed) -> list[dict]        {id, category, prompt, checks: [[kind, args], ...]}
    verify(prompt, reply) -> list[str]    the kinds a reply fails ([] = kept)
"""

from __future__ import annotations

import random
import re

from macaronic.suites.instructions import CHECKS as INSTRUCTION_CHECKS

IDENTITY_EVERY = 20  # one prompt in twenty asks who the assistant is

# ---- the topic bank ------------------------------------------------------------------------

CONCEPTS = {  # field -> noun phrases a small base knows something true about
    "science": ("ocean tides", "plate tectonics", "the greenhouse effect", "static electricity", "magnetism",
                "fermentation", "the water cycle in deserts", "lightning", "echoes", "rust on iron", "tree rings",
                "the speed of sound", "solar eclipses", "the seasons on Earth", "bird migration", "coral reefs",
                "the human heartbeat", "white blood cells", "antibiotics", "viruses", "dinosaur fossils",
                "the periodic table", "friction", "buoyancy", "refraction of light", "nuclear fusion in stars",
                "the northern lights", "earthquakes", "glaciers", "pollination", "camouflage in animals",
                "hibernation", "the moon's phases", "comets", "evaporation", "acids and bases"),
    "history": ("the printing press", "the Silk Road", "Roman aqueducts", "the Industrial Revolution",
                "the first moon landing", "ancient Egyptian pyramids", "the invention of the telephone",
                "the Vikings", "the Renaissance", "the Olympic Games in ancient Greece", "the Great Fire of London",
                "the transcontinental railroad", "the first airplane flight", "medieval castles",
                "the invention of paper", "the Ming dynasty", "the abolition of slavery", "the Berlin Wall"),
    "everyday": ("compound interest", "making a monthly budget", "composting kitchen scraps", "jet lag",
                 "caffeine", "handwashing", "a good night's sleep", "stretching before exercise", "sourdough starters",
                 "recycling plastic", "saving for retirement", "credit scores", "public libraries", "first aid for a small cut",
                 "learning a second language", "houseplants in low light", "ironing a shirt", "tipping customs"),
    "society": ("supply and demand", "democracy", "taxes", "inflation in shops", "volunteering", "the census",
                "trade between countries", "the jury system", "urban parks", "renewable energy", "minimum wage",
                "museums", "the postal service", "public transport"),
    "arts": ("jazz improvisation", "watercolour painting", "the sonnet", "film editing", "ballet", "origami",
             "photography composition", "the symphony orchestra", "graffiti art", "stand-up comedy", "pottery glazes",
             "the haiku form", "mosaics", "opera"),
    "technology": ("GPS navigation", "solar panels", "electric cars", "3D printing", "barcodes", "microwave ovens",
                   "noise-cancelling headphones", "touchscreens", "satellites", "email spam filters", "wind turbines",
                   "batteries", "fibre-optic cables", "QR codes"),
}
PAIRS = (("a virus", "a bacterium"), ("a comet", "an asteroid"), ("a lake", "a sea"), ("an alligator", "a crocodile"),
         ("a frog", "a toad"), ("baking soda", "baking powder"), ("a debit card", "a credit card"),
         ("a hurricane", "a tornado"), ("a moth", "a butterfly"), ("a democracy", "a monarchy"),
         ("a violin", "a viola"), ("a simile", "a metaphor"), ("a rabbit", "a hare"), ("renting", "buying a home"),
         ("tea", "coffee"), ("a museum", "a gallery"), ("a mountain", "a hill"), ("a star", "a planet"))
ASK = ("Explain {c} to a curious teenager.", "What should everyone know about {c}?", "Give me an overview of {c}.",
       "How would you describe {c} to a beginner?", "Tell me the key ideas behind {c}.",
       "I keep hearing about {c}. What is it, in plain words?", "What makes {c} important?",
       "Teach me something interesting about {c}.", "Can you break down {c} for me?",
       "My friend asked me about {c} and I had no idea. Help me out.", "What's the story behind {c}?",
       "Give a short explainer on {c}.")
COMPARE = ("How is {a} different from {b}?", "Compare {a} and {b}.", "What separates {a} from {b}?",
           "I always mix up {a} and {b}. How do I tell them apart?", "Contrast {a} with {b} for me.")

FORMS = ("a brief poem", "a limerick", "a diary entry", "a postcard message", "a product description",
         "a toast for a wedding", "a fable with a moral", "a news headline and opening paragraph", "a brief speech",
         "an opening paragraph for a novel", "a motivational note", "a song chorus", "a letter to a pen pal",
         "a travel blog introduction", "a restaurant review", "a radio advertisement", "a riddle", "a bedtime story",
         "a sonnet", "a social media post", "an acrostic poem", "a eulogy for a houseplant", "a museum placard",
         "a horoscope", "a weather report")
THEMES = ("a lighthouse keeper", "the first snow of the year", "a lost umbrella", "a city at dawn",
          "a grandmother's garden", "a robot learning to paint", "a night market", "an old bicycle",
          "a long train journey", "the smell of rain", "a stray dog that finds a home", "a broken clock",
          "a village bakery", "a hot-air balloon ride", "moving to a new country", "a forgotten library book",
          "a summer thunderstorm", "a chess tournament", "a treehouse", "the last day of school", "a mountain hut",
          "a jar of honey", "a penguin on holiday", "an abandoned amusement park", "a shy dragon", "a farmers' market",
          "a message in a bottle", "a kite festival", "a tiny apartment", "a retired astronaut")
WRITE = ("Write {f} about {t}.", "Could you compose {f} on {t}?", "I need {f} about {t}.",
         "Draft {f} inspired by {t}.", "Please create {f} featuring {t}.", "Come up with {f} on the theme of {t}.")

# ---- generated passages to summarise ---------------------------------------------------------

SYL = ("bar", "lin", "tor", "mes", "cal", "dun", "vek", "ros", "hal", "wen", "mar", "sto", "pel", "quin", "dor",
       "ash", "fen", "gil", "ham", "ly")
PASSAGES = {  # genre -> (opening, further sentences); {X} a generated place or firm name
    "festival": ("The town of {X} held its {n}th annual {thing} festival last {day}.",
                 ("Organisers said about {k} visitors came, more than in any earlier year.",
                  "Stalls lined the main square from early morning until late in the evening.",
                  "A local choir opened the event with songs that had been written for the occasion.",
                  "Rain threatened in the afternoon, but the clouds cleared before the parade began.",
                  "Children took part in a drawing contest, and the winning picture will hang in the town hall.",
                  "Several traders said their sales doubled compared with an ordinary weekend.",
                  "The mayor thanked the {m} volunteers who cleaned the streets the next morning.",
                  "Next year the committee hopes to add a second stage for young musicians.",
                  "Parking was the main complaint, and the council promised extra buses for the next edition.")),
    "company": ("{X} Ltd, a maker of {thing}, announced on {day} that it will open a new factory.",
                ("The plant will employ around {k} people once it is running at full speed.",
                 "Construction is expected to take {m} months and to start this spring.",
                 "The firm said demand for its products has grown steadily for three years.",
                 "Local officials welcomed the news, calling it a boost for the region.",
                 "Some residents worry about extra lorry traffic on narrow roads near the site.",
                 "The company plans to power part of the factory with rooftop solar panels.",
                 "Training courses for new staff will be run together with a nearby college.",
                 "Its chief executive said the investment shows confidence in the local workforce.",
                 "Shares in the company rose slightly after the announcement.")),
    "science": ("Researchers studying the {X} wetland have found a population of {thing} that had not been seen there for decades.",
                ("The team counted about {k} animals during a survey that lasted {m} weeks.",
                 "They believe cleaner water after a restoration project allowed the species to return.",
                 "Volunteers helped by recording sightings on their phones each evening.",
                 "The scientists now want to track how the animals move between ponds.",
                 "Funding for the next stage of the study has not yet been confirmed.",
                 "Local schools have been invited to visit the site and learn about the project.",
                 "Similar recoveries have been reported in two other wetlands in the region.",
                 "The findings will be published in a journal later this year.")),
    "sport": ("The {X} Rovers won the regional {thing} final on {day} after a tense match.",
              ("The score was level until the last few minutes, when a substitute made the difference.",
               "About {k} fans travelled to watch, filling the away section of the ground.",
               "The coach praised her players for staying calm under pressure.",
               "It is the club's first title in {m} years.",
               "The losing side had beaten the Rovers twice earlier in the season.",
               "Celebrations continued in the town centre late into the night.",
               "The captain said the win belonged to everyone who supported the team through a difficult year.",
               "The club will now enter the national competition in the autumn.")),
    "library": ("The public library in {X} reopened on {day} after a renovation that took {m} months.",
                ("The building now has a larger children's area and a quiet study room.",
                 "More than {k} people visited during the first weekend.",
                 "The old wooden shelves were repaired rather than replaced, to keep the building's character.",
                 "A new café on the ground floor is run by a local social enterprise.",
                 "Opening hours have been extended to include Sunday afternoons.",
                 "Staff said the most borrowed items so far are {thing}.",
                 "The renovation was paid for partly by a grant and partly by donations from residents.",
                 "Free workshops on using computers will start next month.")),
}
PASSAGE_THINGS = {"festival": ("kite", "cheese", "lantern", "harvest", "folk music", "street food", "flower"),
                  "company": ("bicycles", "kitchen tiles", "garden tools", "electric scooters", "wool blankets"),
                  "science": ("great crested newts", "otters", "natterjack toads", "water voles", "bitterns"),
                  "sport": ("hockey", "rugby", "basketball", "netball", "volleyball"),
                  "library": ("cookbooks", "graphic novels", "travel guides", "audiobooks")}
DAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
SUMMARISE = ("Summarise the following passage.\n\n{p}", "Here is a news item:\n\n{p}\n\nGive me the gist.",
             "TL;DR this for me:\n\n{p}", "Condense this report for a busy reader:\n\n{p}",
             "{p}\n\nWhat is the short version of the text above?", "Boil this down to its main points:\n\n{p}",
             "Read this and summarise it briefly.\n\n\"{p}\"")

# ---- reasoning: word problems with computed answers -----------------------------------------

NAMES = ("Ana", "Bilal", "Chloe", "Dmitri", "Esme", "Farid", "Greta", "Hugo", "Ines", "Jonas", "Keiko", "Luca",
         "Mina", "Nils", "Olu", "Priya", "Rosa", "Sami", "Tariq", "Yara")
ITEMS = ("notebooks", "apples", "pencils", "tickets", "stickers", "candles", "plant pots", "postcards")


def _change(r):
    n, p = r.randrange(2, 9), r.randrange(2, 12)
    bill = next(b for b in (20, 50, 100, 200) if b > n * p)
    name, item = r.choice(NAMES), r.choice(ITEMS)
    return f"{name} buys {n} {item} at {p} dollars each and pays with a {bill}-dollar note. How much change is due?", bill - n * p


def _pause(r):
    a, h = r.randrange(12, 60), r.randrange(5, 11)
    s = r.randrange(1, h - 2)
    return (f"A machine packs {a} boxes an hour. It runs for {h} hours but is stopped for repairs during {s} of "
            "those hours. How many boxes does it pack?"), a * (h - s)


def _sequence(r):
    start, step = r.randrange(1, 20), r.randrange(2, 9)
    seq = [start + step * i for i in range(5)]
    return f"What number comes next in this sequence: {', '.join(map(str, seq))}, ...?", start + step * 5


def _weekday(r):
    d, n = r.randrange(7), r.randrange(3, 40)
    return f"If today is {DAYS[d]}, what day of the week will it be in {n} days?", DAYS[(d + n) % 7]


def _order(r):
    a, b, c = r.sample(NAMES, 3)
    rel, most = r.choice((("taller", "shortest"), ("older", "youngest"), ("faster", "slowest")))
    return f"{a} is {rel} than {b}, and {b} is {rel} than {c}. Who is the {most} of the three?", c


def _ages(r):
    a, b = r.sample(NAMES, 2)
    x, y, z = r.randrange(2, 15), r.randrange(5, 40), r.randrange(2, 12)
    return f"{a} is {x} years older than {b}. {b} is {y} now. How old will {a} be in {z} years?", y + x + z


def _marbles(r):
    name = r.choice(NAMES)
    a, b = r.randrange(10, 60), r.randrange(5, 30)
    c = r.randrange(2, a + b - 1)
    return f"A jar holds {a} marbles. {name} adds {b} more and then gives away {c}. How many marbles are left in the jar?", a + b - c


def _film(r):
    h, m, d = r.randrange(9, 20), r.choice(range(0, 60, 5)), r.randrange(80, 170)
    end = h * 60 + m + d
    return (f"A film starts at {h}:{m:02d} and lasts {d} minutes. At what time does it end? Use the 24-hour clock."),\
        f"{end // 60}:{end % 60:02d}"


def _fence(r):
    w, l = r.randrange(3, 20), r.randrange(4, 30)
    return f"A rectangular garden is {w} metres wide and {l} metres long. How many metres of fence go all the way around it?", 2 * (w + l)


def _trip(r):
    v, t = r.choice((12, 15, 18, 20, 24)), r.randrange(2, 6)
    name = r.choice(NAMES)
    return f"{name} cycles at a steady {v} km per hour for {t} hours. How far does {name} travel, in kilometres?", v * t


def _share(r):
    k, each = r.randrange(3, 9), r.randrange(4, 15)
    name = r.choice(NAMES)
    return (f"{name} shares a bag of {k * each} sweets equally among {k} friends, keeping none. "
            "How many sweets does each friend get?"), each


PROBLEMS = (_change, _pause, _sequence, _weekday, _order, _ages, _marbles, _film, _fence, _trip, _share)
REASON = ("{q}", "{q} Think it through step by step.", "Puzzle: {q}", "{q} Explain your reasoning briefly.",
          "Quick question. {q}", "{q} Show your working, then state the result.")

# ---- format tasks (their own check is the format) -------------------------------------------

JSON_THINGS = (("a fictional hotel", ("name", "city", "stars")), ("a houseplant", ("name", "light", "water")),
               ("an invented planet", ("name", "position", "moons")),
               ("a painting you imagine", ("title", "artist", "year")), ("a board game you invent", ("name", "players", "minutes")),
               ("a simple recipe", ("dish", "ingredients", "minutes")), ("a dog breed", ("breed", "size", "temperament")),
               ("a city you would like to visit", ("city", "country", "reason")),
               ("a musical instrument", ("instrument", "family", "range")), ("a made-up superhero", ("alias", "power", "weakness")),
               ("an imaginary river", ("river", "continent", "length_km")), ("a healthy breakfast", ("main", "side", "drink")))
JSON_ASK = ("Describe {t} in JSON: one object holding the keys {k}. Return only the JSON.",
            "Give me {t} in JSON form, using exactly these keys: {k}. No extra text.",
            "Output a single JSON object for {t}; it needs the keys {k}.")
DIALOGUE = (("Customer", "Baker"), ("Teacher", "Student"), ("Pilot", "Tower"), ("Owl", "Mouse"),
            ("Captain", "Sailor"), ("Tourist", "Guide"), ("Knight", "Dragon"), ("Doctor", "Patient"))
DIALOGUE_ASK = ("Write a short exchange between a {a} and a {b}, {n} lines long. Start every line with '{A}:' or '{B}:'.",
                "Script a {n}-line conversation: each line begins with '{A}:' or '{B}:' (a {a} and a {b} talking).")
ONE_WORD = {"what colour do you get by mixing blue and yellow": "green", "which planet is known as the red planet": "Mars",
            "what is frozen water called": "ice", "which animal is famous for its black and white stripes": "zebra",
            "which gas do people need to breathe": "oxygen", "which season comes after winter": "spring",
            "what do bees make": "honey", "what is a baby cat called": "kitten",
            "which metal is liquid at room temperature": "mercury", "which bird is a symbol of peace": "dove",
            "what is the opposite of 'noisy'": "quiet", "which organ pumps blood around the body": "heart",
            "what is the closest star to Earth": "Sun", "how many legs does a spider have": "eight"}
ONE_WORD_ASK = ("In a single word: {q}?", "{Q}? Just one word, please.", "One-word reply only. {Q}?")
TEMPLATE_DOCS = ("a job offer letter", "a rental listing", "a meeting agenda", "an event flyer", "a school permission slip",
                 "a lost-pet poster", "a wedding invitation", "an out-of-office reply", "a receipt", "a reference letter")
TEMPLATE_ASK = ("Draft {d} as a fill-in template with at least {n} blanks in square brackets, like [name].",
                "Make a reusable template for {d}; mark at least {n} slots to fill with square brackets such as [date].")
TITLE_ASK = ("Suggest a catchy title for {t}. Put it between << and >>.", "Name {t} and wrap the name in << >>.")
TITLE_THINGS = ("a podcast about gardening", "a documentary about deep-sea fish", "a children's book about a brave snail",
                "a cookbook of soups", "a travel vlog across Iceland", "an album of piano music", "a board game about trains",
                "a mystery set on a ferry", "a workshop on public speaking", "a photo exhibition of old shopfronts")

# ---- constraints ---------------------------------------------------------------------------

NUM = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight")
START = {"Great question": "! ", "Sure thing": "! ", "In short": ": ", "Here goes": ": ", "Let me explain": ": ",
         "To begin": ": ", "Picture this": ": ", "Quick answer": ": ", "Good news": ": ", "Fun fact": ": ",
         "Short version": ": ", "The gist": ": "}  # phrase -> how it joins a reply it is put before
END = ("That is all.", "Hope this helps!", "Thanks for reading.", "Stay curious.", "The end.", "Over and out.",
       "Enjoy!", "Cheers.")
INCLUDE = ("because", "example", "important", "people", "simple", "history", "surprising", "today", "everyday", "world")
EXCLUDE = ("very", "really", "thing", "things", "just", "basically", "also", "many", "always", "actually")
LETTERS = ("z", "q", "x", "j")
MARKERS = ("SECTION", "PART")


def _n(r, lo, hi):
    k = r.randrange(lo, hi + 1)
    return k, (str(k) if r.random() < 0.5 else NUM[k])


def _c_words_max(r, ctx):
    k = r.choice((30, 40, 50, 60, 80, 100))
    return "words", {"max": k}, r.choice((f"Keep it to {k} words or fewer.", f"Use no more than {k} words.",
                                          f"Stay within {k} words.", f"Limit yourself to {k} words at most."))


def _c_words_min(r, ctx):
    k = r.choice((50, 60, 80, 100, 120))
    return "words", {"min": k}, r.choice((f"Write {k} words or more.", f"Make it at least {k} words long.",
                                          f"The reply should run to no fewer than {k} words."))


def _c_sentences(r, ctx):
    k, w = _n(r, 1, 5)
    s = "sentence" if k == 1 else "sentences"
    return "sentences", {"n": k}, r.choice((f"Use exactly {w} {s}.", f"Your reply must be {w} {s} long, no more, no fewer.",
                                             f"Answer in precisely {w} {s}."))


def _c_bullets(r, ctx):
    k, w = _n(r, 2, 6)
    mark = r.choice(("- ", "* "))
    return "bullets", {"n": k}, r.choice((f"Format the reply as {w} bullet points, each beginning with '{mark.strip()}'.",
                                           f"Give {w} bullets marked with '{mark.strip()}' and nothing else.",
                                           f"Lay it out as exactly {w} '{mark.strip()}' bullets."))


def _c_numbered(r, ctx):
    k, w = _n(r, 2, 7)
    return "numbered", {"n": k}, r.choice((f"Present it as {w} numbered items.",
                                            f"Number your points from 1 to {k}.", f"Use {w} numbered points (1., 2., ...)."))


def _c_paragraphs(r, ctx):
    k, w = _n(r, 2, 4)
    return "paragraphs", {"n": k}, r.choice((f"Split it into {w} paragraphs with a blank line between them.",
                                              f"Organise the reply as {w} paragraphs separated by empty lines."))


def _c_lines(r, ctx):
    k, w = _n(r, 2, 6)
    return "lines", {"n": k}, r.choice((f"It must be {w} lines long, with no blank lines.", f"Write it in exactly {w} lines."))


def _c_sections(r, ctx):
    k, m = r.randrange(2, 4), r.choice(MARKERS)
    return "sections", {"marker": m, "n": k}, r.choice((f"Divide the reply into {k} parts headed {m} 1 to {m} {k}.",
                                                         f"Use {k} headings: {', '.join(f'{m} {i}' for i in range(1, k + 1))}."))


def _c_lower(r, ctx):
    return "lowercase", {}, r.choice(("Write everything in lowercase.", "No capital letters anywhere in the reply.",
                                      "keep the entire reply lowercase, even names."))


def _c_upper(r, ctx):
    return "uppercase", {}, r.choice(("Reply entirely in capital letters.", "Use ALL CAPS for the whole reply.",
                                      "Every letter of the reply should be uppercase."))


def _c_start(r, ctx):
    p = r.choice(sorted(START))
    return "starts_with", {"text": p}, r.choice((f"Begin your reply with '{p}'.", f"Open with the words '{p}'.",
                                                 f"The first words of the reply must be '{p}'."))


def _c_end(r, ctx):
    p = r.choice(END)
    return "ends_with", {"text": p}, r.choice((f"Finish with the exact words '{p}'", f"Close the reply with '{p}'",
                                               f"The very last words should be '{p}'"))


def _c_question(r, ctx):
    return "question_end", {}, r.choice(("Finish with a question for me.", "Make the final sentence a question.",
                                         "Close by asking me something."))


def _c_include(r, ctx):
    w = r.choice(ctx.get("keywords") or INCLUDE) if r.random() < 0.5 else r.choice(INCLUDE)
    return "include", {"words": [w]}, r.choice((f"Use the word '{w}' at least once.", f"Be sure to mention '{w}'.",
                                                 f"Work the word '{w}' into the reply."))


def _c_exclude(r, ctx):
    w = r.choice([x for x in EXCLUDE if not re.search(rf"\b{x}\b", ctx["task"], re.I)] or ["basically"])
    return "exclude", {"words": [w]}, r.choice((f"Avoid the word '{w}'.", f"Do not say '{w}' anywhere.",
                                                 f"Never use the word '{w}'."))


def _c_no_letter(r, ctx):
    opts = [x for x in LETTERS if x not in ctx["task"].lower() + " ".join(ctx["said"]).lower()]
    if not opts:
        return None
    x = r.choice(opts)
    return "no_letter", {"letter": x}, r.choice((f"Do not use the letter '{x}' anywhere.", f"No word may contain the letter '{x}'."))


def _c_no_commas(r, ctx):
    return "no_commas", {}, r.choice(("Don't use any commas.", "Write without a single comma.", "Leave out commas entirely."))


def _c_commas(r, ctx):
    k = r.randrange(2, 5)
    return "commas", {"min": k}, r.choice((f"Use at least {k} commas.", f"Include {k} or more commas."))


def _c_title(r, ctx):
    return "title", {}, r.choice(("Put a title at the top inside << and >>.", "Head the reply with a title between << and >>.",
                                  "Add a title enclosed in double angle brackets."))


def _c_quoted(r, ctx):
    return "quoted", {}, r.choice(("Enclose the whole reply in double quotation marks.",
                                   "Put your entire reply between a pair of double quotes."))


def _c_postscript(r, ctx):
    m = r.choice(("P.S.", "P.P.S."))
    return "postscript", {"marker": m}, r.choice((f"After the main text add a postscript that begins with '{m}'.",
                                                  f"Finish with a postscript line opening with {m}"))


def _c_placeholders(r, ctx):
    k, w = _n(r, 1, 3)
    return "placeholders", {"min": k}, r.choice((f"Include at least {w} placeholder(s) in square brackets, like [name].",
                                                  f"Leave {w} or more blanks to fill in, written as [placeholder]."))


def _c_highlights(r, ctx):
    k, w = _n(r, 1, 3)
    return "highlights", {"min": k}, r.choice((f"Emphasise at least {w} phrase(s) by putting single asterisks around them.",
                                                f"Mark {w} or more key terms in italics, one asterisk on each side."))


# kind -> (maker, group): one constraint per group, except "vocab" (include and exclude may meet)
CONSTRAINTS = {
    "words_max": (_c_words_max, "length"), "words_min": (_c_words_min, "length"), "sentences": (_c_sentences, "length"),
    "bullets": (_c_bullets, "layout"), "numbered": (_c_numbered, "layout"), "paragraphs": (_c_paragraphs, "layout"),
    "lines": (_c_lines, "layout"), "sections": (_c_sections, "layout"),
    "lowercase": (_c_lower, "case"), "uppercase": (_c_upper, "case"),
    "starts_with": (_c_start, "start"), "ends_with": (_c_end, "end"), "question_end": (_c_question, "end"),
    "postscript": (_c_postscript, "end"), "quoted": (_c_quoted, "start"),
    "include": (_c_include, "vocab"), "exclude": (_c_exclude, "vocab"), "no_letter": (_c_no_letter, "letters"),
    "no_commas": (_c_no_commas, "commas"), "commas": (_c_commas, "commas"),
    "title": (_c_title, "deco"), "placeholders": (_c_placeholders, "deco"), "highlights": (_c_highlights, "deco"),
}
CONFLICTS = {  # pairs that cannot both hold, or that a reader would find contradictory
    frozenset(p) for p in (("sentences", "bullets"), ("sentences", "numbered"), ("sentences", "lines"),
                           ("sentences", "sections"), ("lowercase", "postscript"), ("lowercase", "sections"),
                           ("lowercase", "title"), ("quoted", "ends_with"), ("quoted", "question_end"),
                           ("quoted", "postscript"), ("quoted", "title"), ("words_min", "lines"),
                           ("sentences", "paragraphs"), ("uppercase", "highlights"), ("lines", "title"),
                           ("lines", "postscript"), ("paragraphs", "title"), ("paragraphs", "postscript"),
                           ("sentences", "postscript"))
}
ALLOWED = {  # category -> the constraint kinds that make sense on its tasks
    "knowledge": tuple(CONSTRAINTS),
    "writing": tuple(CONSTRAINTS),
    "summarise": ("sentences", "bullets", "numbered", "lowercase", "uppercase", "starts_with", "ends_with", "include",
                  "exclude", "no_commas", "title", "highlights", "no_letter", "question_end"),
    "reasoning": ("words_max", "starts_with", "no_commas", "lowercase", "exclude", "highlights", "title"),
    # format tasks, by kind: what their own check leaves room for
    "json": (), "one_word": ("lowercase", "uppercase"), "title": ("uppercase", "exclude"),
    "dialogue": ("include", "exclude", "no_commas"),
    "template": ("ends_with", "include", "uppercase", "no_commas", "title"),
}


def _constraints(r: random.Random, category: str, ctx: dict) -> list[tuple[str, dict, str]]:
    want = r.choices((1, 2, 3), (0.5, 0.35, 0.15))[0] if category in ("knowledge", "writing") else \
        r.choice((0, 1, 1, 2)) if category in ("summarise", "reasoning") else r.choice((0, 1))
    chosen, groups = [], set()
    for kind in r.sample(ALLOWED[category], len(ALLOWED[category])):
        group = CONSTRAINTS[kind][1]
        if len(chosen) == want:
            break
        if (group in groups and group != "vocab") or any(frozenset((kind, c)) in CONFLICTS for c in chosen):
            continue
        chosen.append(kind)
        groups.add(group)
    out = []
    for kind in sorted(chosen, key=lambda k: k == "no_letter"):  # the letter last: no chosen phrase may hold it
        made = CONSTRAINTS[kind][0](r, {**ctx, "said": [t for _, _, t in out]})
        if made is not None:
            out.append(made)
    return out


def _join(r: random.Random, task: str, texts: list[str]) -> str:
    if not texts:
        return task
    style = r.random()
    if style < 0.55 or "\n" in task:
        return task + ("\n\n" if "\n" in task else " ") + " ".join(texts)
    if style < 0.7:
        return " ".join(texts) + " " + task
    if style < 0.85:
        return task + "\n\nRequirements:\n" + "\n".join(f"- {t}" for t in texts)
    return f"{task} ({'; '.join(t.rstrip('.') for t in texts)})"


# ---- tasks ---------------------------------------------------------------------------------

def _name(r: random.Random) -> str:
    return "".join(r.sample(SYL, 2)).capitalize()


def passage(r: random.Random) -> tuple[str, str]:
    """A generated passage of 6-10 sentences and the name it is about."""
    genre = r.choice(sorted(PASSAGES))
    opening, rest = PASSAGES[genre]
    x = _name(r)
    fill = {"X": x, "n": r.randrange(3, 40), "thing": r.choice(PASSAGE_THINGS[genre]), "day": r.choice(DAYS),
            "k": r.choice((300, 850, 1200, 2500, 4000, 12000)), "m": r.randrange(4, 30)}
    body = [opening] + r.sample(rest, r.randrange(5, min(9, len(rest)) + 1))
    return " ".join(s.format(**fill) for s in body), x


def _task(r: random.Random, category: str) -> tuple[str, list, dict]:
    """(task text, the task's own checks, context for constraints)."""
    if category == "knowledge":
        field = r.choice(sorted(CONCEPTS))
        if r.random() < 0.2:
            a, b = r.choice(PAIRS)
            text = r.choice(COMPARE).format(a=a, b=b)
            return text, [], {"task": text, "keywords": [a.split()[-1], b.split()[-1]]}
        c = r.choice(CONCEPTS[field])
        text = r.choice(ASK).format(c=c)
        text = text[0].upper() + text[1:]
        return text, [], {"task": text, "keywords": [w for w in c.split() if len(w) > 4][-1:]}
    if category == "writing":
        f, t = r.choice(FORMS), r.choice(THEMES)
        text = r.choice(WRITE).format(f=f, t=t)
        return text, [], {"task": text, "keywords": [w for w in t.split() if len(w) > 4][-1:]}
    if category == "summarise":
        p, x = passage(r)
        n = len(re.findall(r"\S+", p))
        text = r.choice(SUMMARISE).format(p=p)
        return text, [["summary", {"source": p, "max_words": n // 2}], ["include", {"words": [x]}]], {"task": text, "keywords": [x]}
    if category == "reasoning":
        q, a = r.choice(PROBLEMS)(r)
        text = r.choice(REASON).format(q=q)
        if isinstance(a, int) or ":" in a:
            args = {"value": str(a), "given": sorted(set(re.findall(r"\d+(?::\d\d)?", q)))}
        else:
            pool = DAYS if a in DAYS else [x for x in NAMES if re.search(rf"\b{x}\b", q)]  # every day, or the names asked about
            args = {"value": a, "candidates": sorted(pool)}
        return text, [["answer", args]], {"task": text}
    kind = r.choice(("json", "dialogue", "one_word", "template", "title"))  # formats
    if kind == "json":
        t, keys = r.choice(JSON_THINGS)
        text = r.choice(JSON_ASK).format(t=t, k=", ".join(f'"{k}"' for k in keys))
        return text, [["json", {"keys": list(keys)}]], {"task": text, "format": "json"}
    if kind == "dialogue":
        a, b = r.choice(DIALOGUE)
        n = r.randrange(4, 9)
        text = r.choice(DIALOGUE_ASK).format(a=a.lower(), b=b.lower(), A=a, B=b, n=n)
        return text, [["lines", {"n": n}], ["line_prefixes", {"prefixes": [f"{a}:", f"{b}:"]}]], {"task": text, "format": "dialogue"}
    if kind == "one_word":
        q = r.choice(sorted(ONE_WORD))
        text = r.choice(ONE_WORD_ASK).format(q=q, Q=q[0].upper() + q[1:])
        return text, [["one_word", {}], ["include", {"words": [ONE_WORD[q]]}]], {"task": text, "format": "one_word"}
    if kind == "template":
        k = r.randrange(2, 5)
        text = r.choice(TEMPLATE_ASK).format(d=r.choice(TEMPLATE_DOCS), n=k)
        return text, [["placeholders", {"min": k}]], {"task": text, "format": "template"}
    text = r.choice(TITLE_ASK).format(t=r.choice(TITLE_THINGS))
    return text, [["title", {}]], {"task": text, "format": "title"}


CATEGORIES = ("knowledge", "writing", "summarise", "reasoning", "formats")
WEIGHTS = (0.3, 0.25, 0.15, 0.15, 0.15)

IDENTITY_OPEN = ("", "", "Hi! ", "Hello. ", "Hey there, ", "Quick question: ", "Sorry to ask, but ")
IDENTITY_ASK = ("Who am I chatting with?", "What should I call you?", "Are you a person or a program?",
                "Tell me a bit about yourself.", "What kind of assistant are you?", "Who's this?",
                "What things can you help me with?", "Before we start: what are you, exactly?",
                "Do you have a name?", "What are you good at?", "What sort of help can you give?",
                "Introduce yourself briefly, please.", "Is this a bot?", "What is your name?",
                "Which assistant is this?", "How can you help me?")


def prompt(i: int, seed: int = 0, category: str | None = None) -> dict:
    """Prompt `i` of the seeded stream (depends only on seed and i, so a longer run extends a shorter one);
    `category` (one of CATEGORIES) replaces the drawn category: more prompts of one kind."""
    r = random.Random(f"chat-engine:{seed}:{i}")
    pid = f"chat-engine-{seed}-{i}"
    if i % IDENTITY_EVERY == IDENTITY_EVERY // 2:
        o, q = r.choice(IDENTITY_OPEN), r.choice(IDENTITY_ASK)
        text = o + (q[0].lower() + q[1:] if o.endswith((", ", ": ", "but ")) else q)
        return {"id": pid, "category": "identity", "prompt": text, "checks": [["include", {"words": ["Macaronic"]}]]}
    drawn = r.choices(CATEGORIES, WEIGHTS)[0]  # drawn either way: the stream stays the same without `category`
    category = category or drawn
    task, checks, ctx = _task(r, category)
    extra = _constraints(r, ctx.get("format", category), ctx)
    text = _join(r, task, [t for _, _, t in extra])
    if any(n == "uppercase" for n, _, _ in extra) and "\n" not in text and r.random() < 0.3:
        text = text.upper()  # the way people often ask for capitals
    checks = checks + [[n, a] for n, a, _ in extra] + [["no_harness", {}], ["no_refusal", {}]]
    if extra:  # "In this scenario, it is essential to use at least 2 commas" follows no instruction
        checks.append(["no_echo", {"texts": [t for _, _, t in extra]}])
    if category in SUBSTANCE:  # a reply that only performs the format ("* **friction**") is no answer
        checks.append(["substance", {"min": SUBSTANCE[category]}])
    return {"id": pid, "category": category, "prompt": text, "checks": checks}


def prompts(n: int, seed: int = 0) -> list[dict]:
    return [prompt(i, seed) for i in range(n)]


# ---- verifiers -----------------------------------------------------------------------------

HARNESS = re.compile(r"\b(lora|adapters?|specialists?|macaronic|harness(es)?|genui|a2ui|qwen|smollm\w*|mixture[- ]of[- ]lora)\b", re.I)
# The served chat instruction's own words turned into labelled fields ("**Case:** all capitals"): a
# reply about its instructions instead of one that follows them.
META = re.compile(r"^\W*(format|case|wording|length|tone|instructions?)\W*:", re.I | re.M)


def _plain_words(t: str) -> list[str]:
    return re.findall(r"[a-z0-9']+", t.lower())


def _answer(t: str, a: dict) -> bool:
    """The computed answer is in the reply's last sentence; every other number there was given in the
    question (numbers read without thousands commas), and of the candidate words (days, names) the
    answer is the last one named."""
    lines = [x for x in t.strip().splitlines() if x.strip()]
    if not lines:
        return False
    last = re.split(r"(?<=[.!?])\s+(?=\S)", re.sub(r"(?<=\d),(?=\d{3})", "", lines[-1].strip()))
    tail = last[-1] if len(last[-1]) > 12 or len(last) == 1 else " ".join(last[-2:])
    if re.search(r"(?<![\w.:])" + re.escape(a["value"]) + r"(?![\w:])", tail, re.I) is None:
        return False
    if a.get("candidates"):
        named = re.findall(r"\b(" + "|".join(map(re.escape, a["candidates"])) + r")\b", tail, re.I)
        return named[-1].lower() == a["value"].lower()
    return set(re.findall(r"\d+(?::\d\d)?", tail)) <= {a["value"], *a.get("given", ())}


def _summary(t: str, a: dict, run: int = 10) -> bool:
    """At most `max_words` words, and no run of `run` words copied from the source."""
    if not INSTRUCTION_CHECKS["words"](t, {"min": 1, "max": a["max_words"]}):
        return False
    src, out = _plain_words(a["source"]), _plain_words(t)
    grams = {tuple(src[i:i + run]) for i in range(len(src) - run + 1)}
    return not any(tuple(out[i:i + run]) in grams for i in range(len(out) - run + 1))


# Kinds a reply can be made to follow on its own words: an opening or closing phrase, quotes, case
# (added around the words), and the shapes a reply's sentences can be put in (bullets, a numbered
# list, paragraphs, a count of sentences, a word limit, highlights, a title, a postscript, a closing
# question, no commas). Content kinds (answers, summaries, words to include) are never repaired.
REPAIRABLE = ("starts_with", "ends_with", "quoted", "uppercase", "lowercase", "bullets", "numbered", "paragraphs",
              "sentences", "words", "highlights", "title", "postscript", "question_end", "no_commas")
CLOSING_QUESTIONS = ("Would you like more detail on any part?", "Does that help?", "Shall I add an example?",
                     "Is there anything you would like me to expand on?", "Want me to go on?")
POSTSCRIPTS = ("Feel free to ask a follow-up question.", "I hope this is useful.", "Ask me if anything is unclear.",
               "There is always more to learn about this.")


def _split_sentences(t: str) -> list[str]:
    """The reply's sentences, list markers and line breaks dropped (the instruction suite's split at
    end punctuation, without its abbreviation rule: every repair is verified by the suite's checks)."""
    flat = " ".join(re.sub(r"^\s*(?:[-*•]|\d+[.)])\s+", "", x).strip() for x in t.strip().splitlines() if x.strip())
    return [s.strip() for s in re.split(r"(?<=[.!?])[\"”')\]]*\s+", flat) if s.strip()]


def _list_items(t: str) -> list[str]:
    """A reply's list items (bullets or numbers) when it has them, else its sentences."""
    items = [m.group(1).strip() for x in t.strip().splitlines()
             if (m := re.match(r"\s*(?:[-*•]|\d+[.)])\s+(.+)", x))]
    return items if len(items) >= 2 else _split_sentences(t)


def _shape(args: dict, failed: list[str], t: str) -> str | None:
    """The structural repairs: the reply's own sentences (or items) cut and laid out as asked."""
    if "bullets" in failed or "numbered" in failed:
        kind = "bullets" if "bullets" in failed else "numbered"
        items = _list_items(t)
        n = args[kind]["n"]
        if len(items) < n:
            return None
        t = "\n".join((f"- {x}" if kind == "bullets" else f"{i + 1}. {x}") for i, x in enumerate(items[:n]))
    if "paragraphs" in failed:
        n, sents = args["paragraphs"]["n"], _split_sentences(t)
        if len(sents) < n:
            return None
        cuts = [round(i * len(sents) / n) for i in range(n + 1)]
        t = "\n\n".join(" ".join(sents[a:b]) for a, b in zip(cuts, cuts[1:]))
    if "sentences" in failed:
        a, sents = args["sentences"], _split_sentences(t)
        keep = a.get("n", a.get("max"))
        if keep is not None and "question_end" in failed and "postscript" not in failed:
            keep -= 1  # the closing question is the last sentence
        if keep is None or keep < 1 or len(sents) < max(keep, a.get("min", 0), 1):
            return None
        t = " ".join(sents[:keep])
    if "words" in failed:
        hi, sents, out = args["words"].get("max"), _split_sentences(t), []
        if hi is None:
            return None
        for x in sents:
            if not INSTRUCTION_CHECKS["words"](" ".join(out + [x]), {"max": hi}):
                break
            out.append(x)
        if not out:
            return None
        t = " ".join(out)
    return t


SMALL = {"a", "an", "the", "of", "on", "in", "at", "to", "for", "and", "or", "is", "are", "was", "with", "by", "as"}


def _title(t: str) -> str | None:
    """A title from the reply's own words: a quoted name of two to eight words it gives, else the
    first words of its first sentence (at most six, not ending on a small word), in title case."""
    if m := re.search(r"[\"“]([A-Z][^\"”\n]{3,60})[\"”]", t):
        if 2 <= len(m.group(1).split()) <= 8:
            return m.group(1).strip(" .,!?")
    sents = _split_sentences(t)
    words = re.findall(r"[A-Za-z'’-]+", sents[0] if sents else t)[:6]
    while words and words[-1].lower() in SMALL:
        words.pop()
    if len(words) < 2:
        return None
    return " ".join(w if i and w.lower() in SMALL else w[:1].upper() + w[1:] for i, w in enumerate(words))


def repair(p: dict, reply: str) -> tuple[str, list[str]] | None:
    """`reply` made to follow `p` when all it fails are mechanical kinds (`REPAIRABLE`), with the
    kinds repaired; None otherwise. The words stay the base's own, cut or laid out: a small base
    rarely writes a whole reply in capitals, in quotes or in exactly three bullets, so sampling
    alone seldom yields one, and the adapter could not learn what its data never shows."""
    failed = verify(p, reply)
    if not failed or not set(failed) <= set(REPAIRABLE):
        return None
    args, t = {n: a for n, a in p["checks"]}, reply.strip()
    pick = sum(map(ord, p.get("id", p.get("prompt", ""))))  # a fixed choice per prompt, no rng
    t = _shape(args, failed, t)
    if t is None:
        return None
    if "highlights" in failed:
        m = args["highlights"]["min"]
        sents = [s for s in re.split(r"(?<=[.!?])\s+", t) if re.search(r"[A-Za-z]", s)]
        if len(sents) < m:
            return None
        for s in sents[:m]:
            body = s.rstrip(".!?:;")
            if "*" in body or not body.strip():
                return None
            t = t.replace(s, f"*{body}*{s[len(body):]}", 1)
    if "no_commas" in failed:
        t = re.sub(r"(\d),(\d{3})", r"\1\2", t)
        t = re.sub(r",\s*(and|or|but|so)\b", r" \1", t)
        t = re.sub(r"\s*,\s*", " - ", t)
    if "title" in failed:
        if (title := _title(t)) is None:
            return None
        t = f"<<{title}>>\n\n{t}"
    if "starts_with" in failed:
        t = args["starts_with"]["text"] + START.get(args["starts_with"]["text"], ": ") + t
    if "postscript" in failed:
        ps = POSTSCRIPTS[pick % len(POSTSCRIPTS)]
        if "question_end" in args:
            ps = CLOSING_QUESTIONS[pick % len(CLOSING_QUESTIONS)]
        t = t + "\n\n" + args["postscript"]["marker"] + " " + ps
    if "question_end" in failed and "postscript" not in failed:
        t = t + "\n\n" + CLOSING_QUESTIONS[pick % len(CLOSING_QUESTIONS)]
    if "ends_with" in failed:
        t = t + "\n\n" + args["ends_with"]["text"]
    if "quoted" in failed:
        t = f'"{t}"'
    t = t.upper() if "uppercase" in failed else t.lower() if "lowercase" in failed else t
    return (t, failed) if not verify(p, t) else None


SUBSTANCE = {"knowledge": 15, "writing": 12, "summarise": 8}  # words a real answer needs, whatever its shape


REFUSAL = re.compile(r"\b(as an? (ai|language model|text-based ai|assistant)\b|i('m| am) (sorry|unable|not able)|"
                     r"i can(no|')t (help|provide|assist|answer))", re.I)


def _no_echo(t: str, a: dict, run: int = 5) -> bool:
    """No run of `run` words from an instruction's own text: talking about the instruction is not following it."""
    grams = {tuple(w[i:i + run]) for x in a["texts"] for w in [_plain_words(x)] for i in range(len(w) - run + 1)}
    out = _plain_words(t)
    return not any(tuple(out[i:i + run]) in grams for i in range(len(out) - run + 1))


ENGINE_CHECKS = {"answer": _answer, "summary": _summary, "no_echo": _no_echo,
                 "no_refusal": lambda t, a: REFUSAL.search(t) is None,
                 "substance": lambda t, a: INSTRUCTION_CHECKS["words"](t, {"min": a["min"]}), "no_harness": lambda t, a: HARNESS.search(t) is None and META.search(t) is None}


def check(name: str, args: dict, reply: str) -> bool:
    fn = ENGINE_CHECKS.get(name) or INSTRUCTION_CHECKS[name]
    return bool(fn(reply, args))


def verify(p: dict, reply: str) -> list[str]:
    """The check kinds `reply` fails for prompt `p` ([] when it follows every instruction)."""
    return [name for name, args in p["checks"] if not check(name, args, reply)]


# ---- identity ------------------------------------------------------------------------------

def identity_answer(bundle, base: str | None, question: str) -> str:
    """Who the assistant is, in the harness's own words: the identity file's first sentence in the
    first person, the base's identity line (engine/bases.py, for a registered base) and, when the question asks what it can
    do, each role's description from the bundle."""
    from macaronic.engine.bases import get, registered

    m = re.match(r"\s*You are ([^.]+)\.", bundle.identity)
    who = f"I am {m.group(1)}." if m else bundle.identity.strip().split("\n")[0]
    name = registered(base)  # None: a model directory, whose identity line nobody wrote
    text = f"{who} {get(name).identity}" if name else who
    if re.search(r"\b(can you|good at|help me with|what can)\b", question, re.I):
        text += " I can help with:\n" + "\n".join(f"- {r.description}" for r in bundle.roles)
    return text
