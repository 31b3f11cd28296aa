"""Function tools: a data engine for stateless calculators and converters (geometry, physics,
electricity, money, units, statistics, text, dates, cooking), the other half of what agents are
handed besides record stores (`datagen.agent`). Its point is *relevance*: a tool whose name shares
the request's words is not always the tool for it.

Patterns (each writes one transcript over a drawn tool set):
- `fn_call`: the request asks for a quantity one of 1-4 listed tools computes, with its values:
  one call, the result, a reply that states it;
- `fn_parallel`: the same quantity for two or three sets of values, or two quantities at once:
  the calls together in one message;
- `fn_near_miss`: the tools are the quantity's neighbours (same topic: the circumference where the
  area is asked) but none computes it: no call; the reply says so and works it out directly;
- `fn_concept`: a question about how a quantity is worked out, with no values to call with (the
  quantity's own tool may be listed): no call; the reply gives the formula;
- `fn_offtopic`: a question none of the tools is about: answered in text.

Tool names and parameter names vary (snake case, namespaces, camelCase, and masked names whose
meaning only the description gives; parameters keep meaningful names or aliases), so a model
learns to read descriptions, not names. A parameter may take another convention than the request
says it in (a rate or a percentage as a decimal fraction: 0.05 for 5%), which only its description
states (the typed tool listing shows it), so a model learns to normalise values. Every
call is executed by the quantity's own implementation; `verify` replays the transcript: calls
parse under the listed schemas, every argument value is said by the request once read back from the
tool's convention (or is a schema enum or a normalised date the pattern declared), results are the implementation's, nothing is called
where nothing fits, and the reply states the declared facts.

    examples(n, seed) -> list[Example]     # `macaronic train agent --generator agent_functions`
"""

from __future__ import annotations

import datetime as dt
import json
import math
import random
import statistics
from collections.abc import Callable
from dataclasses import dataclass, field

from macaronic.datagen.agent import Skip, draw_verified, offtopic_question, polite




@dataclass(frozen=True)
class Arg:
    name: str
    kind: str  # num | int | enum | list | text | date
    desc: str
    lo: float = 1
    hi: float = 100
    values: tuple = ()  # enum values
    optional: bool = False
    aliases: tuple = ()  # other names a tool may give the parameter
    alt: tuple = ()  # (description, factor): another convention a tool may take it in (a percent as a fraction)


@dataclass(frozen=True)
class Quantity:
    key: str
    topic: str
    what: str  # "the area of a circle"
    args: tuple[Arg, ...]
    fn: Callable
    asks: tuple[str, ...]  # requests with {arg} slots
    how: str  # how it is worked out, one sentence
    unit: str = ""


def _a(name, kind, desc, lo=1, hi=100, values=(), optional=False, aliases=(), alt=()):
    return Arg(name, kind, desc, lo, hi, values, optional, aliases, alt)


R = _a("radius", "num", "Radius, in centimetres.", 1, 40, aliases=("r", "circle_radius"))
MASS = _a("mass", "num", "Mass in kilograms.", 1, 200, aliases=("m", "mass_kg"))
VEL = _a("velocity", "num", "Speed in metres per second.", 1, 60, aliases=("v", "speed"))
NUMS = _a("numbers", "list", "The list of numbers.", 1, 99, aliases=("values", "data"))
TEXT = _a("text", "text", "The text to look at.", aliases=("sentence", "input_text"))
DAY = _a("date", "date", "A date, in ISO format (YYYY-MM-DD).", aliases=("day", "on_date"))
PRINC = _a("principal", "int", "The amount borrowed or invested, in dollars.", 500, 20000, aliases=("amount", "capital"))
RATE = _a("rate", "num", "Yearly interest rate in percent (5 for 5%).", 1, 12, aliases=("annual_rate", "interest_rate"),
          alt=("Yearly interest rate as a decimal fraction (0.05 for 5%).", 0.01))


def _days(start: str, end: str) -> int:
    return abs((dt.date.fromisoformat(end) - dt.date.fromisoformat(start)).days)


