"""
The one command-line convention of this project: flags generated from config dataclasses.

Every script keeps its settings in a @dataclass whose fields carry a one-line comment; `parse` turns the
fields into flags and the comments into the `--help` text:

    @dataclass
    class SampleConfig:
        out_dir: str = "out/lev"      # run directory holding ckpt.pt
        top_k: int = 200              # keep the k most likely tokens (0 = all)

    cfg = parse(SampleConfig, argv, description=__doc__)      # python sample.py --top-k=50 --out_dir=out/tied

Every field becomes a flag in two spellings, `--max-iters` and `--max_iters`; booleans take `--compile`,
`--compile=True`, `--compile=False` (also 1/0, yes/no); `list[...]` fields take several values; a field
with a fixed set of values (the class's CHOICES) lists them. A field whose type is itself a dataclass
contributes its fields under its name (GPTConfig.lev: LEVConfig -> `--lev-k`, `--lev-rank`, ...), except those
the parent sets itself (the parent's DERIVED). Values are checked here, so a bad flag is an argparse error
(exit code 2, one sentence, no traceback), never a crash deep in the run.
"""
import argparse
import dataclasses
import functools
import inspect
import io
import math
import re
import textwrap
import tokenize
import typing
from typing import get_type_hints


def str2bool(s) -> bool:
    if isinstance(s, bool):
        return s
    v = str(s).strip().lower()
    if v in ("1", "true", "yes", "y", "on"):
        return True
    if v in ("0", "false", "no", "n", "off"):
        return False
    raise argparse.ArgumentTypeError(f"expected a boolean (True/False, 1/0, yes/no), got {s!r}")


def checked(kind, minimum=None, exclusive=False, maximum=None, below=None):
    """An argparse type that converts with `kind` and rejects values below (or at) `minimum`, above `maximum`, at or
    above `below`, and (floats) nan and inf."""
    def convert(s):
        try:
            v = kind(s)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {kind.__name__}, got {s!r}") from None
        if kind is float and not math.isfinite(v):
            raise argparse.ArgumentTypeError(f"must be a finite number, got {s}")
        if minimum is not None and (v < minimum or (exclusive and v == minimum)):
            raise argparse.ArgumentTypeError(f"must be {'>' if exclusive else '>='} {minimum}, got {s}")
        if maximum is not None and v > maximum:
            raise argparse.ArgumentTypeError(f"must be <= {maximum}, got {s}")
        if below is not None and v >= below:
            raise argparse.ArgumentTypeError(f"must be < {below}, got {s}")
        return v
    convert.__name__ = kind.__name__
    return convert


def number(s) -> int:
    """An int that may be written like a float: 2e9, 1_000_000."""
    try:
        v = float(s)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {s!r}") from None
    if v != int(v):
        raise argparse.ArgumentTypeError(f"expected a whole number, got {s!r}")
    return int(v)


_FIELD = re.compile(r"\s+(\w+)\s*:")
# The help of fields that several commands share, for such a field written without a comment of its own.
COMMON_HELP = {
    "device": "auto (cuda, then mps, then cpu), cpu, cuda, cuda:N, mps",
    "data_root": "where prepared datasets live (\"\" = this project's data/ folder)",
}


@functools.lru_cache(maxsize=None)
def field_help(cls) -> dict:
    """{field: its comment} read from the dataclass's source: the comment after the field (or after the last
    line of a default that spans several lines), plus the comment-only lines right below it that are indented
    further than the field (a comment at the field's own indentation heads the next fields). A field of
    COMMON_HELP written without a comment gets that text."""
    try:
        lines = textwrap.dedent(inspect.getsource(cls)).splitlines()
    except (OSError, TypeError):                                   # no source (e.g. built in a REPL)
        return {}
    names, out, current, depth, indent = {f.name for f in dataclasses.fields(cls)}, {}, None, 0, 0
    margin = lambda line: len(line) - len(line.lstrip())
    for line in lines:
        m = _FIELD.match(line)
        code = line.split("#")[0]
        if depth > 0 and current:                                  # a default continued on this line
            out[current] = (out[current] + " " + _comment(line)).strip()
            depth += code.count("(") + code.count("[") + code.count("{") - code.count(")") - code.count("]") - code.count("}")
        elif m and m.group(1) in names:
            current, indent = m.group(1), margin(line)
            out[current] = _comment(line)
            depth = code.count("(") + code.count("[") + code.count("{") - code.count(")") - code.count("]") - code.count("}")
        elif line.strip().startswith("#") and current and margin(line) > indent:   # the comment, continued
            out[current] = (out[current] + " " + line.strip()[1:].strip()).strip()
        elif line.strip():
            current = None
    return {**{n: COMMON_HELP[n] for n in names & set(COMMON_HELP)}, **{k: v for k, v in out.items() if v}}


def _comment(line: str) -> str:
    """The text of a line's trailing comment ('' if none), found by the tokenizer (a '#' in a string is not one)."""
    try:
        for tok in tokenize.generate_tokens(io.StringIO(line.strip() + "\n").readline):
            if tok.type == tokenize.COMMENT:
                return tok.string[1:].strip()
    except (tokenize.TokenError, IndentationError, SyntaxError):
        pass
    return ""


