"""Claims: the direction words of the prose, checked against the records by one rule.

People write the prose; a direction word in it ("ahead", "behind", "level", "beat", "moves", "closes") stands in a
sentence that holds a claim marker, `<!-- claim: WORD SPEC[; SPEC ...] -->`, which `python -m render --check`
evaluates on the records. A SPEC names one comparison, "GROUP A B [KEY]": arm A against arm B of GROUP, paired by run
seed; an arm may be "ARM@best" (its best multiplier, records.best_mult) or "OTHER_GROUP:ARM"; GROUP may be a union
"A+B" (records.union); KEY is "loss" (validation, the default) or "zero_shot:<dataset>". The rule, the one in
docs/results.md's "How to read a comparison":

    ahead / behind   a 95% interval over 3 or more seed pairs that lies below / above zero (A's perplexity lower /
                     higher than B's)
    level            a 95% interval over 3 or more seed pairs that holds zero
    undecided        fewer than 3 seed pairs: no interval, so the prose gives the count ("n = 2, no interval") and
                     no direction word

WORD is one of those, or "not-ahead" / "not-behind" (each SPEC's direction is another one: for a sentence that denies
a direction); a SPEC after ";" may start with a WORD of its own. A claim is true when every SPEC's direction matches
its WORD. "none (why)" marks a sentence that uses a direction word without stating a direction (the legend's
definitions); a question needs no claim.
"""
import re

from analysis import records as R
from render.tables import at

DIRECTION = re.compile(r"\b(ahead|behind|level|beats?|moves?|closes?)\b", re.I)
CLAIM = re.compile(r"<!-- claim: (.+?) -->")
WORDS = ("ahead", "behind", "level", "undecided", "not-ahead", "not-behind")
CHECKED = ("README.md", "docs/results.md")                 # the docs whose every direction word needs a claim


def direction(g) -> str:
    """A comparison's direction by the rule above (R.gap's result)."""
    if g["n"] < 3:
        return "undecided"
    lo, hi = g["ci"]
    return "ahead" if hi < 0 else "behind" if lo > 0 else "level"


def comparison(recs, spec: str) -> dict:
    """The gap a SPEC names ("GROUP A B [KEY]")."""
    parts = spec.split()
    if len(parts) not in (3, 4):
        raise ValueError(f"a claim's comparison is GROUP A B [KEY], got {spec!r}")
    group, a, b, key = (*parts, "loss")[:4]
    (ga, arm_a), (gb, arm_b) = (x.split(":", 1) if ":" in x and not x.startswith(("loss", "zero_shot")) else
                                (group, x) for x in (a, b))
    ra, rb = (recs[x] if x in recs or "+" not in x else R.union(recs, x) for x in (ga, gb))
    g = R.gap(ra, at(ra, arm_a), rb, at(rb, arm_b), key)
    if g is None:
        raise ValueError(f"claim {spec!r}: the two arms share no run seed")
    return g


def holds(recs, claim: str) -> tuple:
    """(whether a claim marker's text is true, what the records say): "behind big_fair lev_best@best tied@best"; a
    SPEC after ";" may start with a WORD of its own ("ahead big_sweep lev_best tied; behind big_fair ...")."""
    word, ok, found = None, True, []
    for part in claim.split(";"):
        first, _, rest = part.strip().partition(" ")
        if first == "none":                      # a sentence that uses a direction word but states no direction
            return True, "none"
        if first in WORDS:
            word, part = first, rest
        elif word is None:
            raise ValueError(f"a claim starts with one of {', '.join(WORDS)}, got {first!r} in {claim!r}")
        d = direction(comparison(recs, part))
        ok &= d == word if not word.startswith("not-") else d != word[4:]
        found.append(d)
    return ok, ", ".join(found)


def prose(text: str) -> str:
    """The prose of a doc: without code blocks and rendered tables (their headers say "behind in"), with inline
    values kept (what a reader reads)."""
    text = re.sub(r"```.*?```", " ", text, flags=re.S)
    text = re.sub(r"<!-- render: .*? -->\n.*?<!-- end render -->", " ", text, flags=re.S)
    return re.sub(r"<!-- = .+? -->|<!-- = -->", "", text)


def sentences(text: str) -> list:
    """The sentences of prose (split at a full stop, colon-free line break or list item), claim markers kept."""
    text = re.sub(r"\n\s*\n|\n\s*[-*|#] ", "\n\n", text)
    parts = re.split(r"(?<=[.!?])\s+(?=[A-Z(`*\[])|\n\n", text)
    return [" ".join(p.split()) for p in parts if p.strip()]


def problems(recs, text: str, name: str) -> list:
    """What is wrong with a doc's claims: a claim the records contradict, or a sentence with a direction word and no
    claim marker."""
    out = []
    for m in CLAIM.finditer(text):
        ok, found = holds(recs, m[1])
        if not ok:
            out.append(f"{name}: the claim '{m[1]}' does not hold: the records say {found}")
    for s in sentences(prose(text)):
        words = DIRECTION.findall(CLAIM.sub("", s))
        if words and not CLAIM.search(s) and not s.rstrip("*_ ").endswith("?"):     # a question asserts nothing
            out.append(f"{name}: '{words[0]}' without a claim marker in: {s[:160]}")
    return out
