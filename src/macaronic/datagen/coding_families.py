"""The coding engine's problem families: each `(rng) -> Spec`, its names, constants and variants
drawn from `rng`. A Spec is data: the entry point's name, what it does (an imperative sentence),
a reference solution (the source of truth: the tests' expected values are computed from it), and
the argument tuples the tests call it with (the first ones become the prompt's examples, edge
cases follow). A class family gives scripts instead: statements run in order, `?expr` lines are
checked. None of these is a coding-suite family (`suites/coding.py` FAMILIES) or a HumanEval
problem; `tests/datagen/test_coding_engine.py` checks names, prompts and docstrings against both.
Knows nothing about prompts, sandboxes or models.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Spec:
    name: str
    doc: str  # imperative ("Return ...") for a function; descriptive for a class
    ref: str  # reference source; NAME is replaced by `name`
    cases: tuple  # function: argument tuples; class: scripts (tuples of statements, "?expr" checked)

    @property
    def source(self) -> str:
        return self.ref.replace("NAME", self.name).strip() + "\n"

    @property
    def is_class(self) -> bool:
        return self.ref.lstrip().startswith("class ")


def _q(s: str) -> str:
    return '"' + s + '"'


# ---- strings ------------------------------------------------------------------------------

def run_length(rng):
    count_first = rng.random() < 0.5
    piece = 'f"{j - i}{s[i]}"' if count_first else 'f"{s[i]}{j - i}"'
    ex = '"3a1b"' if count_first else '"a3b1"'
    what = "its length followed by the character" if count_first else "the character followed by its length"
    return Spec(rng.choice(("run_length_encode", "rle_encode", "compress_runs")),
                f'Encode `s` with run-length encoding: each maximal run of one character becomes {what} ("aaab" -> {ex}).',
                f"""
def NAME(s: str) -> str:
    out = []
    i = 0
    while i < len(s):
        j = i
        while j < len(s) and s[j] == s[i]:
            j += 1
        out.append({piece})
        i = j
    return "".join(out)
""", (("aaabccdddd",), ("abc",), ("",), ("x",), ("zzzzzzzzzzzz",), ("aabbaa",)))


def mask(rng):
    k, ch = rng.choice((2, 3, 4)), rng.choice(("*", "#", "x"))
    return Spec(rng.choice(("mask_account", "hide_digits", "mask_secret")),
                f'Return `s` with every character except the last {k} replaced by "{ch}"; a string of {k} '
                "characters or fewer is returned unchanged.",
                f"""
def NAME(s: str) -> str:
    if len(s) <= {k}:
        return s
    return "{ch}" * (len(s) - {k}) + s[-{k}:]
""", (("4111111111111111",), ("secret-token",), ("",), ("ab",), ("abcd"[:k + 1],), ("12345",)))


def case_convert(rng):
    if rng.random() < 0.5:
        return Spec(rng.choice(("snake_to_camel", "to_camel_case", "camelize")),
                    'Convert the snake_case identifier `s` to camelCase: split on "_", drop empty parts, lowercase '
                    'the first part and capitalize the others ("max_line_length" -> "maxLineLength").',
                    """
def NAME(s: str) -> str:
    parts = [p for p in s.split("_") if p]
    if not parts:
        return ""
    return parts[0].lower() + "".join(p[:1].upper() + p[1:].lower() for p in parts[1:])
""", (("max_line_length",), ("hello",), ("",), ("__private_var",), ("HTTP_response_code",), ("a_b_c",)))
    return Spec(rng.choice(("camel_to_snake", "to_snake_case", "snakeify")),
                'Convert the camelCase or PascalCase identifier `s` to snake_case: put "_" before every uppercase '
                'letter except the first character, then lowercase everything ("parseHttpHeader" -> "parse_http_header").',
                """
def NAME(s: str) -> str:
    out = []
    for i, c in enumerate(s):
        if c.isupper() and i > 0:
            out.append("_")
        out.append(c.lower())
    return "".join(out)
""", (("parseHttpHeader",), ("Simple",), ("",), ("x",), ("getX",), ("already_snake",)))


def acronym(rng):
    skip = rng.random() < 0.5
    cond = ' if w.lower() not in ("of", "and", "the")' if skip else ""
    extra = ', skipping the words "of", "and" and "the"' if skip else ""
    return Spec(rng.choice(("acronym", "initials", "make_acronym")),
                f"Return the acronym of `phrase`: the first letter of each word, uppercased{extra}. Words are separated "
                "by spaces or hyphens.",
                f"""
def NAME(phrase: str) -> str:
    words = phrase.replace("-", " ").split()
    return "".join(w[0].upper() for w in words{cond})
""", (("portable network graphics",), ("Bank of America",), ("",), ("self-contained underwater breathing apparatus",),
      ("the lord of the rings",), ("x",)))


def common_prefix(rng):
    return Spec(rng.choice(("common_prefix", "shared_prefix", "longest_shared_start")),
                "Return the longest string that every string in the list `words` starts with (\"\" for an empty list).",
                """
def NAME(words: list[str]) -> str:
    if not words:
        return ""
    p = words[0]
    for w in words[1:]:
        while not w.startswith(p):
            p = p[:-1]
    return p
""", ((["flower", "flow", "flight"],), (["dog", "racecar", "car"],), ([],), (["alone"],), (["same", "same"],),
      (["", "abc"],), (["interview", "internet", "interval"],)))


def anagram(rng):
    return Spec(rng.choice(("is_anagram", "are_anagrams", "anagram_check")),
                "Return True if `a` and `b` are anagrams of each other when case and spaces are ignored, else False.",
                """
def NAME(a: str, b: str) -> bool:
    return sorted(a.replace(" ", "").lower()) == sorted(b.replace(" ", "").lower())
""", (("listen", "silent"), ("Dormitory", "dirty room"), ("abc", "abd"), ("", ""), ("aab", "abb"), ("a", "A")))


def top_word(rng):
    return Spec(rng.choice(("most_common_word", "top_word", "frequent_word")),
                "Return the word that occurs most often in `text` (words are split on whitespace and compared in "
                'lowercase); on a tie return the alphabetically first one, and "" when there are no words.',
                """
