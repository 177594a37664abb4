"""Claims: the direction words of the prose, checked against the records by one rule.

People write the prose; a direction word in it ("ahead", "behind", "level", "beat", "moves", "closes") stands in a
sentence that holds a claim marker, `<!-- claim: WORD SPEC[; SPEC ...] -->`, which `python -m render --check`
evaluates on the records. A SPEC names one comparison, "GROUP A B [KEY]": arm A against arm B of GROUP, paired by run
seed; an arm may be "ARM@best" (its best multiplier, records.best_mult) or "OTHER_GROUP:ARM"; GROUP may be a union
"A+B" (records.union); KEY is "loss" (validation, the default) or "zero_shot:<dataset>". "SPEC2 minus SPEC1" names
how far a comparison moves from one group to another (the gap of SPEC2 less that of SPEC1, per run seed: "behind"
when it grows, as LEV's gap to tied from GPT-2's vocabulary to o200k_base's). The rule, the one in
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

# The direction vocabulary: each word's side, from the sentence's subject (the claim's first arm): "ahead" for a lower
# perplexity, "behind" for a higher one, "level", or "change" for a word that needs a claim but names no side
# ("the lead reverses": the claim gives both ends). A mechanism ("does not come from") is a claim like any other.
SIDES = {"ahead": r"ahead|better|beat(?:s|ing)?|outperform(?:s|ed|ing)?|lead(?:s|ing)?|gain(?:s|ed|ing)?|"
                  r"help(?:s|ed|ing)?|improv(?:e|es|ed|ing|ement)|far below",
         "behind": r"behind|worse|trail(?:s|ed|ing)?|hurt(?:s|ing)?|far above",
         "level": r"level|no difference",
         "change": r"mov(?:e|es|ed|ing)|clos(?:e|es|ed|ing)|revers(?:e|es|ed|ing|al)|does not come from|"
                   r"not what \S+ lacks"}
DIRECTION = re.compile(r"\b(" + "|".join(SIDES.values()) + r")\b", re.I)
NEGATED = re.compile(r"\b(not|no longer|never|neither|nor)\s+(?:\S+\s+){0,2}$", re.I)   # "is not ahead", "not far behind"
CLAIM = re.compile(r"<!-- claim: (.+?) -->")
WORDS = ("ahead", "behind", "level", "undecided", "not-ahead", "not-behind")
CHECKED = ("README.md", "docs/results.md", "docs/results/abstract.md")   # docs whose every direction word needs a claim


def direction(g) -> str:
    """A comparison's direction by the rule above (R.gap's result)."""
    if g["n"] < 3:
        return "undecided"
    lo, hi = g["ci"]
    return "ahead" if hi < 0 else "behind" if lo > 0 else "level"


def direction_text(g) -> str:
    """direction() as a table cell: "no interval (n = 2)" where the rule gives none."""
    d = direction(g)
    return f"no interval (n = {g['n']})" if d == "undecided" else d


def comparison(recs, spec: str) -> dict:
    """The gap a SPEC names ("GROUP A B [KEY]"), or for "SPEC2 minus SPEC1" how far the comparison moves from SPEC1's
    group to SPEC2's, paired by run seed (records.gap_change: "behind" when the gap grows)."""
    if " minus " in spec:
        second, first = spec.split(" minus ", 1)
        g = R.gap_change(comparison(recs, first), comparison(recs, second))
        if g is None:
            raise ValueError(f"claim {spec!r}: the two comparisons share no run seed")
        return g
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


def side(word: str, before: str) -> str:
    """A direction word's side (SIDES), "not-" before it when the words just before deny it ("is not ahead")."""
    found = next(k for k, pattern in SIDES.items() if re.fullmatch(pattern, word, re.I))
    return "not-" + found if found in WORDS and NEGATED.search(before) else found


def agrees(said: str, claimed: set) -> bool:
    """Whether a sentence's side for a word agrees with the words of the claim it stands under: the same, or
    a denial and a direction that fits it ("not ahead" under "behind", "level" under "not-ahead")."""
    if said == "change" or "none" in claimed or said in claimed:
        return True
    sides = {"ahead", "behind", "level"}
    return any(said.startswith("not-") and c in sides - {said[4:]} or c.startswith("not-") and said in sides - {c[4:]}
               for c in claimed)


def claim_words(claim: str) -> set:
    """The WORDs a claim marker's text states ("ahead X; behind Y" -> {"ahead", "behind"})."""
    return {p.split()[0] for p in claim.split(";") if p.split() and p.split()[0] in WORDS + ("none",)}


def disagreements(s: str) -> list:
    """(word, its side, the claim) for each direction word of sentence s whose side its claim does not state: a word
    belongs to the first claim marker after it in the sentence, or to the last one when none follows."""
    marks = list(CLAIM.finditer(s))
    out = []
    for w in DIRECTION.finditer(s):
        if any(m.start() <= w.start() < m.end() for m in marks):
            continue                                            # a word inside a marker is the marker's
        m = next((m for m in marks if m.start() > w.start()), marks[-1])
        said = side(w[1], CLAIM.sub("", s[:w.start()]))
        if not agrees(said, claim_words(m[1])):
            out.append((w[1], said, m[1]))
    return out


def problems(recs, text: str, name: str) -> list:
    """What is wrong with a doc's claims: a claim the records contradict, a sentence with a direction word and no
    claim marker, or a sentence whose direction word says another side than its claim."""
    out = []
    for m in CLAIM.finditer(text):
        ok, found = holds(recs, m[1])
        if not ok:
            out.append(f"{name}: the claim '{m[1]}' does not hold: the records say {found}")
    for s in sentences(prose(text)):
        words = DIRECTION.findall(CLAIM.sub("", s))
        if s.rstrip("*_ ").endswith("?"):                       # a question asserts nothing
            continue
        if words and not CLAIM.search(s):
            out.append(f"{name}: '{words[0]}' without a claim marker in: {s[:160]}")
        elif words:
            out += [f"{name}: '{w}' says {said}, but its claim says '{c}', in: {CLAIM.sub('', s)[:160]}"
                    for w, said, c in disagreements(s)]
    return out