QUANTITIES = (
    # geometry
    Quantity("circle_area", "geometry", "the area of a circle", (R,), lambda radius: math.pi * radius ** 2,
             ("What is the area of a circle with radius {radius} cm?", "A round rug has a radius of {radius} cm. How much floor does it cover?"),
             "A circle's area is pi times the radius squared (A = pi r^2)", " square centimetres"),
    Quantity("circle_circumference", "geometry", "the circumference of a circle", (R,), lambda radius: 2 * math.pi * radius,
             ("How long is the edge of a circle whose radius is {radius} cm?", "Work out the circumference of a circle of radius {radius} cm."),
             "A circle's circumference is two pi times the radius (C = 2 pi r)", " cm"),
    Quantity("rectangle_area", "geometry", "the area of a rectangle",
             (_a("length", "num", "Length in metres.", 1, 50, aliases=("l", "long_side")), _a("width", "num", "Width in metres.", 1, 30, aliases=("w", "short_side"))),
             lambda length, width: length * width,
             ("What's the area of a rectangle {length} m long and {width} m wide?", "My garden is {length} by {width} metres; how many square metres is that?"),
             "A rectangle's area is its length times its width", " square metres"),
    Quantity("rectangle_perimeter", "geometry", "the perimeter of a rectangle",
             (_a("length", "num", "Length in metres.", 1, 50, aliases=("l", "long_side")), _a("width", "num", "Width in metres.", 1, 30, aliases=("w", "short_side"))),
             lambda length, width: 2 * (length + width),
             ("How much fence do I need around a {length} m by {width} m plot?", "Give me the perimeter of a rectangle, length {length} m, width {width} m."),
             "A rectangle's perimeter is twice the sum of its length and width", " m"),
    Quantity("sphere_volume", "geometry", "the volume of a sphere", (R,), lambda radius: 4 / 3 * math.pi * radius ** 3,
             ("What volume does a ball of radius {radius} cm hold?", "Compute the volume of a sphere with a {radius} cm radius."),
             "A sphere's volume is four thirds pi times the radius cubed", " cubic centimetres"),
    Quantity("cylinder_volume", "geometry", "the volume of a cylinder",
             (R, _a("height", "num", "Height in centimetres.", 1, 80, aliases=("h", "tall"))),
             lambda radius, height: math.pi * radius ** 2 * height,
             ("How much does a can of radius {radius} cm and height {height} cm hold?", "Volume of a cylinder: radius {radius} cm, height {height} cm?"),
             "A cylinder's volume is pi times the radius squared times the height", " cubic centimetres"),
    Quantity("hypotenuse", "geometry", "the hypotenuse of a right triangle",
             (_a("side_a", "num", "One leg, in metres.", 1, 40, aliases=("a", "leg1")), _a("side_b", "num", "The other leg, in metres.", 1, 40, aliases=("b", "leg2"))),
             lambda side_a, side_b: math.hypot(side_a, side_b),
             ("A right triangle has legs of {side_a} m and {side_b} m. How long is the longest side?", "Find the hypotenuse when the two legs are {side_a} and {side_b} metres."),
             "The hypotenuse is the square root of the sum of the legs' squares (Pythagoras)", " m"),
    # physics
    Quantity("kinetic_energy", "physics", "the kinetic energy of a moving body", (MASS, VEL), lambda mass, velocity: 0.5 * mass * velocity ** 2,
             ("How much kinetic energy does a {mass} kg cart moving at {velocity} m/s have?", "Kinetic energy for mass {mass} kg and speed {velocity} m/s, please."),
             "Kinetic energy is half the mass times the speed squared (E = m v^2 / 2)", " joules"),
    Quantity("momentum", "physics", "the momentum of a moving body", (MASS, VEL), lambda mass, velocity: mass * velocity,
             ("What is the momentum of a {mass} kg object travelling at {velocity} m/s?", "Give me p for m = {mass} kg and v = {velocity} m/s."),
             "Momentum is mass times velocity (p = m v)", " kg m/s"),
    Quantity("potential_energy", "physics", "the gravitational potential energy of a raised mass",
             (MASS, _a("height", "num", "Height in metres.", 1, 100, aliases=("h", "elevation")),
              _a("gravity", "num", "Gravitational acceleration in m/s^2 (9.81 on Earth when left out).", 1, 25, optional=True, aliases=("g",))),
             lambda mass, height, gravity=9.81: mass * gravity * height,
             ("How much potential energy does a {mass} kg box gain when lifted {height} m?", "Potential energy of {mass} kg at {height} m, where g is {gravity} m/s^2?"),
             "Potential energy is mass times gravitational acceleration times height (E = m g h)", " joules"),
    Quantity("average_speed", "physics", "the average speed of a trip",
             (_a("distance", "num", "Distance in kilometres.", 5, 900, aliases=("km", "dist")), _a("hours", "num", "Time taken, in hours.", 1, 12, aliases=("time", "duration_h"))),
             lambda distance, hours: distance / hours,
             ("I drove {distance} km in {hours} hours. What was my average speed?", "Average speed for {distance} km covered in {hours} h?"),
             "Average speed is the distance divided by the time taken", " km/h"),
    Quantity("density", "physics", "the density of an object",
             (_a("mass", "num", "Mass in grams.", 1, 900, aliases=("m", "grams")), _a("volume", "num", "Volume in cubic centimetres.", 1, 300, aliases=("v", "vol"))),
             lambda mass, volume: mass / volume,
             ("A stone weighs {mass} g and takes up {volume} cm^3. What is its density?", "Density for mass {mass} g and volume {volume} cm^3?"),
             "Density is mass divided by volume", " g/cm^3"),
    Quantity("force", "physics", "the force needed to accelerate a mass",
             (MASS, _a("acceleration", "num", "Acceleration in m/s^2.", 1, 30, aliases=("a", "accel"))),
             lambda mass, acceleration: mass * acceleration,
             ("What force accelerates {mass} kg at {acceleration} m/s^2?", "Newton's second law: mass {mass} kg, acceleration {acceleration} m/s^2. Force?"),
             "Force is mass times acceleration (F = m a)", " newtons"),
    # electricity
    Quantity("voltage", "electricity", "the voltage across a resistor",
             (_a("current", "num", "Current in amperes.", 1, 20, aliases=("i", "amps")), _a("resistance", "num", "Resistance in ohms.", 1, 500, aliases=("r", "ohms"))),
             lambda current, resistance: current * resistance,
             ("What voltage drives {current} A through a {resistance} ohm resistor?", "Ohm's law: I = {current} A, R = {resistance} ohms. What's V?"),
             "Voltage is current times resistance (V = I R)", " volts"),
    Quantity("current", "electricity", "the current through a resistor",
             (_a("voltage", "num", "Voltage in volts.", 1, 240, aliases=("v", "volts")), _a("resistance", "num", "Resistance in ohms.", 1, 500, aliases=("r", "ohms"))),
             lambda voltage, resistance: voltage / resistance,
             ("How much current flows when {voltage} V is put across {resistance} ohms?", "Current through a {resistance} ohm load on a {voltage} V supply?"),
             "Current is voltage divided by resistance (I = V / R)", " amperes"),
    Quantity("electric_power", "electricity", "the power drawn by a device",
             (_a("voltage", "num", "Voltage in volts.", 1, 240, aliases=("v", "volts")), _a("current", "num", "Current in amperes.", 1, 20, aliases=("i", "amps"))),
             lambda voltage, current: voltage * current,
             ("A heater runs at {voltage} V and draws {current} A. How many watts is that?", "Power for {voltage} volts at {current} amps?"),
             "Electrical power is voltage times current (P = V I)", " watts"),
    # money
    Quantity("simple_interest", "money", "the simple interest on a sum",
             (PRINC, RATE, _a("years", "int", "Number of years.", 1, 10, aliases=("term", "n_years"))),
             lambda principal, rate, years: principal * rate / 100 * years,
             ("How much simple interest does ${principal} earn at {rate}% a year over {years} years?", "Simple interest on {principal} dollars, {rate} percent, {years} years?"),
             "Simple interest is the principal times the yearly rate times the number of years", " dollars"),
    Quantity("compound_amount", "money", "what a sum grows to with compound interest",
             (PRINC, RATE, _a("years", "int", "Number of years.", 1, 10, aliases=("term", "n_years")),
              _a("compounding", "enum", "How often interest is added.", values=("annually", "quarterly", "monthly"), aliases=("frequency", "period"))),
             lambda principal, rate, years, compounding: principal * (1 + rate / 100 / {"annually": 1, "quarterly": 4, "monthly": 12}[compounding]) ** (
                 {"annually": 1, "quarterly": 4, "monthly": 12}[compounding] * years),
             ("What will ${principal} grow to at {rate}% over {years} years, compounded {compounding}?", "Invest {principal} dollars at {rate}% for {years} years with interest added {compounding}: final amount?"),
             "With compound interest the amount is the principal times (1 + rate per period) to the number of periods", " dollars"),
    Quantity("tip", "money", "the tip on a bill",
             (_a("bill", "num", "The bill in dollars.", 10, 300, aliases=("amount", "total")), _a("percent", "int", "Tip percentage.", 10, 25, aliases=("tip_percent", "pct"),
                                                                                                          alt=("The tip as a fraction of the bill (0.15 for 15%).", 0.01))),
             lambda bill, percent: bill * percent / 100,
             ("Our dinner came to ${bill}. What's a {percent}% tip?", "How much should I tip on {bill} dollars at {percent} percent?"),
             "A tip is the bill times the tip percentage divided by 100", " dollars"),
    Quantity("discount_price", "money", "the price after a discount",
             (_a("price", "num", "The original price in dollars.", 5, 900, aliases=("amount", "list_price")), _a("percent", "int", "Discount percentage.", 5, 70, aliases=("discount", "pct"),
                                                                                                                       alt=("The discount as a fraction of the price (0.2 for 20% off).", 0.01))),
             lambda price, percent: price * (1 - percent / 100),
             ("A jacket costs ${price} with {percent}% off. What do I pay?", "Price after a {percent}% discount on {price} dollars?"),
             "The discounted price is the price times (1 - discount percentage / 100)", " dollars"),
    Quantity("loan_payment", "money", "the monthly payment on a loan",
             (PRINC, RATE, _a("months", "int", "Number of monthly payments.", 6, 72, aliases=("term_months", "n_months"))),
             lambda principal, rate, months: principal * (rate / 1200) / (1 - (1 + rate / 1200) ** -months),
             ("What's the monthly payment on a ${principal} loan at {rate}% a year over {months} months?", "Loan of {principal} dollars, {rate}% yearly, {months} monthly payments: how much each month?"),
             "A loan's monthly payment is P r / (1 - (1 + r)^-n) with r the monthly rate and n the number of months", " dollars"),
    # units
    Quantity("c_to_f", "units", "a Celsius temperature in Fahrenheit", (_a("celsius", "num", "Temperature in degrees Celsius.", -20, 45, aliases=("c", "temp_c")),),
             lambda celsius: celsius * 9 / 5 + 32,
             ("What is {celsius} degrees Celsius in Fahrenheit?", "Convert {celsius} C to F."),
             "Fahrenheit is Celsius times 9/5 plus 32", " degrees Fahrenheit"),
    Quantity("f_to_c", "units", "a Fahrenheit temperature in Celsius", (_a("fahrenheit", "num", "Temperature in degrees Fahrenheit.", 0, 110, aliases=("f", "temp_f")),),
             lambda fahrenheit: (fahrenheit - 32) * 5 / 9,
             ("It's {fahrenheit} F outside. What's that in Celsius?", "Convert {fahrenheit} degrees Fahrenheit to Celsius."),
             "Celsius is (Fahrenheit minus 32) times 5/9", " degrees Celsius"),
    Quantity("km_to_miles", "units", "a distance in kilometres in miles", (_a("km", "num", "Distance in kilometres.", 1, 500, aliases=("kilometres", "distance_km")),),
             lambda km: km * 0.621371,
             ("How many miles is {km} km?", "Convert a {km} kilometre run to miles."),
             "Miles are kilometres times 0.621371", " miles"),
    Quantity("kg_to_lb", "units", "a weight in kilograms in pounds", (_a("kg", "num", "Weight in kilograms.", 1, 150, aliases=("kilograms", "weight_kg")),),
             lambda kg: kg * 2.20462,
             ("How many pounds is {kg} kg?", "My suitcase weighs {kg} kilograms; what's that in pounds?"),
             "Pounds are kilograms times 2.20462", " pounds"),
    # statistics
    Quantity("mean", "statistics", "the average of some numbers", (NUMS,), lambda numbers: statistics.fmean(numbers),
             ("What's the average of {numbers}?", "Take the mean of these scores: {numbers}."),
             "The mean is the sum of the numbers divided by how many there are"),
    Quantity("median", "statistics", "the median of some numbers", (NUMS,), lambda numbers: statistics.median(numbers),
             ("What's the median of {numbers}?", "Find the middle value of {numbers}."),
             "The median is the middle value once the numbers are sorted (the mean of the two middle ones for an even count)"),
    Quantity("spread", "statistics", "the range of some numbers", (NUMS,), lambda numbers: max(numbers) - min(numbers),
             ("How far apart are the largest and smallest of {numbers}?", "What's the range of {numbers}?"),
             "The range is the largest number minus the smallest"),
    Quantity("percentage", "statistics", "what percentage one number is of another",
             (_a("part", "int", "The part.", 1, 90, aliases=("portion", "count")), _a("whole", "int", "The whole.", 100, 400, aliases=("total", "out_of"))),
             lambda part, whole: part / whole * 100,
             ("What percentage of {whole} is {part}?", "{part} out of {whole}: what percent is that?"),
             "A percentage is the part divided by the whole, times 100", "%"),
    # text
    Quantity("word_count", "text", "the number of words in a text", (TEXT,), lambda text: len(text.split()),
             ('How many words are in "{text}"?', 'Count the words of this line: "{text}"'),
             "Count the words by splitting the text at spaces", " words"),
    Quantity("letter_count", "text", "the number of letters in a text", (TEXT,), lambda text: sum(c.isalpha() for c in text),
             ('How many letters does "{text}" have, not counting spaces?', 'Count the letters in "{text}".'),
             "Count the alphabetic characters, leaving out spaces and punctuation", " letters"),
    Quantity("reverse", "text", "a text written backwards", (TEXT,), lambda text: text[::-1],
             ('Write "{text}" backwards.', 'Reverse the characters of "{text}".'),
             "Reversing a text reads its characters from last to first"),
    # dates
    Quantity("days_between", "dates", "the number of days between two dates",
             (_a("start", "date", "First date, ISO format (YYYY-MM-DD).", aliases=("from_date", "begin")), _a("end", "date", "Second date, ISO format (YYYY-MM-DD).", aliases=("to_date", "finish"))),
             _days,
             ("How many days are there between {start} and {end}?", "Count the days from {start} to {end}."),
             "Subtract the earlier date from the later one, in days", " days"),
    Quantity("weekday", "dates", "the day of the week of a date", (DAY,), lambda date: dt.date.fromisoformat(date).strftime("%A"),
             ("What day of the week is {date}?", "Which weekday does {date} fall on?"),
             "A calendar (or Zeller's rule) gives the weekday of a date"),
    Quantity("add_days", "dates", "the date a number of days after another",
             (DAY, _a("days", "int", "How many days to add.", 1, 120, aliases=("n_days", "offset"))),
             lambda date, days: (dt.date.fromisoformat(date) + dt.timedelta(days=days)).isoformat(),
             ("What's the date {days} days after {date}?", "If I start on {date}, what date is it {days} days later?"),
             "Count forward that many days on the calendar"),
    # cooking
    Quantity("scale_recipe", "cooking", "an ingredient amount scaled to a new number of servings",
             (_a("amount", "num", "The amount in the recipe, in grams.", 10, 800, aliases=("grams", "qty")),
              _a("serves", "int", "Servings the recipe makes.", 2, 8, aliases=("from_servings", "original_servings")),
              _a("wanted", "int", "Servings wanted.", 2, 12, aliases=("to_servings", "target_servings"))),
             lambda amount, serves, wanted: amount * wanted / serves,
             ("A recipe for {serves} uses {amount} g of flour. How much for {wanted} people?", "Scale {amount} grams from {serves} servings to {wanted} servings."),
             "Scale by multiplying the amount by the servings wanted and dividing by the servings the recipe makes", " g"),
)
BY_KEY = {q.key: q for q in QUANTITIES}
TOPICS = sorted({q.topic for q in QUANTITIES})