def NAME(text: str) -> str:
    counts = {}
    for w in text.lower().split():
        counts[w] = counts.get(w, 0) + 1
    if not counts:
        return ""
    return min(counts, key=lambda w: (-counts[w], w))
""", (("the cat and the hat",), ("b a b a",), ("",), ("One one ONE two",), ("solo",)))


def wrap_words(rng):
    w = rng.choice((10, 12, 15, 20))
    return Spec(rng.choice(("wrap_text", "word_wrap", "break_lines")),
                f"Split `text` into lines of at most {w} characters, breaking only between words (words are "
                f"separated by whitespace and joined by single spaces); a word longer than {w} gets a line of its "
                "own. Return the list of lines.",
                f"""
def NAME(text: str) -> list[str]:
    lines, cur = [], ""
    for word in text.split():
        if not cur:
            cur = word
        elif len(cur) + 1 + len(word) <= {w}:
            cur += " " + word
        else:
            lines.append(cur)
            cur = word
    if cur:
        lines.append(cur)
    return lines
""", (("the quick brown fox jumps over the lazy dog",), ("",), ("a",), ("supercalifragilistic is long",),
      ("one two three four five six seven eight nine ten",)))


def squeeze(rng):
    fold = rng.random() < 0.3
    cmp = "out[-1].lower() != c.lower()" if fold else "out[-1] != c"
    extra = " (letters compared without case; the first character of a run is kept)" if fold else ""
    return Spec(rng.choice(("squeeze", "collapse_repeats", "drop_adjacent_repeats")),
                f'Return `s` with every run of the same character shortened to one character{extra} ("aaabccd" -> "abcd").',
                f"""
def NAME(s: str) -> str:
    out = []
    for c in s:
        if not out or {cmp}:
            out.append(c)
    return "".join(out)
""", (("aaabccd",), ("",), ("abc",), ("aAbB",), ("zzz  zz",), ("mississippi",)))


def brackets(rng):
    return Spec(rng.choice(("brackets_balanced", "balanced_delimiters", "check_brackets")),
                "Return True if every bracket in `s` (round, square and curly) is closed by the matching kind in "
                "the right order, else False; all other characters are ignored.",
                """
def NAME(s: str) -> bool:
    pairs = {")": "(", "]": "[", "}": "{"}
    stack = []
    for c in s:
        if c in "([{":
            stack.append(c)
        elif c in pairs:
            if not stack or stack.pop() != pairs[c]:
                return False
    return not stack
""", (("{[()()]}",), ("([)]",), ("",), ("print(a[0])",), ("((",), ("}",), ("{a: [1, (2)]}",)))


def slugify(rng):
    sep = rng.choice(("-", "_"))
    return Spec(rng.choice(("slugify", "make_slug", "url_slug")),
                f'Turn `title` into a URL slug: lowercase, every run of characters that are not letters or digits '
                f'replaced by a single "{sep}", and no "{sep}" at either end.',
                f"""
def NAME(title: str) -> str:
    out, gap = [], False
    for c in title.lower():
        if c.isalnum():
            if gap and out:
                out.append("{sep}")
            out.append(c)
            gap = False
        else:
            gap = True
    return "".join(out)
""", (("Hello, World!",), ("  Python 3.12 -- what's new?  ",), ("",), ("already-a-slug",), ("***",), ("A",)))


def thousands(rng):
    sep = rng.choice((",", " ", "."))
    return Spec(rng.choice(("format_thousands", "group_digits", "with_separators")),
                f'Return the integer `n` as a string with "{sep}" between groups of three digits counted from the '
                f'right, keeping a leading "-" for negative numbers (1234567 -> "1{sep}234{sep}567").',
                f"""
def NAME(n: int) -> str:
    s = str(abs(n))
    groups = []
    while s:
        groups.append(s[-3:])
        s = s[:-3]
    return ("-" if n < 0 else "") + "{sep}".join(reversed(groups))
""", ((1234567,), (999,), (0,), (1000,), (-9876543210,), (100000,)))


# ---- lists -------------------------------------------------------------------------------

def chunk(rng):
    size, drop = rng.choice((2, 3, 4)), rng.random() < 0.3
    cond = f" if i + {size} <= len(items)" if drop else ""
    tail = f"an incomplete last chunk is dropped" if drop else "the last chunk may be shorter"
    return Spec(rng.choice(("chunk", "chunked", "split_into_chunks", "batches")),
                f"Split the list `items` into consecutive chunks of {size} items and return the list of chunks; {tail}.",
                f"""
def NAME(items: list) -> list[list]:
    return [items[i:i + {size}] for i in range(0, len(items), {size}){cond}]
""", (([1, 2, 3, 4, 5, 6, 7],), ([],), (["a"],), (list(range(2 * size)),), (list("abcdefghij"),)))


def differences(rng):
    return Spec(rng.choice(("differences", "consecutive_diffs", "deltas", "step_changes")),
                "Return the list of differences between consecutive numbers of `nums` (each number minus the one "
                "before it); a list with fewer than two numbers gives [].",
                """
def NAME(nums: list[int]) -> list[int]:
    return [b - a for a, b in zip(nums, nums[1:])]
""", (([1, 4, 9, 16],), ([5],), ([],), ([3, 3, -2, 10],), ([0, -1, -3],)))


def moving_average(rng):
    w = rng.choice((2, 3, 4))
    return Spec(rng.choice(("moving_average", "window_means", "sliding_average")),
                f"Return the average of every window of {w} consecutive numbers of `nums`, in order, each rounded to "
                f"2 decimals; [] when `nums` has fewer than {w} numbers.",
                f"""
def NAME(nums: list[float]) -> list[float]:
    return [round(sum(nums[i:i + {w}]) / {w}, 2) for i in range(len(nums) - {w} + 1)]
""", (([1, 2, 3, 4, 5, 6],), ([],), ([10] * w,), ([1.5, 2.5, -1.0, 4.0, 0.0],), ([7],)))


def interleave(rng):
    return Spec(rng.choice(("interleave", "alternate_items", "zip_merge")),
                "Return a list that takes items from the lists `a` and `b` alternately, starting with `a`; when one "
                "list runs out, the rest of the other follows.",
                """
