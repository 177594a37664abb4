"""The shape of the repository: the design card at the root, imports that go one way, comments without machine
names, tests that read nothing outside the repository."""
import ast
import json
import os
import re
import subprocess

import pytest

from conftest import ROOT

# The design card (README, lev.py, model.py, train.py, sample.py, data/, tests/, notebooks/), the commands the README
# runs, the folders the code map names, and the project's own files (requirements, CI, configuration).
ROOT_ENTRIES = {"README.md", "LICENSE", "requirements.txt", "requirements-dev.txt", "requirements-eval.txt",
                "requirements-eval-data.txt", "requirements-books.txt", "constraints.txt", "pytest.ini",
                ".gitignore", ".ci", "lev.py", "model.py", "input_maps.py", "train.py", "sample.py", "evaluate.py",
                "export.py", "bench.py", "data", "tests", "notebooks", "docs", "experiments", "fast", "util", "analysis",
                "benchmarks", "render", "training"}
# Imports go downward through these layers (a module imports its own layer or a lower one), and the folders of one
# layer import each other in no loop: plumbing imports no model, the engine no command, a library no command.
LAYERS = [("util",),                                  # plumbing: flags, devices, checkpoints' files, presets
          ("lev", "model", "input_maps"),             # the method, the model and the paper's other input maps
          ("fast", "data"),                           # the engine that computes the model fast; the data layer
          ("analysis", "benchmarks", "training"),     # the commands' libraries: evaluation, export, timing, GPU checks,
                                                      # train.py's flags, run control and reports
          ("train", "sample", "evaluate", "export", "bench",    # the commands at the root, and the docs' renderer
           "render"),                                         # (python -m render), which reads the records they write
          ("experiments",)]                           # recipes of many commands
LEVEL = {group: i for i, layer in enumerate(LAYERS) for group in layer}
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
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:   # from pkg import submodule:
            subs = [f"{node.module}.{a.name}" for a in node.names]                     # the submodule, not pkg
            names = [n for n in subs if n in modules] + ([node.module] if any(n not in modules for n in subs) else [])
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
                                        "requirements-eval.txt", "requirements-eval-data.txt", "requirements-books.txt",
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


def group(module: str) -> str:
    """A module's place in LAYERS: its top folder, or its own name at the root."""
    return module.split(".")[0]


def folder_edges(graph: dict) -> set:
    """{(group, group)}: which folders and root files import which (within a group aside)."""
    return {(group(m), group(n)) for m, ns in graph.items() for n in ns if group(m) != group(n)}


def test_imports_go_down_the_layers_and_folders_have_no_loop():
    graph = import_graph()
    edges = folder_edges(graph)
    assert {group(m) for m in graph} <= set(LEVEL), f"a folder or root file without a layer: {set(map(group, graph)) - set(LEVEL)}"
    upward = sorted((a, b) for a, b in edges if LEVEL[b] > LEVEL[a])
    assert not upward, f"imports that go up the layers (util < lev, model < fast, data < analysis < commands): {upward}"
    loops = sorted((a, b) for a, b in edges if (b, a) in edges)
    assert not loops, f"folders that import each other: {loops}"


@pytest.mark.parametrize("edge", [("util.checkpoint", "model"), ("analysis.records", "experiments.reproduce"),
                                  ("analysis.records", "render.fmt"), ("fast.native", "data.loader")])
def test_the_layer_check_finds_a_wrong_import(monkeypatch, edge):
    """The check above can fail: plumbing importing the model, a library importing a recipe or the docs' renderer, a
    loop between two folders of one layer (fast <-> data, once data imports fast too)."""
    graph = import_graph()
    graph[edge[0]] = graph.get(edge[0], set()) | {edge[1]}
    graph["data.loader"] = graph["data.loader"] | {"fast"}
    monkeypatch.setattr(__import__(__name__), "import_graph", lambda: graph)
    with pytest.raises(AssertionError, match="up the layers|import each other"):
        test_imports_go_down_the_layers_and_folders_have_no_loop()


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


