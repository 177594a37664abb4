"""cli.py: flags from dataclass fields, their comments as --help, lists, positionals, explicit flags."""
from dataclasses import dataclass, field

import pytest

from cli import explicit_flags, field_help, parse


@dataclass
class Demo:
    corpus: str = "default"        # which corpus to read
    steps: int = 10                # optimizer steps; a '#' inside "quotes" is not a comment
    compile: bool = False          # torch.compile the model
    edges: list[float] = field(default_factory=lambda: [1e-4, 1e-5])   # bucket edges,
                                   # continued on a second line
    label: str = "a # b"           # a default that holds a hash


def test_comments_become_help(capsys):
    helps = field_help(Demo)
    assert helps["corpus"] == "which corpus to read"
    assert helps["edges"] == "bucket edges, continued on a second line"
    assert helps["label"] == "a default that holds a hash"
    with pytest.raises(SystemExit) as e:
        parse(Demo, ["--help"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    for text in ("which corpus to read", "torch.compile the model", "continued on a second line", "(default: 10)"):
        assert text in " ".join(out.split()), text


def test_spellings_booleans_lists_and_positionals():
    assert parse(Demo, []) == Demo()
    c = parse(Demo, ["--steps=3", "--compile", "--edges", "1e-3", "1e-6"])
    assert (c.steps, c.compile, c.edges) == (3, True, [1e-3, 1e-6])
    assert parse(Demo, ["--compile=False"]).compile is False
    assert parse(Demo, ["minipile"], positional=("corpus",)).corpus == "minipile"
    assert parse(Demo, [], positional=("corpus",)).corpus == "default"


def test_bad_values_exit_2(capsys):
    for argv in (["--steps=x"], ["--compile=maybe"], ["--corpus=z"]):
        with pytest.raises(SystemExit) as e:
            parse(Demo, argv, choices=dict(corpus=("default", "minipile")))
        assert e.value.code == 2
    assert "invalid" in capsys.readouterr().err


def test_explicit_flags_tell_given_from_defaults():
    assert explicit_flags([Demo], ["--steps", "10", "--compile"]) == {"steps", "compile"}
    assert explicit_flags([Demo], []) == set()