def NAME(a: list, b: list) -> list:
    out = []
    for i in range(max(len(a), len(b))):
        if i < len(a):
            out.append(a[i])
        if i < len(b):
            out.append(b[i])
    return out
""", (([1, 2, 3], ["a", "b", "c"]), ([1], [2, 3, 4]), ([], []), ([1, 2, 3], []), ([], ["x"])))


def rising_run(rng):
    strict = rng.random() < 0.6
    op, word = (">", "strictly increasing") if strict else (">=", "non-decreasing")
    return Spec(rng.choice(("longest_rising_run", "longest_streak", "max_increasing_run")),
                f"Return the length of the longest run of consecutive numbers of `nums` that is {word} (0 for an "
                "empty list).",
                f"""
def NAME(nums: list[int]) -> int:
    best = cur = 0
    for i, x in enumerate(nums):
        cur = cur + 1 if i > 0 and x {op} nums[i - 1] else 1
        best = max(best, cur)
    return best
""", (([1, 2, 2, 3, 4, 1],), ([5, 4, 3],), ([],), ([7],), ([1, 1, 1, 1],), ([1, 3, 5, 7, 2, 4, 6, 8, 10],)))


def index_above(rng):
    if rng.random() < 0.5:
        return Spec(rng.choice(("first_above", "index_over", "first_index_over")),
                    "Return the index of the first number in `nums` that is greater than `limit`, or -1 if there is none.",
                    """
def NAME(nums: list[int], limit: int) -> int:
    for i, x in enumerate(nums):
        if x > limit:
            return i
    return -1
""", (([1, 5, 2, 8], 4), ([1, 2], 10), ([], 0), ([3, 3], 3), ([-5, -1], -2)))
    return Spec(rng.choice(("last_above", "last_index_over", "rightmost_above")),
                "Return the index of the last number in `nums` that is greater than `limit`, or -1 if there is none.",
                """
def NAME(nums: list[int], limit: int) -> int:
    for i in range(len(nums) - 1, -1, -1):
        if nums[i] > limit:
            return i
    return -1
""", (([1, 5, 2, 8, 3], 4), ([1, 2], 10), ([], 0), ([3, 3], 3), ([9, -1], 0)))


def pivot_partition(rng):
    return Spec(rng.choice(("partition_around", "split_by_pivot", "pivot_partition")),
                "Return a new list with the numbers of `nums` that are less than `pivot` first and the others after "
                "them, each group keeping its original order.",
                """
def NAME(nums: list[int], pivot: int) -> list[int]:
    return [x for x in nums if x < pivot] + [x for x in nums if x >= pivot]
""", (([5, 1, 8, 3, 9, 2], 4), ([], 1), ([1, 2, 3], 0), ([4, 4, 3], 4), ([7, -1, 7, -2], 7)))


def top_k(rng):
    k = rng.choice((2, 3))
    return Spec(rng.choice(("top_frequent", "most_frequent_items", "k_most_common")),
                f"Return the {k} most frequent items of the list `items`, most frequent first; a tie goes to the item "
                "that appears first in `items`. Return fewer when there are fewer distinct items.",
                f"""
def NAME(items: list) -> list:
    counts = {{}}
    for x in items:
        counts[x] = counts.get(x, 0) + 1
    order = sorted(counts, key=lambda x: -counts[x])
    return order[:{k}]
""", ((["a", "b", "a", "c", "b", "a", "d"],), ([],), ([1],), ([3, 1, 2, 1, 2, 3],), ([5, 5, 4, 4, 4, 6, 6, 6, 6],)))


# ---- matrices ----------------------------------------------------------------------------

def transpose(rng):
    return Spec(rng.choice(("transpose", "swap_rows_columns", "columns_as_rows")),
                "Return the transpose of the matrix `m`, given as a list of rows of equal length (an empty matrix gives []).",
                """
def NAME(m: list[list[int]]) -> list[list[int]]:
    return [list(col) for col in zip(*m)]
""", (([[1, 2, 3], [4, 5, 6]],), ([],), ([[7]],), ([[1], [2], [3]],)))


def spiral(rng):
    return Spec(rng.choice(("spiral_order", "spiral_walk", "unroll_spiral")),
                "Return the items of the matrix `m` (a list of rows of equal length) in clockwise spiral order, "
                "starting at the top-left corner.",
                """
def NAME(m: list[list[int]]) -> list[int]:
    out = []
    rows = [row[:] for row in m]
    while rows:
        out += rows.pop(0)
        rows = [list(r) for r in zip(*rows)][::-1]
    return out
""", (([[1, 2, 3], [4, 5, 6], [7, 8, 9]],), ([],), ([[1, 2], [3, 4], [5, 6]],), ([[4]],), ([[1, 2, 3, 4]],)))


def rotate_grid(rng):
    cw = rng.random() < 0.5
    expr = "[list(r) for r in zip(*m[::-1])]" if cw else "[list(r) for r in zip(*m)][::-1]"
    return Spec(rng.choice(("rotate_grid", "rotate_matrix", "turn_matrix")),
                f"Return the matrix `m` (a list of rows of equal length) rotated 90 degrees "
                f"{'clockwise' if cw else 'counterclockwise'}.",
                f"""
def NAME(m: list[list[int]]) -> list[list[int]]:
    return {expr}
""", (([[1, 2], [3, 4]],), ([[1, 2, 3], [4, 5, 6]],), ([],), ([[9]],)))


def diagonals(rng):
    return Spec(rng.choice(("diagonal_sum", "sum_diagonals", "cross_sum")),
                "Return the sum of both diagonals of the square matrix `m`, counting the centre cell only once when "
                "the size is odd (0 for an empty matrix).",
                """