WORDS = ("amber", "river", "lamp", "quiet", "morning", "paper", "garden", "silver", "window", "thunder", "cedar",
         "velvet", "harbor", "pencil", "winter", "orbit", "candle", "meadow", "anchor", "crimson")
SPOKEN = ("%B %-d, %Y", "%-d %B %Y", "%b %-d %Y")

# ---- tool sets ---------------------------------------------------------------------------

VERBS = ("compute", "calc", "eval", "determine", "work_out", "solve_for", "estimate", "derive")
SPACES = ("mathkit", "sci", "toolbox", "numlib", "helpers", "quant", "formula", "kit")
DESC = ("Returns {what}.", "Compute {what}.", "Works out {what} from the given values.", "Gives {what}.",
        "Calculator: {what}.")


def _camel(s: str) -> str:
    head, *rest = s.split("_")
    return head + "".join(w.title() for w in rest)


def _masked(rng: random.Random, n: int = 3) -> str:
    return "".join(rng.choice("abcdefghjkmnpqrstuvwxyz") for _ in range(n)) + str(rng.randrange(10, 99))


@dataclass
class Tool:
    q: Quantity
    name: str
    params: dict  # logical arg name -> shown parameter name
    desc: str
    scale: dict = field(default_factory=dict)  # logical arg name -> factor of the convention it takes (Arg.alt)

    def schema(self) -> dict:
        props, required = {}, []
        for a in self.q.args:
            p = self.params[a.name]
            desc = a.alt[0] if a.name in self.scale else a.desc
            if a.kind == "list":
                props[p] = {"type": "array", "items": {"type": "number"}, "description": desc}
            elif a.kind == "enum":
                props[p] = {"type": "string", "enum": list(a.values), "description": desc}
            else:
                kind = "number" if a.name in self.scale else {"num": "number", "int": "integer"}.get(a.kind, "string")
                props[p] = {"type": kind, "description": desc}
            if not a.optional:
                required.append(p)
        return {"type": "function", "function": {"name": self.name, "description": self.desc,
                                                 "parameters": {"type": "object", "properties": props, "required": required}}}

    def show(self, args: dict) -> dict:
        """Logical arguments as this tool takes them: its parameter names, its conventions."""
        return {self.params[k]: _num(v * self.scale[k]) if k in self.scale else v for k, v in args.items()}

    def logical(self, shown: dict) -> dict:
        inv = {v: k for k, v in self.params.items()}
        return {inv[k]: _num(v / self.scale[inv[k]]) if inv[k] in self.scale else v for k, v in shown.items()}

    def run(self, args: dict):
        return self.q.fn(**self.logical(args))


