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
with a fixed set of values lists them. Values are checked here, so a bad flag is an argparse error
(exit code 2, one sentence, no traceback), never a crash deep in the run.
"""
import argparse
import dataclasses
import inspect
import io
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


def checked(kind, minimum=None, exclusive=False):
    """An argparse type that converts with `kind` and rejects values below (or at) `minimum`."""
    def convert(s):
        try:
            v = kind(s)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {kind.__name__}, got {s!r}") from None
        if minimum is not None and (v < minimum or (exclusive and v == minimum)):
            raise argparse.ArgumentTypeError(f"must be {'>' if exclusive else '>='} {minimum}, got {s}")
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


def field_help(cls) -> dict:
    """{field: its comment} read from the dataclass's source: the comment after the field (or after the last
    line of a default that spans several lines), plus the comment-only lines right below it that are indented
    further than the field (a comment at the field's own indentation heads the next fields)."""
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
    return out


def _comment(line: str) -> str:
    """The text of a line's trailing comment ('' if none), found by the tokenizer (a '#' in a string is not one)."""
    try:
        for tok in tokenize.generate_tokens(io.StringIO(line.strip() + "\n").readline):
            if tok.type == tokenize.COMMENT:
                return tok.string[1:].strip()
    except (tokenize.TokenError, IndentationError, SyntaxError):
        pass
    return ""


def add_dataclass_args(parser, cls, skip=(), choices=None, checks=None, defaults=None, positional=(),
                       suppress=False):
    """Add one flag per field of dataclass `cls` (its comment is the help). `checks` maps field -> argparse
    type (e.g. checked(int, 1)), `choices` maps field -> allowed values, `defaults` overrides the dataclass
    defaults (e.g. a preset), `positional` names fields given without a flag. suppress=True leaves unset
    flags out of the namespace (to tell the flags written on a command line from defaults)."""
    hints, helps = get_type_hints(cls), field_help(cls)
    choices, checks, defaults = choices or {}, checks or {}, defaults or {}
    group = parser.add_argument_group(cls.__name__)
    for f in dataclasses.fields(cls):
        if f.name in skip:
            continue
        default = defaults.get(f.name, f.default if f.default is not dataclasses.MISSING else
                               (f.default_factory() if f.default_factory is not dataclasses.MISSING else None))
        kind = hints[f.name]
        many = typing.get_origin(kind) is list
        kind = typing.get_args(kind)[0] if many else kind
        shown = " ".join(map(str, default)) if many and default else repr(default)
        text = helps.get(f.name, "").replace("%", "%%")
        kw = dict(default=argparse.SUPPRESS if suppress else default, choices=choices.get(f.name),
                  help=f"{text} (default: {shown})" if text else f"(default: {shown})")
        if kind is bool:
            kw.update(type=str2bool, nargs="?", const=True, metavar="BOOL")
        else:
            kw.update(type=checks.get(f.name, kind), nargs=("+" if many else None))
        if f.name in positional:
            required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
            if required and not suppress:
                kw.pop("default")
            elif not many:
                kw["nargs"] = "?"
            if many:
                kw["nargs"] = "+" if required and not suppress else "*"
            group.add_argument(f.name, **kw)
        else:
            flags = ["--" + f.name.replace("_", "-")] + (["--" + f.name] if "_" in f.name else [])
            group.add_argument(*flags, dest=f.name, **kw)


def pick(cls, namespace, **extra):
    """Build dataclass `cls` from the namespace entries named like its fields (plus `extra`)."""
    names = {f.name for f in dataclasses.fields(cls)}
    kw = {k: v for k, v in vars(namespace).items() if k in names}
    kw.update(extra)
    return cls(**kw)


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