def NAME(m: list[list[int]]) -> int:
    n = len(m)
    if n == 0:
        return 0
    total = sum(m[i][i] + m[i][n - 1 - i] for i in range(n))
    return total - (m[n // 2][n // 2] if n % 2 else 0)
""", (([[1, 2, 3], [4, 5, 6], [7, 8, 9]],), ([[1, 2], [3, 4]],), ([],), ([[5]],),
      ([[1, 0, 0, 2], [0, 3, 4, 0], [0, 5, 6, 0], [7, 0, 0, 8]],)))


def regions(rng):
    ch = rng.choice(("#", "X", "@"))
    return Spec(rng.choice(("count_islands", "count_regions", "count_blobs")),
                f'`grid` is a list of equal-length strings. Return how many regions of "{ch}" cells it has, where '
                "cells are in the same region when they touch horizontally or vertically.",
                f"""
def NAME(grid: list[str]) -> int:
    seen = set()
    count = 0
    for r in range(len(grid)):
        for c in range(len(grid[r])):
            if grid[r][c] == "{ch}" and (r, c) not in seen:
                count += 1
                seen.add((r, c))
                stack = [(r, c)]
                while stack:
                    y, x = stack.pop()
                    for ny, nx in ((y + 1, x), (y - 1, x), (y, x + 1), (y, x - 1)):
                        if 0 <= ny < len(grid) and 0 <= nx < len(grid[ny]) and grid[ny][nx] == "{ch}" and (ny, nx) not in seen:
                            seen.add((ny, nx))
                            stack.append((ny, nx))
    return count
""", (([f"{ch}{ch}..", f".{ch}..", f"...{ch}", f"{ch}..{ch}"],), ([],), (["...", "..."],),
      ([f"{ch}.{ch}", f".{ch}.", f"{ch}.{ch}"],), ([ch * 3, ch * 3],)))


# ---- dicts -------------------------------------------------------------------------------

def invert(rng):
    return Spec(rng.choice(("invert_dict", "keys_by_value", "reverse_mapping")),
                "Return a dict that maps each value of the dict `d` to the sorted list of the keys that have that value.",
                """
def NAME(d: dict) -> dict:
    out = {}
    for k, v in d.items():
        out.setdefault(v, []).append(k)
    return {v: sorted(ks) for v, ks in out.items()}
""", (({"a": 1, "b": 2, "c": 1},), ({},), ({"x": "red"},), ({"z": 0, "y": 0, "x": 0},)))


def group_words(rng):
    if rng.random() < 0.5:
        return Spec(rng.choice(("group_by_length", "words_by_length", "bucket_by_size")),
                    "Group the strings of `words` by length: return a dict mapping each length to the list of the "
                    "strings of that length, in their original order.",
                    """
def NAME(words: list[str]) -> dict:
    out = {}
    for w in words:
        out.setdefault(len(w), []).append(w)
    return out
""", ((["hi", "cat", "to", "dog", "bird"],), ([],), ([""],), (["aa", "bb", "aa"],)))
    return Spec(rng.choice(("group_by_initial", "words_by_letter", "index_by_first_letter")),
                "Group the non-empty strings of `words` by their first letter, lowercased: return a dict mapping each "
                "letter to the list of those strings, in their original order; empty strings are skipped.",
                """
def NAME(words: list[str]) -> dict:
    out = {}
    for w in words:
        if w:
            out.setdefault(w[0].lower(), []).append(w)
    return out
""", ((["apple", "Avocado", "banana", "cherry", "blueberry"],), ([],), (["", "x"],), (["Zoe", "zed"],)))


def merge_counts(rng):
    if rng.random() < 0.35:
        return Spec(rng.choice(("merge_max", "combine_best", "keep_larger")),
                    "Return a new dict with every key of the dicts `a` and `b`; a key found in both gets the larger "
                    "of its two values. Neither input is changed.",
                    """
def NAME(a: dict, b: dict) -> dict:
    out = dict(a)
    for k, v in b.items():
        out[k] = max(out[k], v) if k in out else v
    return out
""", (({"x": 1, "y": 2}, {"y": 5, "z": 3}), ({}, {}), ({"a": 1}, {}), ({"b": 4}, {"b": -2}), ({"k": -1.5}, {"k": -2.5})))
    return Spec(rng.choice(("merge_counts", "add_dicts", "combine_totals")),
                "Return a new dict with every key of the dicts `a` and `b`; a key found in both gets the sum of its "
                "two values. Neither input is changed.",
                """
def NAME(a: dict, b: dict) -> dict:
    out = dict(a)
    for k, v in b.items():
        out[k] = out.get(k, 0) + v
    return out
""", (({"x": 1, "y": 2}, {"y": 5, "z": 3}), ({}, {}), ({"a": 1}, {}), ({}, {"b": -2}), ({"k": 1.5}, {"k": 2.5})))


def deep_get(rng):
    sep = rng.choice((".", "/"))
    return Spec(rng.choice(("get_path", "deep_get", "lookup_path")),
                f'Follow the keys in `path` (separated by "{sep}") through the nested dicts of `data` and return the '
                "value found, or `default` when a key is missing or a value on the way is not a dict.",
                f"""
def NAME(data: dict, path: str, default=None):
    cur = data
    for key in path.split("{sep}"):
        if not isinstance(cur, dict) or key not in cur:
            return default
        cur = cur[key]
    return cur
""", (({"a": {"b": {"c": 42}}}, f"a{sep}b{sep}c"), ({"a": {"b": 1}}, f"a{sep}x", "none"), ({}, "a"),
      ({"a": 5}, f"a{sep}b", 0), ({"k": {"v": [1, 2]}}, f"k{sep}v")))


def flatten_keys(rng):
    sep = rng.choice((".", "/", "_"))
    return Spec(rng.choice(("flatten_keys", "flatten_dict", "dotted_keys")),
                f'Flatten the nested dict `d` into one level: a nested value\'s key is its path of keys joined by '
                f'"{sep}". Nested empty dicts disappear.',
                f"""
def NAME(d: dict) -> dict:
    out = {{}}

    def walk(x, prefix):
        for k, v in x.items():
            key = prefix + "{sep}" + k if prefix else k
            if isinstance(v, dict):
                walk(v, key)
            else:
                out[key] = v

    walk(d, "")
    return out
""", (({"a": 1, "b": {"c": 2, "d": {"e": 3}}},), ({},), ({"x": {}},), ({"k": [1, {"no": 1}]},)))


# ---- numbers -----------------------------------------------------------------------------

def collatz(rng):
    if rng.random() < 0.35:
        return Spec(rng.choice(("collatz_peak", "hailstone_max", "highest_collatz_value")),
                    "Return the largest number reached when the Collatz rule (halve an even number, turn an odd number "
                    "n into 3n + 1) is applied to the positive integer `n` until it reaches 1, `n` itself included.",
                    """
def NAME(n: int) -> int:
    peak = n
    while n != 1:
        n = n // 2 if n % 2 == 0 else 3 * n + 1
        peak = max(peak, n)
    return peak
""", ((6,), (1,), (8,), (27,), (7,)))
    return Spec(rng.choice(("collatz_steps", "steps_to_one", "hailstone_length")),
                "Return how many steps the Collatz rule (halve an even number, turn an odd number n into 3n + 1) "
                "takes to bring the positive integer `n` down to 1.",
                """
def NAME(n: int) -> int:
    steps = 0
    while n != 1:
        n = n // 2 if n % 2 == 0 else 3 * n + 1
        steps += 1
    return steps
""", ((6,), (1,), (2,), (27,), (97,)))


def divisor_class(rng):
    return Spec(rng.choice(("classify_number", "divisor_class", "perfection_kind")),
                'Return "perfect", "abundant" or "deficient" for the positive integer `n` by comparing the sum of '
                "its proper divisors (the divisors smaller than n) with n.",
                """
def NAME(n: int) -> str:
    s = sum(d for d in range(1, n) if n % d == 0)
    return "perfect" if s == n else "abundant" if s > n else "deficient"
""", ((6,), (12,), (1,), (28,), (13,), (945,)))


def binary_gap(rng):
    if rng.random() < 0.4:
        return Spec(rng.choice(("longest_ones_run", "max_consecutive_ones", "ones_streak")),
                    "Return the length of the longest run of consecutive ones in the binary form of the non-negative "
                    "integer `n` (0 for 0).",
                    """
def NAME(n: int) -> int:
    best = cur = 0
    for b in bin(n)[2:]:
        cur = cur + 1 if b == "1" else 0
        best = max(best, cur)
    return best
""", ((13,), (0,), (1,), (255,), (0b1011101111,)))
    return Spec(rng.choice(("binary_gap", "longest_zero_gap", "max_zero_run")),
                "Return the length of the longest run of zeros with a one on both sides in the binary form of the "
                "positive integer `n` (0 if there is none).",
                """
def NAME(n: int) -> int:
    best = cur = 0
    for b in bin(n)[2:].rstrip("0"):
        if b == "0":
            cur += 1
            best = max(best, cur)
        else:
            cur = 0
    return best
""", ((9,), (529,), (1,), (32,), (1041,), (15,)))


def lcm_all(rng):
    return Spec(rng.choice(("lcm_of", "least_common_multiple", "smallest_common_multiple")),
                "Return the least common multiple of the positive integers in the list `nums` (1 for an empty list).",
                """
def NAME(nums: list[int]) -> int:
    from math import gcd
    out = 1
    for x in nums:
        out = out * x // gcd(out, x)
    return out
""", (([4, 6],), ([],), ([7],), ([2, 3, 5, 7],), ([12, 18, 30],)))


def armstrong(rng):
    return Spec(rng.choice(("is_armstrong", "is_narcissistic", "armstrong_check")),
                "Return True if the non-negative integer `n` equals the sum of its digits, each raised to the power "
                "of the number of digits (153 = 1**3 + 5**3 + 3**3), else False.",
                """
def NAME(n: int) -> bool:
    digits = str(n)
    return n == sum(int(d) ** len(digits) for d in digits)
""", ((153,), (154,), (0,), (9474,), (10,), (370,)))


def leap_count(rng):
    return Spec(rng.choice(("count_leap_years", "leap_years_between", "leap_count")),
                "Return how many leap years there are from year `start` to year `end`, both included (divisible by 4, "
                "except century years not divisible by 400); 0 when `start` > `end`.",
                """
def NAME(start: int, end: int) -> int:
    return sum(1 for y in range(start, end + 1) if y % 4 == 0 and (y % 100 != 0 or y % 400 == 0))
""", ((2000, 2020), (1900, 1900), (2021, 2023), (2024, 2024), (2010, 2000), (1896, 1904)))


def fraction(rng):
    return Spec(rng.choice(("reduce_fraction", "lowest_terms", "normalize_fraction")),
                "Return the fraction `num`/`den` in lowest terms as a tuple (numerator, denominator) whose denominator "
                "is positive; `den` is never 0.",
                """
def NAME(num: int, den: int) -> tuple[int, int]:
    from math import gcd
    g = gcd(num, den)
    num, den = num // g, den // g
    if den < 0:
        num, den = -num, -den
    return (num, den)
""", ((6, 8), (-3, 9), (3, -9), (0, 5), (7, 1), (100, -25)))


# ---- parsing -----------------------------------------------------------------------------

def parse_pairs(rng):
    ps, kv = rng.choice(((";", "="), (",", "="), (";", ":"), ("&", "=")))
    return Spec(rng.choice(("parse_settings", "parse_pairs", "parse_options")),
                f'Parse a string like "a{kv}1{ps}b{kv}hello" into a dict: pairs are separated by "{ps}", a key and '
                f'its value by the first "{kv}"; spaces around keys and values are stripped, values made only of '
                "digits become ints, and empty pairs are skipped.",
                f"""
def NAME(text: str) -> dict:
    out = {{}}
    for part in text.split("{ps}"):
        if not part.strip():
            continue
        key, _, value = part.partition("{kv}")
        key, value = key.strip(), value.strip()
        out[key] = int(value) if value.isdigit() else value
    return out
""", ((f"a{kv}1{ps}b{kv}hello",), ("",), (f" port {kv} 8080 {ps}{ps} host{kv}local{ps}",), (f"x{kv}{ps}y{kv}2{kv}3",)))


def duration(rng):
    days = rng.random() < 0.4
    units = '{"d": 86400, "h": 3600, "m": 60, "s": 1}' if days else '{"h": 3600, "m": 60, "s": 1}'
    parts = "d (days), h (hours), m (minutes) and s (seconds)" if days else "h (hours), m (minutes) and s (seconds)"
    example = "2d1h30m15s" if days else "1h30m15s"
    return Spec(rng.choice(("parse_duration", "duration_seconds", "to_seconds")),
                f'Return the number of seconds in a duration string such as "{example}": each of the parts {parts} '
                "may be missing, and the ones present come in that order.",
                f"""
def NAME(text: str) -> int:
    total, num = 0, ""
    for c in text:
        if c.isdigit():
            num += c
        else:
            total += int(num) * {units}[c]
            num = ""
    return total
""", ((example,), ("45s",), ("",), ("2h",), ("10m5s",), ("100h1s",)) + ((("3d",), ("1d1s",)) if days else ()))


def rpn(rng):
    return Spec(rng.choice(("eval_rpn", "evaluate_postfix", "postfix_eval")),
                "Evaluate an expression in reverse Polish notation, given as a list of tokens (integers written as "
                "strings and the operators +, - and *), and return the integer result.",
                """
def NAME(tokens: list[str]) -> int:
    stack = []
    for t in tokens:
        if t in ("+", "-", "*"):
            b, a = stack.pop(), stack.pop()
            stack.append(a + b if t == "+" else a - b if t == "-" else a * b)
        else:
            stack.append(int(t))
    return stack[-1]
""", ((["2", "3", "+", "4", "*"],), (["7"],), (["5", "1", "2", "+", "4", "*", "+", "3", "-"],), (["-3", "4", "-"],),
      (["2", "10", "-"],)))


def versions(rng):
    if rng.random() < 0.35:
        return Spec(rng.choice(("is_newer", "newer_version", "version_after")),
                    "Return True if the version string `a` (dot-separated integers) is strictly newer than `b`, else "
                    'False; missing parts count as 0 ("1.2" equals "1.2.0").',
                    """
def NAME(a: str, b: str) -> bool:
    x = [int(p) for p in a.split(".")]
    y = [int(p) for p in b.split(".")]
    n = max(len(x), len(y))
    return x + [0] * (n - len(x)) > y + [0] * (n - len(y))
""", (("1.2.10", "1.2.9"), ("1.0", "1.0.0"), ("0.9", "1.0"), ("2", "1.99.99"), ("3.1.4", "3.1.4")))
    return Spec(rng.choice(("compare_versions", "version_cmp", "cmp_version")),
                "Compare two version strings made of dot-separated integers: return -1 if `a` is older than `b`, 1 if "
                'it is newer and 0 if they are equal; missing parts count as 0 ("1.2" equals "1.2.0").',
                """
def NAME(a: str, b: str) -> int:
    x = [int(p) for p in a.split(".")]
    y = [int(p) for p in b.split(".")]
    n = max(len(x), len(y))
    x += [0] * (n - len(x))
    y += [0] * (n - len(y))
    return (x > y) - (x < y)
""", (("1.2.10", "1.2.9"), ("1.0", "1.0.0"), ("0.9", "1.0"), ("2", "1.99.99"), ("3.1.4", "3.1.4")))


def ipv4(rng):
    return Spec(rng.choice(("is_valid_ipv4", "valid_ip", "check_ipv4")),
                "Return True if `s` is a valid IPv4 address: four decimal numbers from 0 to 255 separated by dots, "
                "with no leading zeros (0 itself is fine) and nothing else, else False.",
                """
def NAME(s: str) -> bool:
    parts = s.split(".")
    if len(parts) != 4:
        return False
    for p in parts:
        if not p.isdigit() or (len(p) > 1 and p[0] == "0") or int(p) > 255:
            return False
    return True
""", (("192.168.0.1",), ("256.1.1.1",), ("",), ("1.2.3",), ("01.2.3.4",), ("0.0.0.0",), ("1.2.3.4.5",), ("a.b.c.d",)))


# ---- intervals ---------------------------------------------------------------------------

def merge_intervals(rng):
    touching = rng.random() < 0.6
    op = "<=" if touching else "<"
    rule = "intervals that only touch (one ends where the next starts) are merged too" if touching else \
        "intervals that only touch (one ends where the next starts) stay apart"
    return Spec(rng.choice(("merge_intervals", "merge_ranges", "union_intervals")),
                f"Merge the overlapping intervals in `intervals` (pairs [start, end] with start <= end, in any order) "
                f"and return them as [start, end] lists sorted by start; {rule}.",
                f"""
def NAME(intervals: list[list[int]]) -> list[list[int]]:
    out = []
    for s, e in sorted(intervals):
        if out and s {op} out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return out
""", (([[1, 3], [8, 10], [2, 6], [15, 18]],), ([[1, 4], [4, 5]],), ([],), ([[5, 7]],), ([[1, 10], [2, 3], [4, 5]],)))


def coverage(rng):
    return Spec(rng.choice(("covered_length", "total_coverage", "union_length")),
                "Return the total length covered by the intervals in `intervals` (pairs (start, end) with start <= "
                "end), counting overlapping parts once.",
                """
def NAME(intervals: list[tuple[int, int]]) -> int:
    total, cur_s, cur_e = 0, None, None
    for s, e in sorted(intervals):
        if cur_e is None or s > cur_e:
            if cur_e is not None:
                total += cur_e - cur_s
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    if cur_e is not None:
        total += cur_e - cur_s
    return total
""", (([(1, 5), (3, 7), (10, 12)],), ([],), ([(2, 2)],), ([(0, 10), (2, 3)],), ([(5, 6), (1, 2), (2, 5)],)))


def free_slots(rng):
    return Spec(rng.choice(("free_slots", "find_gaps", "open_times")),
                "Given busy intervals (start, end) in minutes, possibly overlapping and in any order, return the free "
                "intervals between `day_start` and `day_end` as a sorted list of (start, end) tuples, leaving out "
                "empty ones.",
                """
def NAME(busy: list[tuple[int, int]], day_start: int, day_end: int) -> list[tuple[int, int]]:
    free, cur = [], day_start
    for s, e in sorted(busy):
        if s > cur:
            free.append((cur, min(s, day_end)))
        cur = max(cur, e)
    if cur < day_end:
        free.append((cur, day_end))
    return [(s, e) for s, e in free if s < e]
""", (([(540, 600), (660, 720)], 480, 1020), ([], 0, 60), ([(0, 100)], 0, 60), ([(30, 45), (10, 40)], 0, 60),
      ([(600, 700), (650, 660)], 600, 700)))


# ---- recursion ---------------------------------------------------------------------------

def stairs(rng):
    steps = rng.choice(((1, 3), (1, 2, 3), (2, 3), (1, 4), (1, 2, 5)))
    said = ", ".join(map(str, steps[:-1])) + f" or {steps[-1]}"
    return Spec(rng.choice(("count_ways", "climb_ways", "stair_paths")),
                f"Return in how many different orders one can climb a staircase of `n` steps taking {said} steps at a "
                "time (n = 0 gives 1).",
                f"""
def NAME(n: int) -> int:
    ways = [1] + [0] * n
    for i in range(1, n + 1):
        ways[i] = sum(ways[i - j] for j in {steps!r} if i - j >= 0)
    return ways[n]
""", ((4,), (0,), (1,), (10,), (7,)))


def k_subsets(rng):
    return Spec(rng.choice(("combinations_of", "choose_k", "k_subsets")),
                "Return every way to choose `k` items from the list `items`, each as a list in the items' original "
                "order, listed in the order itertools.combinations produces them.",
                """
def NAME(items: list, k: int) -> list[list]:
    if k == 0:
        return [[]]
    if len(items) < k:
        return []
    first, rest = items[0], items[1:]
    return [[first] + c for c in NAME(rest, k - 1)] + NAME(rest, k)
""", (([1, 2, 3, 4], 2), (["a", "b"], 0), ([], 1), (["x", "y", "z"], 3), ([1, 2, 3], 1)))


def arrangements(rng):
    return Spec(rng.choice(("unique_permutations", "all_arrangements", "distinct_orderings")),
                "Return every distinct rearrangement of the characters of `s`, sorted alphabetically.",
                """
def NAME(s: str) -> list[str]:
    if len(s) <= 1:
        return [s]
    out = set()
    for i, c in enumerate(s):
        for p in NAME(s[:i] + s[i + 1:]):
            out.add(c + p)
    return sorted(out)
""", (("abc",), ("aab",), ("",), ("z",), ("abab",)))


def depth(rng):
    return Spec(rng.choice(("max_depth", "nesting_depth", "list_depth")),
                "Return how deeply the list `x` is nested: a list with no lists inside (the empty list too) has depth "
                "1, and each level of lists inside adds one.",
                """
def NAME(x: list) -> int:
    return 1 + max((NAME(v) for v in x if isinstance(v, list)), default=0)
""", (([1, [2, [3]], 4],), ([],), ([[[[]]]],), ([1, 2],), ([[1], [[2]], [3]],)))


def deep_sum(rng):
    return Spec(rng.choice(("deep_sum", "nested_total", "sum_nested")),
                "Return the sum of all numbers in `x`, a list whose items are numbers or lists of the same kind, "
                "nested to any depth.",
                """
def NAME(x: list) -> int:
    return sum(NAME(v) if isinstance(v, list) else v for v in x)
""", (([1, [2, [3, 4]], 5],), ([],), ([[], [[]]],), ([-1, [1]],), ([[[[10]]]],)))


# ---- classes -----------------------------------------------------------------------------

def min_stack(rng):
    n = rng.choice(("MinStack", "TrackingStack", "StackWithMin"))
    return Spec(n, f"`{n}()` starts empty; push(x) adds x on top; pop() removes and returns the top item (None when "
                "empty); minimum() returns the smallest item on the stack (None when empty).",
                """
class NAME:
    def __init__(self):
        self.items = []

    def push(self, x):
        self.items.append(x)

    def pop(self):
        return self.items.pop() if self.items else None

    def minimum(self):
        return min(self.items) if self.items else None
""", (("s = NAME()", "s.push(3)", "s.push(1)", "s.push(2)", "?s.minimum()", "?s.pop()", "?s.pop()", "?s.minimum()"),
      ("s = NAME()", "?s.pop()", "?s.minimum()"), ("s = NAME()", "s.push(5)", "?s.pop()", "?s.pop()")))


def account(rng):
    n = rng.choice(("Account", "Wallet", "PiggyBank"))
    return Spec(n, f"`{n}(start=0)` holds a balance that starts at `start`; deposit(amount) adds to it; "
                "withdraw(amount) takes the amount out and returns True, or returns False and changes nothing when "
                "the balance is too small; balance() returns the current balance.",
                """
class NAME:
    def __init__(self, start=0):
        self.total = start

    def deposit(self, amount):
        self.total += amount

    def withdraw(self, amount):
        if amount > self.total:
            return False
        self.total -= amount
        return True

    def balance(self):
        return self.total
""", (("a = NAME()", "a.deposit(50)", "?a.withdraw(20)", "?a.balance()", "?a.withdraw(100)", "?a.balance()"),
      ("a = NAME(10)", "?a.withdraw(10)", "?a.balance()"), ("a = NAME()", "?a.balance()", "?a.withdraw(1)")))


def tally(rng):
    n = rng.choice(("Tally", "WordTally", "Histogram"))
    return Spec(n, f"`{n}()` counts things: add(item) records one more of item; count(item) returns how many were "
                "added (0 for an unseen item); top() returns the item added most often, the earliest first added on "
                "a tie, or None when nothing was added.",
                """
class NAME:
    def __init__(self):
        self.counts = {}

    def add(self, item):
        self.counts[item] = self.counts.get(item, 0) + 1

    def count(self, item):
        return self.counts.get(item, 0)

    def top(self):
        best = None
        for item, c in self.counts.items():
            if best is None or c > self.counts[best]:
                best = item
        return best
""", (("t = NAME()", "t.add('a')", "t.add('b')", "t.add('b')", "?t.count('b')", "?t.count('z')", "?t.top()"),
      ("t = NAME()", "?t.top()"), ("t = NAME()", "t.add(1)", "t.add(2)", "?t.top()", "t.add(2)", "?t.top()")))


def ring(rng):
    cap = rng.choice((3, 4, 5))
    n = rng.choice(("RingBuffer", "RecentItems", "LastN"))
    return Spec(n, f"`{n}()` keeps only the last {cap} items appended: append(x) adds an item, dropping the oldest "
                f"when there are already {cap}; items() returns the kept items as a list, oldest first.",
                f"""
class NAME:
    def __init__(self):
        self.data = []

    def append(self, x):
        self.data.append(x)
        if len(self.data) > {cap}:
            self.data.pop(0)

    def items(self):
        return list(self.data)
""", (("b = NAME()", *[f"b.append({i})" for i in range(cap + 2)], "?b.items()"), ("b = NAME()", "?b.items()"),
      ("b = NAME()", "b.append('x')", "?b.items()")))


# ---- dates and times (no external libraries) ---------------------------------------------

def day_of_year(rng):
    if rng.random() < 0.35:
        return Spec(rng.choice(("days_left_in_year", "days_until_new_year", "remaining_days")),
                    'Return how many days of the year are left after `date`, a string "YYYY-MM-DD" (0 on December '
                    "31st), with Gregorian leap years.",
                    """
def NAME(date: str) -> int:
    y, m, d = map(int, date.split("-"))
    leap = y % 4 == 0 and (y % 100 != 0 or y % 400 == 0)
    days = [31, 29 if leap else 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31]
    return sum(days) - (sum(days[:m - 1]) + d)
""", (("2023-03-01",), ("2024-03-01",), ("2021-01-01",), ("2000-12-31",), ("1900-02-28",)))
    return Spec(rng.choice(("day_of_year", "ordinal_day", "day_number")),
                'Return the day of the year (1 for January 1st) of `date`, a string "YYYY-MM-DD", with Gregorian '
                "leap years.",
                """
def NAME(date: str) -> int:
    y, m, d = map(int, date.split("-"))
    leap = y % 4 == 0 and (y % 100 != 0 or y % 400 == 0)
    days = [31, 29 if leap else 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31]
    return sum(days[:m - 1]) + d
""", (("2023-03-01",), ("2024-03-01",), ("2021-01-01",), ("2000-12-31",), ("1900-12-31",)))


def add_minutes(rng):
    return Spec(rng.choice(("add_minutes", "shift_time", "clock_add")),
                '`time` is a 24-hour clock time "HH:MM". Return the time `minutes` minutes later (earlier when '
                "negative) in the same format, wrapping around midnight.",
                """
def NAME(time: str, minutes: int) -> str:
    h, m = map(int, time.split(":"))
    total = (h * 60 + m + minutes) % (24 * 60)
    return f"{total // 60:02d}:{total % 60:02d}"
""", (("09:30", 45), ("23:50", 20), ("00:00", 0), ("00:10", -20), ("12:00", 24 * 60 * 2 + 1)))


def days_between(rng):
    return Spec(rng.choice(("days_between", "date_diff", "days_apart")),
                'Return the number of days from date `a` to date `b` (strings "YYYY-MM-DD"), negative when `b` is '
                "earlier.",
                """
def NAME(a: str, b: str) -> int:
    from datetime import date
    return (date.fromisoformat(b) - date.fromisoformat(a)).days
""", (("2024-01-01", "2024-03-01"), ("2023-01-01", "2023-01-01"), ("2020-02-28", "2020-03-01"),
      ("2025-01-10", "2024-12-25"), ("1999-12-31", "2000-01-01")))


def weekday(rng):
    short = rng.random() < 0.35
    names = ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"] if short else \
        ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
    return Spec(rng.choice(("weekday_name", "day_of_week", "which_weekday")),
                f'Return the {"three-letter English abbreviation" if short else "English name"} of the weekday '
                f'("{names[0]}" to "{names[-1]}") of `date`, a string "YYYY-MM-DD".',
                f"""
def NAME(date: str) -> str:
    import datetime
    names = {names!r}
    return names[datetime.date.fromisoformat(date).weekday()]
""", (("2024-07-04",), ("2000-01-01",), ("2023-12-25",), ("1970-01-01",), ("2024-02-29",)))


def minutes_between(rng):
    return Spec(rng.choice(("minutes_between", "shift_minutes", "elapsed_minutes")),
                'Return the number of minutes from clock time `start` to clock time `end` (24-hour "HH:MM"); when '
                "`end` is earlier than `start` it is on the next day.",
                """
def NAME(start: str, end: str) -> int:
    h1, m1 = map(int, start.split(":"))
    h2, m2 = map(int, end.split(":"))
    return (h2 * 60 + m2 - (h1 * 60 + m1)) % (24 * 60)
""", (("09:00", "17:30"), ("22:00", "06:00"), ("12:00", "12:00"), ("00:01", "00:00"), ("08:15", "08:45")))


def clock_format(rng):
    if rng.random() < 0.35:
        return Spec(rng.choice(("format_minutes", "as_min_sec", "seconds_to_ms")),
                    'Format the non-negative number of seconds `total` as "M:SS" (minutes not padded and possibly '
                    "above 59).",
                    """
def NAME(total: int) -> str:
    m, s = divmod(total, 60)
    return f"{m}:{s:02d}"
""", ((125,), (0,), (59,), (3600,), (61,)))
    return Spec(rng.choice(("format_duration", "as_clock", "seconds_to_hms")),
                'Format the non-negative number of seconds `total` as "H:MM:SS" (hours not padded and possibly above 24).',
                """
def NAME(total: int) -> str:
    h, rest = divmod(total, 3600)
    m, s = divmod(rest, 60)
    return f"{h}:{m:02d}:{s:02d}"
""", ((3725,), (0,), (59,), (86400,), (360000 + 61,)))


FAMILIES = {f.__name__: f for f in (
    run_length, mask, case_convert, acronym, common_prefix, anagram, top_word, wrap_words, squeeze, brackets,
    slugify, thousands, chunk, differences, moving_average, interleave, rising_run, index_above, pivot_partition,
    top_k, transpose, spiral, rotate_grid, diagonals, regions, invert, group_words, merge_counts, deep_get,
    flatten_keys, collatz, divisor_class, binary_gap, lcm_all, armstrong, leap_count, fraction, parse_pairs,
    duration, rpn, versions, ipv4, merge_intervals, coverage, free_slots, stairs, k_subsets, arrangements, depth,
    deep_sum, min_stack, account, tally, ring, day_of_year, add_minutes, days_between, weekday, minutes_between,
    clock_format)}