def _num(v):
    """A scaled number without float noise (0.05, not 0.05000000000000001; 15, not 15.0)."""
    r = round(float(v), 6)
    return int(r) if r.is_integer() else r


def make_tool(q: Quantity, rng: random.Random, style: str) -> Tool:
    # Parameters keep meaningful names (the compact tool listing showed no parameter descriptions);
    # a parameter with another convention (Arg.alt) takes it in a `fractions` share of the tools, which
    # the typed listing shows in the parameter's description.
    name = {"snake": f"{rng.choice(VERBS)}_{q.key}", "space": f"{rng.choice(SPACES)}.{q.key}",
            "camel": _camel(f"{rng.choice(VERBS)}_{q.key}"),
            "masked": f"{rng.choice(('fn', 'op', 'tool', 'f'))}_{_masked(rng)}"}[style]
    params = {a.name: a.name if rng.random() < 0.6 or not a.aliases else rng.choice(a.aliases) for a in q.args}
    if len(set(params.values())) < len(params):
        params = {a.name: a.name for a in q.args}
    share = getattr(rng, "fractions", 0.0)  # EngineRandom's: 0 draws nothing, as the engine did before
    scale = {a.name: a.alt[1] for a in q.args if a.alt and share and rng.random() < share}
    return Tool(q, name, params, rng.choice(DESC).format(what=q.what), scale)