def readable_text(path: str) -> str:
    """The text a reader sees in a file: a notebook's cell sources and text outputs (not its images' base64)."""
    raw = open(os.path.join(ROOT, path), encoding="utf-8", errors="replace").read()
    if not path.endswith(".ipynb"):
        return raw
    parts = []
    for cell in json.loads(raw)["cells"]:
        parts.append("".join(cell["source"]))
        for out in cell.get("outputs", []):
            parts.append("".join(out.get("text", "")))
            parts += ["".join(v) for k, v in out.get("data", {}).items() if k.startswith("text/")]
    return "\n".join(parts)


def test_no_machine_names_outside_docs():
    """Measurements and machine names live in docs/ (with their commands), not in code, README or lessons."""
    hits = []
    for path in tracked():
        if path.startswith("docs/") or path.endswith((".png", ".jpg")):
            continue
        hits += [f"{path}: {m.group(0)}" for m in MACHINE_NAMES.finditer(readable_text(path))]
    assert not hits, f"{hits}: move measurements and machine names to docs/performance.md"


def test_a_notebooks_images_are_not_read_as_text():
    """The check reads a notebook's text, not its figures: base64 can spell anything, a sentence cannot hide."""
    nb = os.path.join("notebooks", sorted(os.listdir(os.path.join(ROOT, "notebooks")))[0])
    text = readable_text(nb)
    assert "image/png" not in text and "import" in text


def test_tests_read_nothing_outside_the_repository():
    pattern = re.compile(r"\.\./shared|shared[/\\]data|dirname\(ROOT\)")
    hits = [p for p in tracked("tests/*.py") if pattern.search(open(os.path.join(ROOT, p), encoding="utf-8").read())
            and not p.endswith("test_layout.py")]
    assert not hits, hits


# The house style's budgets (its rule 1): the files a learner opens first, and every code file.
BUDGETS = {"lev.py": 400, "model.py": 350, "train.py": 350, "sample.py": 120}
CODE_LIMIT = 650
LESSON_MARKS = {"model.py": ("class GPT(", 150), "train.py": ("def train_step(", 150)}   # reached within the first N


def line_counts() -> dict:
    return {p: sum(1 for _ in open(os.path.join(ROOT, p), encoding="utf-8")) for p in tracked("*.py", "*.cpp")}


def test_the_lesson_files_keep_their_budgets():
    """lev.py, model.py, train.py and sample.py stay readable in one sitting, no code file grows past CODE_LIMIT
    lines (a feature that would break a budget gets a module of its own), and a learner reaches GPT and the
    training step early."""
    counts = line_counts()
    over = [f"{p}: {counts[p]} lines > {n}" for p, n in BUDGETS.items() if counts[p] > n]
    over += [f"{p}: {n} lines > {CODE_LIMIT}" for p, n in counts.items() if n > CODE_LIMIT]
    assert not over, f"over budget (split by concept; the house style's rule 1): {over}"
    for path, (mark, within) in LESSON_MARKS.items():
        lines = open(os.path.join(ROOT, path), encoding="utf-8").read().splitlines()
        at = next(i + 1 for i, line in enumerate(lines) if line.startswith(mark))
        assert at <= within, f"{path}: {mark!r} at line {at}, after the first {within}: move what comes before it"


@pytest.mark.parametrize("kind", ["budget", "limit", "mark"])
def test_the_budget_check_finds_a_file_over_it(monkeypatch, kind):
    """The check above can fail: a budget one line under model.py's length, a limit under bench.py's, a mark
    required before where it stands."""
    counts = line_counts()
    if kind == "budget":
        monkeypatch.setitem(BUDGETS, "model.py", counts["model.py"] - 1)
    elif kind == "limit":
        monkeypatch.setattr(__import__(__name__), "CODE_LIMIT", counts["bench.py"] - 1)
    else:
        monkeypatch.setitem(LESSON_MARKS, "train.py", ("def train_step(", 10))
    with pytest.raises(AssertionError, match="over budget|after the first"):
        test_the_lesson_files_keep_their_budgets()
