"""benchmarks/gpu_check.py's dry run: every check at tiny sizes on the CPU must pass (a failure there is a bug in the check or
in the code it checks), and one check that raises is recorded as failed while the others still run."""
import json
import subprocess
import sys

import pytest

from benchmarks import gpu_check
from conftest import ROOT

pytestmark = pytest.mark.slow


def test_dry_run_every_check_ok(tmp_path):
    p = subprocess.run([sys.executable, "-m", "benchmarks.gpu_check", "--dry-run", "--out", str(tmp_path)], cwd=ROOT,
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    report = json.loads((tmp_path / "report.json").read_text())
    status = {c["name"]: c["status"] for c in report["checks"]}
    assert list(status) == list(gpu_check.CHECKS)
    assert status.pop("torchrun") == "skipped"                   # one process on a CPU: nothing to run
    failed = {c["name"]: c.get("error") for c in report["checks"] if c["status"] == "failed"}
    assert set(status.values()) == {"ok"}, failed
    assert report["environment"]["torch"] and report["environment"]["device"] == "cpu"
    pile = next(c for c in report["checks"] if c["name"] == "pile_train")["numbers"]
    assert pile["lev"]["val_loss"][-1] < pile["lev"]["val_loss"][0]
    tune = next(c for c in report["checks"] if c["name"] == "tune")["numbers"]
    assert tune["tied"]["vs_default"] == tune["lev"]["vs_default"] == 1.0
    assert {"lev chunk 2^23", "lev chunk 2^28", "tied plain head", "lev plain head"} <= set(tune)   # every variant timed
    assert not any("error" in v for v in tune.values()), tune
    for arm in ("tied", "lev"):                                  # a step's top operators: the matmuls are among them
        prof = tune[f"profile_{arm}"]
        assert any(name.startswith(("aten::mm", "aten::addmm", "aten::bmm", "aten::linear")) for name, *_ in
                   prof["top_ops"]), prof["top_ops"]
    md = (tmp_path / "report.md").read_text()
    assert all(f"| {name} |" in md for name in gpu_check.CHECKS) and md in p.stdout


def test_a_failing_check_is_recorded_and_the_others_run(tmp_path, monkeypatch):
    def boom(ctx):
        raise ValueError("deliberate failure")
    monkeypatch.setattr(gpu_check, "check_lev_cuda", boom)
    report = gpu_check.main(["--dry-run", "--out", str(tmp_path), "--only", "env_compile,lev_cuda,head_bf16"])
    status = {c["name"]: c for c in report["checks"]}
    assert [c["status"] for c in report["checks"]] == ["ok", "failed", "ok"]
    assert "ValueError: deliberate failure" in status["lev_cuda"]["error"]
    assert any("boom" in line for line in status["lev_cuda"]["traceback"])
    assert "## lev_cuda failed" in (tmp_path / "report.md").read_text()


def test_a_check_past_its_time_limit_fails_and_the_budget_skips_the_rest(tmp_path, monkeypatch):
    import time

    def slow(ctx):
        time.sleep(5)
    monkeypatch.setattr(gpu_check, "check_env_compile", slow)
    monkeypatch.setitem(gpu_check.LIMITS, "env_compile", 0.5)
    report = gpu_check.main(["--dry-run", "--out", str(tmp_path), "--only", "env_compile,head_bf16"])
    first = report["checks"][0]
    assert first["status"] == "failed" and "time limit" in first["error"] and first["seconds"] < 3
    report = gpu_check.main(["--dry-run", "--out", str(tmp_path), "--only", "head_bf16", "--budget", "1"])
    assert report["checks"][0]["status"] == "skipped" and "budget" in report["checks"][0]["reason"]


def test_unknown_check_is_a_clear_error(capsys):
    with pytest.raises(SystemExit) as e:
        gpu_check.main(["--only", "nope"])
    assert e.value.code == 2 and "unknown check" in capsys.readouterr().err