def tool_set(rng: random.Random, target: Quantity | None, others: list[Quantity]) -> list[Tool]:
    style = rng.choices(("snake", "space", "camel", "masked"), weights=(4, 2, 2, 2))[0]
    qs = ([target] if target else []) + others
    rng.shuffle(qs)
    tools = [make_tool(q, rng, style) for q in qs]
    if len({t.name for t in tools}) < len(tools):
        raise Skip("name clash")
    return tools


def neighbours(q: Quantity) -> list[Quantity]:
    return [x for x in QUANTITIES if x.topic == q.topic and x.key != q.key]


def distractors(rng: random.Random, exclude: set[str], k: int) -> list[Quantity]:
    pool = [x for x in QUANTITIES if x.key not in exclude]
    return rng.sample(pool, min(k, len(pool)))


# ---- values and requests -----------------------------------------------------------------

def draw(a: Arg, rng: random.Random):
    if a.kind == "num":
        v = round(rng.uniform(a.lo, a.hi), rng.choice((0, 0, 1)))
        return int(v) if float(v).is_integer() else v
    if a.kind == "int":
        return rng.randint(int(a.lo), int(a.hi))
    if a.kind == "enum":
        return rng.choice(a.values)
    if a.kind == "list":
        return [rng.randint(int(a.lo), int(a.hi)) for _ in range(rng.randint(4, 7))]
    if a.kind == "text":
        return " ".join(rng.sample(WORDS, rng.randint(2, 5)))
    day = dt.date(2026, 1, 1) + dt.timedelta(days=rng.randrange(0, 700))
    return day.isoformat()


