"""cli.py: flags from dataclass fields, their comments as --help, lists, positionals, explicit flags."""
from dataclasses import dataclass, field

import pytest

from util.cli import explicit_flags, field_help, parse


@dataclass
class Demo:
    corpus: str = "default"        # which corpus to read
    steps: int = 10                # optimizer steps; a '#' inside "quotes" is not a comment
    compile: bool = False          # torch.compile the model
    edges: list[float] = field(default_factory=lambda: [1e-4, 1e-5])   # bucket edges,
                                   # continued on a second line
    label: str = "a # b"           # a default that holds a hash
    # a section comment at the fields' own indentation heads the next fields: no one's help
    seed: int = 0                  # the seed


def test_comments_become_help(capsys):
    helps = field_help(Demo)
    assert helps["corpus"] == "which corpus to read"
    assert helps["edges"] == "bucket edges, continued on a second line"
    assert helps["label"] == "a default that holds a hash"
    assert helps["seed"] == "the seed" and "section" not in " ".join(helps.values())
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


SCRIPTS = {  # script -> (module, its config dataclasses, flags it leaves out)
    "train.py": ("train", ["TrainConfig", "GPTConfig"], ["vocab_size"]), "sample.py": ("sample", ["SampleConfig"], []),
    "evaluate.py": ("evaluate", ["EvalConfig"], []), "bench.py": ("bench", ["BenchConfig"], []),
    "export.py": ("export", ["ExportConfig"], []),
    "lev.py": ("lev", ["WalkthroughConfig"], []), "model.py": ("model", ["GPTConfig"], ["emb"]),
    "data/prepare.py": ("data.prepare", ["PrepareConfig"], []), "data/loader.py": ("data.loader", ["ShowConfig"], []),
    "data/sources.py": ("data.sources", ["CountConfig"], []),
    "experiments/reproduce.py": ("experiments.reproduce", ["ReproduceConfig"], []),
    "experiments/sweep.py": ("experiments.sweep", ["SweepConfig"], []),
    "benchmarks/gpu_check.py": ("benchmarks.gpu_check", ["CheckConfig"], []),
    "benchmarks/head_parts.py": ("benchmarks.head_parts", ["PartsConfig"], []),
}


@pytest.mark.slow
@pytest.mark.parametrize("script", list(SCRIPTS))
def test_every_script_explains_every_flag(script):
    """One convention for every script: a config dataclass whose every field has a comment, shown by --help
    (a nested dataclass's fields too: GPTConfig.lev's as --lev-k, ...)."""
    import importlib
    import subprocess
    import sys
    from dataclasses import fields, is_dataclass
    from conftest import ROOT
    from util.cli import flat_fields
    module, classes, left_out = SCRIPTS[script]
    mod = importlib.import_module(module)
    argv = [sys.executable, "-m", module, "--help"] if "/" in script else [sys.executable, script, "--help"]
    out = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    text = " ".join(out.stdout.split())
    for cls in classes:
        cls = getattr(mod, cls)
        for owner in {cls, *(f.type for f in fields(cls) if is_dataclass(f.type))}:
            for f in fields(owner):
                assert field_help(owner).get(f.name), f"{script}: field {f.name} of {owner.__name__} has no comment"
        for name, f, owner, _ in flat_fields(cls):
            if name not in left_out:
                shown = " ".join(field_help(owner)[f.name].split())[:40]
                assert shown in text, f"{script} --help lacks {name}"
        for name in left_out:
            assert f"--{name.replace('_', '-')} " not in text, f"{script} --help shows {name}"
