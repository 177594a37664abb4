"""The shape of the repository: the design card at the root, imports that go one way, comments without machine
names, tests that read nothing outside the repository."""
import ast
import os
import re
import subprocess

import pytest

from conftest import ROOT

# The design card (README, lev.py, model.py, train.py, sample.py, data/, tests/, notebooks/), the commands the README
# runs, the folders the code map names, and the project's own files (requirements, CI, configuration).
ROOT_ENTRIES = {"README.md", "LICENSE", "requirements.txt", "requirements-dev.txt", "requirements-eval.txt",
                "requirements-eval-data.txt", "constraints.txt", "pytest.ini",
                ".gitignore", ".ci", "lev.py", "model.py", "train.py", "sample.py", "evaluate.py", "export.py",
                "bench.py", "data", "tests", "notebooks", "docs", "experiments", "fast", "util", "analysis"}
MACHINE_NAMES = re.compile(r"EP[Y]C|Xe[o]n|A[M]X", re.IGNORECASE)   # brackets: this line is no hit itself


def tracked(*patterns) -> list:
    """The repository's tracked files (and new ones not ignored) matching git pathspecs."""
    out = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard", *patterns], cwd=ROOT,
                         capture_output=True, text=True)
    if out.returncode != 0:
        pytest.skip("not a git checkout")
    return [p for p in out.stdout.split() if os.path.exists(os.path.join(ROOT, p))]


def module_name(path: str) -> str:
    return path[:-3].replace("/", ".").removesuffix(".__init__")


def project_imports(path: str, modules: set) -> set:
    """The project modules a file imports anywhere in it (inside functions too: a lazy import is a dependency)."""
    tree = ast.parse(open(os.path.join(ROOT, path), encoding="utf-8").read())
    found = set()
    for node in ast.walk(tree):
        names = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        found |= {n for n in names if n in modules}
    return found - {module_name(path)}


def import_graph() -> dict:
    files = [p for p in tracked("*.py") if not p.startswith(("tests/", "notebooks/"))]
    modules = {module_name(p) for p in files}
    return {module_name(p): project_imports(p, modules) for p in files}


def test_the_root_is_the_design_card_and_the_commands():
    entries = {e for e in os.listdir(ROOT) if not e.startswith(".") or e in (".ci", ".gitignore")}
    entries = {e for e in entries if tracked(e)}                     # ignored things (.venv, out/, caches) aside
    assert entries <= ROOT_ENTRIES, (f"new at the root: {sorted(entries - ROOT_ENTRIES)}; put machinery in a folder "
                                     f"(fast/, util/, analysis/) and name it in the README's map of the code")


def test_the_readme_maps_every_folder_and_command():
    readme = open(os.path.join(ROOT, "README.md"), encoding="utf-8").read()
    block = readme[readme.index("## Map of the code"):]
    for entry in sorted(ROOT_ENTRIES - {"README.md", "LICENSE", "requirements.txt", "requirements-dev.txt",
                                        "requirements-eval.txt", "requirements-eval-data.txt",
                                        "constraints.txt", "pytest.ini", ".gitignore", ".ci"}):
        assert f"`{entry}" in block, f"the README's map of the code does not name {entry}"


def test_imports_have_no_cycle():
    graph = import_graph()
    assert "lev" in graph and "fast.lev_fast" in graph and len(graph) > 20
    state, path = {}, []

    def visit(m):
        state[m] = "open"
        path.append(m)
        for n in sorted(graph.get(m, ())):
            if state.get(n) == "open":
                raise AssertionError(f"import cycle: {' -> '.join(path[path.index(n):] + [n])}")
            if n not in state:
                visit(n)
        path.pop()
        state[m] = "done"

    for m in sorted(graph):
        if m not in state:
            visit(m)


def test_the_cycle_check_finds_a_cycle(monkeypatch):
    """The check above can fail: lev.py importing the fast path back is reported."""
    graph = import_graph()
    graph["lev"] = graph["lev"] | {"fast.lev_fast"}
    monkeypatch.setattr(__import__(__name__), "import_graph", lambda: graph)
    with pytest.raises(AssertionError, match="import cycle: .*lev"):
        test_imports_have_no_cycle()


def test_lev_py_is_the_method_alone():
    """lev.py needs nothing of the project but util.cli for its command line; the fast path imports it, one way."""
    graph = import_graph()
    assert graph["lev"] <= {"util.cli"}, graph["lev"]
    assert "lev" in graph["fast.lev_fast"]


def test_no_machine_names_outside_docs():
    """Measurements and machine names live in docs/ (with their commands), not in code, README or lessons."""
    hits = []
    for path in tracked():
        if path.startswith("docs/") or path.endswith((".png", ".jpg")):
            continue
        text = open(os.path.join(ROOT, path), encoding="utf-8", errors="replace").read()
        hits += [f"{path}: {m.group(0)}" for m in MACHINE_NAMES.finditer(text)]
    assert not hits, (f"{hits}: move measurements and machine names to docs/performance.md; in a notebook's saved "
                      f"figures (base64 text can spell a name by chance), save it with python -m util.notebooks")


def test_tests_read_nothing_outside_the_repository():
    pattern = re.compile(r"\.\./shared|shared[/\\]data|dirname\(ROOT\)")
    hits = [p for p in tracked("tests/*.py") if pattern.search(open(os.path.join(ROOT, p), encoding="utf-8").read())
            and not p.endswith("test_layout.py")]
    assert not hits, hits