def said(a: Arg, v, rng: random.Random, derived: set) -> str:
    if a.kind == "list":
        return ", ".join(map(str, v[:-1])) + " and " + str(v[-1])
    if a.kind == "date" and rng.random() < 0.6:
        derived.add(v)
        return dt.date.fromisoformat(v).strftime(rng.choice(SPOKEN))
    return str(v)


def fmt(v) -> str:
    if isinstance(v, str):
        return v
    v = round(float(v), 2)
    return str(int(v)) if v.is_integer() else f"{v:.2f}".rstrip("0").rstrip(".")


def result_value(v):
    """What a tool returns: a string as is, a number to 2 decimals (an int when whole)."""
    if isinstance(v, str):
        return v
    r = round(float(v), 2)
    return int(r) if r.is_integer() else r


def ask(q: Quantity, rng: random.Random, derived: set) -> tuple[str, dict]:
    """(request text, logical arguments it says)."""
    template = rng.choice(q.asks)
    vals = {}
    for a in q.args:
        if a.optional and "{" + a.name + "}" not in template:
            continue
        vals[a.name] = draw(a, rng)
    if q.key == "days_between" and vals["start"] > vals["end"]:
        vals["start"], vals["end"] = vals["end"], vals["start"]
    text = template.format(**{k: said(next(a for a in q.args if a.name == k), v, rng, derived) for k, v in vals.items()})
    return text, vals


# ---- transcripts -------------------------------------------------------------------------

@dataclass
class FnTranscript:
    tools: list[Tool]
    messages: list[dict]
    derived: set
    facts: list[str]
    calls_expected: int
    asked: str | None = None  # the key of the quantity the request asks for


def _call_msg(calls: list[tuple[Tool, dict]]) -> tuple[dict, list[dict]]:
    from macaronic.substrate.toolcalls import format_tool_calls

    shown = [(t.name, t.show(args)) for t, args in calls]
    results = [{"result": result_value(t.q.fn(**args))} for t, args in calls]
    return ({"role": "assistant", "content": format_tool_calls(shown)},
            [{"role": "tool", "content": json.dumps(r, sort_keys=True)} for r in results])


def _unit(q: Quantity, v) -> str:
    return q.unit if not isinstance(v, str) else ""


