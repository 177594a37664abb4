"""
A command line generated from config dataclasses (used by train.py, sample.py, eval.py, bench.py).

Every dataclass field becomes a flag in two spellings, `--max-iters` and `--max_iters`; booleans take
`--compile`, `--compile=True`, `--compile=False` (also 1/0, yes/no); a field with a fixed set of values
lists them. Values are checked here, so a bad flag is an argparse error (exit code 2, one sentence,
no traceback), never a crash deep in the run.
"""
import argparse
import dataclasses
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


def add_dataclass_args(parser, cls, skip=(), choices=None, checks=None, defaults=None):
    """Add one flag per field of dataclass `cls`. `checks` maps field -> argparse type (e.g. checked(int, 1)),
    `choices` maps field -> allowed values, `defaults` overrides the dataclass defaults (e.g. a preset)."""
    hints = get_type_hints(cls)
    choices, checks, defaults = choices or {}, checks or {}, defaults or {}
    group = parser.add_argument_group(cls.__name__)
    for f in dataclasses.fields(cls):
        if f.name in skip:
            continue
        default = defaults.get(f.name, f.default)
        flags = ["--" + f.name.replace("_", "-")] + (["--" + f.name] if "_" in f.name else [])
        kind = hints[f.name]
        if kind is bool:
            group.add_argument(*flags, dest=f.name, type=str2bool, nargs="?", const=True, default=default,
                               metavar="BOOL", help=f"(default {default})")
        else:
            group.add_argument(*flags, dest=f.name, type=checks.get(f.name, kind), default=default,
                               choices=choices.get(f.name), help=f"(default {default!r})")


def pick(cls, namespace, **extra):
    """Build dataclass `cls` from the namespace entries named like its fields (plus `extra`)."""
    names = {f.name for f in dataclasses.fields(cls)}
    kw = {k: v for k, v in vars(namespace).items() if k in names}
    kw.update(extra)
    return cls(**kw)


def explicit_flags(parser, argv):
    """The dests of the flags actually written on the command line (to tell them from defaults)."""
    probe = argparse.ArgumentParser(add_help=False)
    for a in parser._actions:
        if a.option_strings and a.dest != "help":
            probe.add_argument(*a.option_strings, dest=a.dest, nargs=a.nargs, const=a.const,
                               default=argparse.SUPPRESS)
    given, _ = probe.parse_known_args(argv)
    return set(vars(given))
