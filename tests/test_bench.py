"""bench.py end to end, at tiny sizes: its sections, their tables and JSON, its flags. Timings vary by machine, so
the tests check the figures' shape and consistency, not their values; each runs the script for seconds or more."""
import json
from dataclasses import fields
import math

import numpy as np
import pytest

import bench

pytestmark = pytest.mark.slow


def test_bench_runs_end_to_end(tmp_path):
    out = tmp_path / "bench.json"
    res = bench.main(["--tiny", "--reps", "1", "--memory", "none", "--sections", "lev,arms", "--json", str(out)])
    data = json.loads(out.read_text())
    assert data["lev"].keys() == res["lev"].keys() == set(bench.LEV_PATHS) and data["lev"]["naive"]["speedup_vs_naive"] == 1.0
    assert list(data["arms"]) == ["tied", "untied", "lev", "albert", "flat_mlp", "factorized_mlp", "lev_best"]
    best = bench.arm_config(bench.parse_args(["--tiny"]), "lev_best")          # the settings sweep's best LEV
    import train
    from experiments.reproduce import CONTROLS                         # lev_best's one definition, as train.py flags
    lev = lambda flags: train.setup([*flags, "--preset=tiny", "--quiet", "--max-iters=1",
                                     f"--out-dir={tmp_path / 'run'}"]).mc.lev
    changed = lambda a, b: {f.name: getattr(a, f.name) for f in fields(a) if getattr(a, f.name) != getattr(b, f.name)}
    assert best.emb == "lev" and changed(best.lev, bench.gpt_config(bench.parse_args(["--tiny"])).lev) == \
        changed(lev(CONTROLS["lev_best"]), lev(["--emb=lev"])) == dict(k=2, heads=32, seed_combine="concat")
    tokens = data["config"]["positions"]
    for r in data["arms"].values():                                   # MFU: the figures it is made of
        assert r["mfu"] == pytest.approx(r["flops_per_token"] * tokens / (r["step_ms"] / 1e3) / data["peak_flops"])
    assert data["arms"]["tied"]["step_vs_tied"] == 1.0 and data["arms"]["tied"]["sample_vs_tied"] == 1.0
    assert 0 < data["config"]["unique_ids"] <= tokens
    from util import runtime
    assert data["config"]["dtype"] == runtime.pick_dtype("auto", "cpu")[0]     # the bench's default dtype


def test_bench_dtype_and_head_section(tmp_path, capsys):
    res = bench.main(["--tiny", "--reps", "1", "--warmup", "0", "--memory", "none", "--sections", "dtype",
                      "--variants", "b,c,d,e"])                # all five, bf16 native here or not (tiny: seconds)
    assert "lev" not in res and "arms" not in res
    assert list(res["dtype"]) == ["cpu@1000", "ref@1000"]                       # --tiny: V = 1000
    for c in res["dtype"].values():
        rows = c["variants"]
        assert len(rows) == 10 and {(r["arm"], r["dtype"], r["fast"], r["rows"]) for r in rows.values()} == {
            (arm, d, f, r or "auto") for arm in ("tied", "lev") for d, f, r in bench.DTYPE_HEAD.values()}
        assert rows["tied (a) fp32+plain"]["vs_a"] == 1.0 and rows["tied (c) bf16+chunked"]["lev_vs_tied"] == \
            rows["lev (c) bf16+chunked"]["lev_vs_tied"]
    captured = capsys.readouterr()
    assert "dtype and head" in captured.out and "round 1/1" in captured.err          # progress, on stderr


@pytest.mark.parametrize("native", [True, False])
def test_bench_variants_auto_skips_bf16_where_it_is_emulated(monkeypatch, native):
    from util import runtime
    monkeypatch.setattr(runtime, "cpu_has_native_bf16", lambda: native)
    assert bench.parse_args(["--device", "cpu"]).variants == ("a,b,c,d,e" if native else "a,d")
    assert bench.parse_args(["--device", "cpu", "--variants", "e,c"]).variants == "a,c,e"   # (a): the ratios' base
    if not native:
        with pytest.raises(SystemExit, match="no native bf16"):
            bench.main(["--device", "cpu", "--curves"])