def flat_fields(cls) -> list:
    """[(flag name, field, class that declares it, class's choices)] for every field of dataclass cls, one nesting
    level deep: a field whose type is a dataclass gives its own fields as <name>_<field>, except the ones the
    parent sets itself (cls.DERIVED[name])."""
    hints, out = get_type_hints(cls), []
    for f in dataclasses.fields(cls):
        inner = hints[f.name]
        if dataclasses.is_dataclass(inner):
            skip = getattr(cls, "DERIVED", {}).get(f.name, ())
            out += [(f"{f.name}_{g.name}", g, inner, getattr(inner, "CHOICES", {}))
                    for g in dataclasses.fields(inner) if g.name not in skip]
        else:
            out.append((f.name, f, cls, getattr(cls, "CHOICES", {})))
    return out


def add_dataclass_args(parser, cls, skip=(), choices=None, checks=None, defaults=None, positional=(),
                       suppress=False):
    """Add one flag per field of dataclass `cls` (its comment is the help; nested dataclasses: flat_fields).
    `checks` maps field -> argparse type (e.g. checked(int, 1)), `choices` maps field -> allowed values (added
    to the class's own CHOICES), `defaults` overrides the dataclass defaults (e.g. a preset), `positional` names
    fields given without a flag. suppress=True leaves unset flags out of the namespace (to tell the flags
    written on a command line from defaults)."""
    checks, defaults = checks or {}, defaults or {}
    group = parser.add_argument_group(cls.__name__)
    for name, f, owner, owner_choices in flat_fields(cls):
        if name in skip:
            continue
        default = defaults.get(name, f.default if f.default is not dataclasses.MISSING else
                               (f.default_factory() if f.default_factory is not dataclasses.MISSING else None))
        kind = get_type_hints(owner)[f.name]
        many = typing.get_origin(kind) is list
        kind = typing.get_args(kind)[0] if many else kind
        shown = " ".join(map(str, default)) if many and default else repr(default)
        text = field_help(owner).get(f.name, "").replace("%", "%%")
        allowed = (choices or {}).get(name, owner_choices.get(f.name))
        kw = dict(default=argparse.SUPPRESS if suppress else default, choices=allowed,
                  help=f"{text} (default: {shown})" if text else f"(default: {shown})")
        if kind is bool:
            kw.update(type=str2bool, nargs="?", const=True, metavar="BOOL")
        else:
            kw.update(type=checks.get(name, kind), nargs=("+" if many else None))
        if name in positional:
            required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
            if required and not suppress:
                kw.pop("default")
            elif not many:
                kw["nargs"] = "?"
            if many:
                kw["nargs"] = "+" if required and not suppress else "*"
            group.add_argument(name, **kw)
        else:
            flags = ["--" + name.replace("_", "-")] + (["--" + name] if "_" in name else [])
            group.add_argument(*flags, dest=name, **kw)


def pick(cls, namespace, **extra):
    """Build dataclass `cls` from the namespace entries named like its flags (flat_fields), plus `extra`."""
    values, hints, kw = vars(namespace), get_type_hints(cls), {}
    for f in dataclasses.fields(cls):
        inner = hints[f.name]
        if dataclasses.is_dataclass(inner):                        # lev_k, lev_rank, ... -> LEVConfig(k=, rank=, ...)
            kw[f.name] = inner(**{g.name: values[f"{f.name}_{g.name}"] for g in dataclasses.fields(inner)
                                  if f"{f.name}_{g.name}" in values})
        elif f.name in values:
            kw[f.name] = values[f.name]
    kw.update(extra)
    return cls(**kw)


def flatten(cls, obj) -> dict:
    """A dataclass instance (or its asdict) as {flag name: value}, nested dataclasses spread out as flat_fields
    names them (e.g. to compare two configs, or to put a saved config back into a namespace)."""
    d = dataclasses.asdict(obj) if dataclasses.is_dataclass(obj) else dict(obj)
    hints, out = get_type_hints(cls), {}
    for k, v in d.items():
        inner = hints.get(k)
        if inner is not None and dataclasses.is_dataclass(inner) and isinstance(v, dict):
            out.update({f"{k}_{name}": value for name, value in v.items()})
        else:
            out[k] = v
    return out


def parse(cls, argv=None, description=None, **kw):
    """A script's whole command line from one dataclass: parse argv (default sys.argv[1:]) into `cls`.
    kw goes to add_dataclass_args (choices, checks, defaults, positional). A ValueError raised by the
    dataclass's own checks (__post_init__) becomes an argparse error."""
    parser = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_dataclass_args(parser, cls, **kw)
    args = parser.parse_args(argv)
    try:
        return pick(cls, args)
    except ValueError as e:
        parser.error(str(e))


def explicit_flags(classes, argv, **kw):
    """The fields of `classes` (dataclasses) whose flags are actually written in argv, to tell them from
    defaults. kw as for add_dataclass_args (only skip and positional matter)."""
    probe = argparse.ArgumentParser(add_help=False)
    for cls in classes:
        add_dataclass_args(probe, cls, skip=kw.get("skip", ()), positional=kw.get("positional", ()), suppress=True)
    given, _ = probe.parse_known_args(argv)
    return set(vars(given))