def fn_call(rng: random.Random) -> FnTranscript:
    q = rng.choice(QUANTITIES)
    others = rng.sample(neighbours(q), min(len(neighbours(q)), rng.randint(0, 2))) + distractors(rng, {q.key}, rng.randint(0, 1))
    others = list({x.key: x for x in others if x.key != q.key}.values())
    tools = tool_set(rng, q, others)
    derived: set = set()
    text, vals = ask(q, rng, derived)
    t = next(x for x in tools if x.q is q)
    call, results = _call_msg([(t, vals)])
    v = json.loads(results[0]["content"])["result"]
    reply = rng.choice((f"{q.what[0].upper() + q.what[1:]} is {fmt(v)}{_unit(q, v)}.", f"It comes to {fmt(v)}{_unit(q, v)}.",
                        f"The answer is {fmt(v)}{_unit(q, v)}."))
    msgs = [{"role": "user", "content": polite(rng, text)}, call, *results, {"role": "assistant", "content": reply}]
    return FnTranscript(tools, msgs, derived, [fmt(v)], 1, q.key)


def fn_parallel(rng: random.Random) -> FnTranscript:
    derived: set = set()
    if rng.random() < 0.5:  # one quantity, several sets of values
        q = rng.choice([x for x in QUANTITIES if len(x.args) == 1 and x.args[0].kind in ("num", "int", "text")])
        a = q.args[0]
        vs = []
        while len(vs) < rng.randint(2, 3):
            v = draw(a, rng)
            if v not in vs:
                vs.append(v)
        tools = tool_set(rng, q, distractors(rng, {q.key}, rng.randint(0, 2)))
        t = next(x for x in tools if x.q is q)
        listed = ", ".join(f'"{v}"' if a.kind == "text" else str(v) for v in vs[:-1]) + " and " + (f'"{vs[-1]}"' if a.kind == "text" else str(vs[-1]))
        text = rng.choice((f"I need {q.what} for each of these: {listed}.", f"Work out {q.what} for {listed}, please.",
                           f"Give me {q.what} for {listed}."))
        calls = [(t, {a.name: v}) for v in vs]
        pairs = [(q, v) for v in vs]
    else:  # two quantities in one request
        q1, q2 = rng.sample(QUANTITIES, 2)
        tools = tool_set(rng, q1, [q2] + distractors(rng, {q1.key, q2.key}, rng.randint(0, 1)))
        t1, t2 = next(x for x in tools if x.q is q1), next(x for x in tools if x.q is q2)
        s1, v1 = ask(q1, rng, derived)
        s2, v2 = ask(q2, rng, derived)
        text = f"Two things. {s1} Also: {s2}"
        calls = [(t1, v1), (t2, v2)]
        pairs = [(q1, v1), (q2, v2)]
    call, results = _call_msg(calls)
    outs = [json.loads(r["content"])["result"] for r in results]
    parts = [f"{fmt(o)}{_unit(q, o)}" for (q, _), o in zip(pairs, outs)]
    reply = "Here they are: " + "; ".join(parts) + "."
    msgs = [{"role": "user", "content": text}, call, *results, {"role": "assistant", "content": reply}]
    return FnTranscript(tools, msgs, derived, [fmt(o) for o in outs], len(calls))


def _lower(s: str) -> str:
    return s[0].lower() + s[1:] if s.split()[0] in ("A", "An", "The", "Count", "Subtract", "Scale", "Reversing") else s


def fn_near_miss(rng: random.Random) -> FnTranscript:
    q = rng.choice([x for x in QUANTITIES if neighbours(x)])
    near = rng.sample(neighbours(q), min(len(neighbours(q)), rng.randint(1, 2)))
    tools = tool_set(rng, None, near + distractors(rng, {q.key} | {x.key for x in near}, rng.randint(0, 1)))
    derived: set = set()
    text, vals = ask(q, rng, derived)
    v = result_value(q.fn(**vals))
    have = " and ".join(f"{t.q.what} (`{t.name}`)" for t in tools)
    reply = rng.choice((
        f"None of the tools gives {q.what}: they cover {have}. Worked out directly ({_lower(q.how)}), it is {fmt(v)}{_unit(q, v)}.",
        f"No tool here computes {q.what} (they do {have}), so I worked it out myself. {q.how}: {fmt(v)}{_unit(q, v)}."))
    msgs = [{"role": "user", "content": polite(rng, text)}, {"role": "assistant", "content": reply}]
    return FnTranscript(tools, msgs, derived, [fmt(v)], 0, q.key)


CONCEPT = ("How do you work out {what}?", "What's the formula for {what}?", "Explain how to find {what}.",
           "In general, how is {what} calculated?")


def fn_concept(rng: random.Random) -> FnTranscript:
    q = rng.choice(QUANTITIES)
    own = rng.random() < 0.5
    near = rng.sample(neighbours(q), min(len(neighbours(q)), rng.randint(0 if own else 1, 2)))
    if not own and not near:
        raise Skip("no neighbour")
    tools = tool_set(rng, q if own else None, near)
    text = rng.choice(CONCEPT).format(what=q.what)
    tail = (" Give me values and I can run the calculation." if own else "")
    msgs = [{"role": "user", "content": text}, {"role": "assistant", "content": f"{q.how}.{tail}"}]
    return FnTranscript(tools, msgs, set(), [], 0, q.key)