@pytest.fixture(scope="module")
def byte_docs(tmp_path_factory):
    """Python's own docs with the byte tokenizer (V=257): a small real dataset for train.py runs."""
    from data.prepare import main as prepare
    out = str(tmp_path_factory.mktemp("data") / "docs_byte")
    prepare(["default", "--tokenizer", "byte", "--out-dir", out])
    return out


def test_bench_quickstart_rss(byte_docs):
    a = bench.parse_args(["--tiny", "--quickstart-iters", "1", "--dataset", byte_docs])
    ballast = np.ones(1 << 28)                               # 2 GB in this process: a child must not report it
    r = bench.quickstart_rss(a, ["--dtype=float32", "--fast=lev"])
    assert 50 < r["peak_mb"] < 1500 and "train.py --emb=lev" in r["command"] and "--fast=lev" in r["command"]
    del ballast


def test_bench_curves(byte_docs, tmp_path):
    out = tmp_path / "curves.json"
    res = bench.main(["--tiny", "--curves", "--curve-iters", "2", "--curve-eval-interval", "1", "--seeds", "1",
                      "--dataset", byte_docs, "--json", str(out)])["curves"]
    assert json.loads(out.read_text())["curves"].keys() == res.keys() == {"tied", "lev"}
    for r in res.values():
        assert r["steps"] == [0, 1, 2]
        for dt in ("float32", "bfloat16"):
            assert len(r[dt]["final"]) == 1 and len(r[dt]["mean_curve"]) == 3 and math.isfinite(r[dt]["mean"])
        assert r["diff"] == pytest.approx(r["bfloat16"]["mean"] - r["float32"]["mean"])
        assert r["two_sd"] is None and r["within"] is None                # one seed: no seed sd to compare with


def test_bench_head_section_and_vocab_sizes(capsys):
    """The head alone and the dtype section at two vocabularies in one run, with GFLOP/s against this run's matmul
    rate (the figures vary by machine: checked for shape and consistency, not value)."""
    res = bench.main(["--tiny", "--reps", "1", "--warmup", "0", "--memory", "none", "--sections", "dtype,head",
                      "--dtype-sizes", "cpu", "--vocab-sizes", "300", "2000", "--variants", "a,d"])
    assert list(res["dtype"]) == ["cpu@300", "cpu@2000"] and list(res["head"]) == ["300", "2000"]
    assert set(res["peak_flops_by_dtype"]) == {"float32"}
    for c in res["dtype"].values():
        for r in c["variants"].values():
            assert r["gflops"] > 0 and r["of_peak"] == pytest.approx(r["gflops"] * 1e9 / res["peak_flops_by_dtype"]["float32"])
    for V, c in res["head"].items():
        assert c["V"] == int(V) and set(c["variants"]) == {"plain fp32", "chunked fp32"}
        assert c["variants"]["plain fp32"]["vs_plain_fp32"] == 1.0
    assert "the output head alone" in capsys.readouterr().out


def test_bench_os_section_counts_page_faults_both_ways():
    """The allocator section runs the head in fresh processes, glibc's defaults and kept memory (numbers vary by
    machine and are reported, not asserted)."""
    res = bench.main(["--tiny", "--sections", "os", "--memory", "none"])["os"]
    assert set(res) == {"default", "kept"} and res["default"]["allocator"] == "glibc's defaults"
    for r in res.values():
        assert len(r["warm_steps"]) == 8 and min(r["warm_steps"]) >= 0 and r["total"] == sum(r["warm_steps"])


def test_bench_memory_probe():
    assert bench.measure_memory(["--tiny"], "train:tied") > 0
    assert bench.measure_memory(["--tiny"], "dtype:cpu@1000:lev:(c) bf16+chunked") > 0


@pytest.mark.parametrize("argv, message", [(["--arms", "tied,nope"], "unknown arm"),
                                           (["--sections", "lev,speed"], "unknown section"),
                                           (["--variants", "a,x"], "unknown variant"),
                                           (["--compile=maybe"], "expected a boolean")])
def test_bench_bad_flag_is_a_clear_error(capsys, argv, message):
    with pytest.raises(SystemExit) as e:
        bench.parse_args(argv)
    assert e.value.code == 2 and message in capsys.readouterr().err


def test_bench_cli_both_spellings_and_booleans():
    a = bench.parse_args(["--tiny", "--compile=False", "--sample_tokens", "3", "--quickstart-iters", "0"])
    b = bench.parse_args(["--tiny", "--compile", "False", "--sample-tokens=3", "--quickstart_iters=0"])
    assert a == b and a.compile is False and a.sample_tokens == 3 and a.device == "cpu"
    assert bench.parse_args(["--compile"]).compile is True




def test_the_block_size_experiment_edits_only_its_two_constants(monkeypatch):
    """benchmarks/lev_blocks.py builds the kernel from a copy with BLOCK and PB replaced: the shipped sizes give the
    shipped source back, other sizes change exactly those two lines, and a kernel without them is refused."""
    import os
    from benchmarks import lev_blocks
    from fast import native
    with open(os.path.join(native.ROOT, "lev_kernel.cpp"), encoding="utf-8") as f:
        shipped = f.read()
    assert lev_blocks.kernel_source(**lev_blocks.SHIPPED) == shipped
    changed = lev_blocks.kernel_source(24, 136)
    diff = [(a, b) for a, b in zip(shipped.splitlines(), changed.splitlines()) if a != b]
    assert len(diff) == 2 and "BLOCK = 24;" in diff[0][1] and "PB = 136 / sizeof(T);" in diff[1][1]
    assert lev_blocks.sizes_in(changed) == dict(block=24, pb_bytes=136)        # the shipped sizes are read the same way
    assert f"BLOCK = {lev_blocks.SHIPPED['block']};" in shipped
    monkeypatch.setitem(lev_blocks.PATTERNS, "block", (r"constexpr int64_t BLOCK = 99;", ""))
    with pytest.raises(RuntimeError, match="task sizes changed"):
        lev_blocks.kernel_source(32, 64)


def test_the_block_size_record_points_each_constant_at_its_ratios():
    """lev_blocks' record: one constants entry per size, each figure a path to a measured ratio that resolves (the
    performance page's constants table reads them), only the sizes that varied that constant."""
    from render import perf
    from benchmarks import lev_blocks
    sizes = [(16, 64), (64, 32), (64, 64)]
    out = dict(config={}, shapes={name: dict(sizes={f"{b}_{p}": dict(ratio=1 + b / 1000 + p / 10000 + i)
                                                    for b, p in sizes}) for i, name in enumerate(lev_blocks.SHAPES)})
    c = lev_blocks.BlocksConfig(record="test_blocks", reps=3, tokens=100)
    rec = lev_blocks.record(c, out, sizes, ["--record", "test_blocks"])
    assert rec["command"] == "python -m benchmarks.lev_blocks --record test_blocks"
    assert rec["source"] == "benchmarks.lev_blocks"
    block, pb = rec["constants"]
    assert block["constant"] == "BLOCK = 64" and set(block["figures"]) == {"lev, 16", "lev, 64", "lev_best, 16",
                                                                           "lev_best, 64"}
    assert perf.figure(rec, block["figures"]["lev_best, 16"]) == perf.num(1 + 0.016 + 0.0064 + 1)
    assert set(pb["figures"]) == {"lev, 32", "lev, 64", "lev_best, 32", "lev_best, 64"}