def fn_offtopic(rng: random.Random) -> FnTranscript:
    tools = tool_set(rng, None, distractors(rng, set(), rng.randint(1, 3)))
    q, answer, fact = offtopic_question(rng)
    msgs = [{"role": "user", "content": q}, {"role": "assistant", "content": answer}]
    return FnTranscript(tools, msgs, set(), [fact], 0)


PATTERNS = {"fn_call": (fn_call, 4), "fn_parallel": (fn_parallel, 2), "fn_near_miss": (fn_near_miss, 3),
            "fn_concept": (fn_concept, 2), "fn_offtopic": (fn_offtopic, 1)}


# ---- verification ------------------------------------------------------------------------

def _flat(x) -> list:
    return [y for v in x for y in _flat(v)] if isinstance(x, list) else [x]


def verify(t: FnTranscript) -> list[str]:
    """Replay `t`: every problem found (empty: keep it)."""
    import jsonschema

    from macaronic.substrate.toolcalls import parse_tool_calls

    schemas = [x.schema() for x in t.tools]
    by_name = {x.name: x for x in t.tools}
    problems, said_text, made, results = [], "", [], []
    for m in t.messages:
        if m["role"] == "user":
            said_text += "\n" + m["content"]
        elif m["role"] == "tool":
            results.append(json.loads(m["content"])["result"])
        elif "<tool_call>" in m["content"]:
            parsed = parse_tool_calls(m["content"], schemas)
            if not parsed.ok or not parsed.tool_calls:
                problems.append(f"unparsable calls: {parsed.error}")
                continue
            for c in parsed.tool_calls:
                tool, args = by_name[c["function"]["name"]], json.loads(c["function"]["arguments"])
                try:
                    jsonschema.validate(args, schemas[t.tools.index(tool)]["function"]["parameters"])
                except jsonschema.ValidationError as e:
                    problems.append(f"{tool.name}: {e.message}")
                for k, v in tool.logical(args).items():  # a value in a tool's convention, back as said
                    for x in _flat(v):
                        if not (str(x) in said_text or x in t.derived or any(x in a.values for a in tool.q.args)):
                            problems.append(f"{tool.name}.{tool.params[k]}={x!r} is not grounded")
                made.append(result_value(tool.run(args)))
    if made != results:
        problems.append(f"results {results} are not the tools' own {made}")
    if len(made) != t.calls_expected:
        problems.append(f"{len(made)} calls, {t.calls_expected} expected")
    final = t.messages[-1]
    if final["role"] != "assistant" or "<tool_call>" in final["content"]:
        problems.append("the transcript does not end on a reply")
    problems += [f"reply lacks {f!r}" for f in t.facts if f.lower() not in final["content"].lower()]
    return problems


# ---- examples ----------------------------------------------------------------------------

def transcript(rng: random.Random, pattern: str | None = None) -> tuple[FnTranscript, str]:
    names = list(PATTERNS)
    name = pattern or rng.choices(names, weights=[PATTERNS[n][1] for n in names])[0]
    t = PATTERNS[name][0](rng)
    problems = verify(t)
    if problems:
        raise AssertionError(f"{name}: {problems}")
    return t, name


def messages_of(t: FnTranscript, bundle) -> list[dict]:
    from macaronic.prompts import prompt_head
    from macaronic.substrate.toolcalls import format_tool_result

    return [*prompt_head(bundle, "agent", [x.schema() for x in t.tools]),
            *({"role": "tool", "content": format_tool_result(json.loads(m["content"]))} if m["role"] == "tool" else m
              for m in t.messages)]


class EngineRandom(random.Random):
    """The engine's random source, carrying the share of tools that take a parameter in its other
    convention (`Arg.alt`; 0: none, and no draw for it, so data built before it rebuilds)."""

    def __init__(self, seed, fractions: float = 0.0):
        super().__init__(seed)
        self.fractions = fractions


def examples(n: int, seed: int = 0, fractions: float = 0.0) -> list:
    """`n` verified function-tool conversations (seeded, deterministic), patterns mixed by weight;
    `fractions`: the share of tools with a percentage parameter that take it as a decimal fraction."""
    from macaronic.datagen.examples import Example
    from macaronic.harness import load_bundle

    bundle = load_bundle()
    rng = EngineRandom(f"agent-functions:{seed}", fractions)

    def one():
        t, name = transcript(rng)
        return Example(tuple(messages_of(t, bundle)), "agent", f"engine/functions/{name}/{t.tools[0].q.topic}")

    return draw_verified(n, one, "the function-tool engine")
