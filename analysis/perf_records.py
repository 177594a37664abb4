"""
Benchmark records: one JSON file per measuring run in docs/performance/records/, the one home of every time, ratio and
memory figure that docs/performance.md and the README quote (render/perf.py renders them).

    python bench.py --tokens zipf --record 2026-12-06_cpu_reference        # writes docs/performance/records/<name>.json
    python -m benchmarks.gpu_check --only bench,tune --record 2026-12-06_gpu

A record is written by the command that measured it and never edited by hand; the figures measured before records
existed were transcribed once from the page (their `source` says so, and they hold only the figures the page showed).
Its fields:

    name, title    the file's name, and what the run measured
    date, commit   the day it ran; the code's commit ("+changes" when the tree differed from it; null where unknown)
    command        the command as typed, from the project folder
    machine        kind (the label tables group rows by: "<cores>-core <CPU brand> (<flags>)" or the GPU's name), cpu (the
                   model name), cores, flags (those of FLAGS the CPU has), gpu (name, or null)
    torch, dtype   the torch version; the default step's number format there (bench.py's --dtype auto)
    source         "bench.py", "benchmarks.gpu_check", or "transcribed from docs/performance.md at commit <hash>"
    supersedes     records this one replaces (they move to the page's history table); note: what else a reader must know
    bench          bench.py's JSON result as it wrote it: config, lev, arms, dtype, head, os, quickstart_rss, curves,
                   peak_flops(_by_dtype); each timing keeps its per-round times (times_ms, step_times_ms), so the spread
                   over rounds is in the record; a transcribed record also may hold head_parts and constants
    gpu            gpu_check's numbers: bench ({dtype, compile, peak_flops, <size>: {<arm>: step_ms, times_ms, tok_s, mfu,
                   peak_mb, vs_tied}}), and tune and pile_train where they ran
    constants      (transcribed records) the measurements behind the code's tuned constants: per entry the constant,
                   its file, what was measured, and figures {label: number, text, or "@a/b/c": a value of this record}
"""
import datetime
import glob
import json
import os
import re
import shlex

from analysis.records import ROOT, commit

RECORDS = os.path.join(ROOT, "docs", "performance", "records")
FLAGS = ("avx2", "avx512f")                        # with every flag ending in "_bf16": what decides a CPU step's speed
REQUIRED = dict(name=str, date=str, command=str, machine=dict, torch=str, dtype=str, source=str)
SECTIONS = ("bench", "gpu", "constants")           # a record holds at least one
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")


def machine() -> dict:
    """This machine: its GPU (when CUDA is available) or its CPU's model name, cores and the flags that matter."""
    import torch
    cores = os.cpu_count()
    if torch.cuda.is_available():
        name = torch.cuda.get_device_name(0)
        count = torch.cuda.device_count()
        return dict(kind=name if count == 1 else f"{count}x {name}", cpu=None, cores=cores, flags=[], gpu=name,
                    gpu_count=count)
    model, flags = "", []
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name") and not model:
                    model = line.split(":", 1)[1].strip()
                elif line.startswith("flags") and not flags:
                    flags = line.split(":", 1)[1].split()
    except OSError:
        import platform
        model = platform.processor()
    kept = [f for f in FLAGS if f in flags] + sorted(f for f in flags if f.endswith("_bf16"))
    return dict(kind=kind_label(cores, model, kept), cpu=model, cores=cores, flags=kept, gpu=None)


def kind_label(cores: int, model: str, flags: list) -> str:
    """"2-core <brand> (<flags>)": the brand is the model name's first two words without (R) and (TM), so that
    machines of one family and instruction set share a kind."""
    brand = " ".join(re.sub(r"\((R|TM|tm)\)", "", model).split()[:2]) or "unknown CPU"
    return f"{cores}-core {brand} ({', '.join(flags) or 'no AVX2'})"


def command_line(program: str, argv) -> str:
    """The command as a reader types it: "python bench.py --tokens zipf ..."."""
    return " ".join(["python", program, *map(shlex.quote, argv)])


def make(name: str, command: str, section: str, result: dict, dtype: str, title: str = "", note: str = None,
         source: str = "") -> dict:
    """A record of this run on this machine: result (bench.py's or gpu_check's numbers) under `section`; source: the
    program that measured it ("" = bench.py, or benchmarks.gpu_check for section "gpu")."""
    import torch
    rec = dict(name=name, title=title or None, date=datetime.date.today().isoformat(), commit=commit(),
               command=command, machine=machine(), torch=torch.__version__, dtype=dtype,
               source=source or ("benchmarks.gpu_check" if section == "gpu" else "bench.py"), supersedes=[], note=note)
    rec[section] = result
    check(rec)
    return rec


def path_of(name: str, root: str = None) -> str:
    return os.path.join(root or RECORDS, f"{name}.json")


def check_new(name: str, root: str = None):
    """Refuse a record name that is not a plain file name or is taken (before a run of minutes, not after it)."""
    if not NAME.fullmatch(name):
        raise ValueError(f"record name {name!r}: use letters, digits, '_', '-' and '.' (it names a file).")
    if os.path.exists(path_of(name, root)):
        raise ValueError(f"record {name!r} exists ({os.path.relpath(path_of(name, root), ROOT)}): pick another name "
                         f"or delete that file first.")


def check(rec, where: str = "the record"):
    """Raise ValueError, in a sentence naming `where` and the field, when a record lacks what the renderer reads."""
    if not isinstance(rec, dict):
        raise ValueError(f"{where} is not a JSON object.")
    for key, kind in REQUIRED.items():
        if not isinstance(rec.get(key), kind) or not rec[key]:
            raise ValueError(f"{where} has no {key} ({kind.__name__}): every record names "
                             f"{', '.join(REQUIRED)}.")
    if not re.fullmatch(r"\d{4}-\d\d-\d\d", rec["date"]):
        raise ValueError(f"{where}: date {rec['date']!r} is not YYYY-MM-DD.")
    if not isinstance(rec["machine"].get("kind"), str) or not rec["machine"]["kind"]:
        raise ValueError(f"{where}: machine has no kind (the label its rows are grouped by).")
    if not any(isinstance(rec.get(s), (dict, list)) and rec[s] for s in SECTIONS):
        raise ValueError(f"{where} holds no measurements: none of {', '.join(SECTIONS)}.")
    if not isinstance(rec.get("supersedes", []), list):
        raise ValueError(f"{where}: supersedes must be a list of record names.")
    for cfg, c in rec.get("bench", {}).get("dtype", {}).items():
        for k, row in c.get("variants", {}).items() if isinstance(c, dict) else [(None, None)]:
            if not isinstance(row, dict) or row.get("arm") not in ("tied", "lev") or not row.get("variant"):
                raise ValueError(f"{where}: bench.dtype[{cfg!r}] row {k!r} needs an arm (tied or lev) and a variant.")
    for size, arms in rec.get("gpu", {}).get("bench", {}).items():
        if isinstance(arms, dict) and not all(isinstance(r, dict) and "step_ms" in r for r in arms.values()):
            raise ValueError(f"{where}: gpu.bench[{size!r}] needs step_ms for every arm.")
    for i, c in enumerate(rec.get("constants", [])):
        if not isinstance(c, dict) or not all(c.get(k) for k in ("constant", "file", "measured", "figures")):
            raise ValueError(f"{where}: constants[{i}] needs constant, file, measured and figures.")


def save(rec: dict, root: str = None) -> str:
    """Write a record (checked first); -> its path."""
    check(rec, f"record {rec.get('name') if isinstance(rec, dict) else rec!r}")
    os.makedirs(root or RECORDS, exist_ok=True)
    path = path_of(rec["name"], root)
    with open(path, "w") as f:
        f.write(json.dumps(rec, indent=1) + "\n")
    return path


def load(path: str) -> dict:
    """The record in a file, checked; a malformed one is refused with the file's name."""
    try:
        with open(path) as f:
            rec = json.load(f)
    except json.JSONDecodeError as e:
        raise ValueError(f"{path} is not valid JSON ({e}).") from None
    check(rec, path)
    if rec["name"] != os.path.basename(path)[:-5]:
        raise ValueError(f"{path}: its name field is {rec['name']!r}, not the file's name.")
    return rec


def load_all(root: str = None) -> dict:
    """{name: record} of every record under root (default RECORDS)."""
    return {r["name"]: r for r in map(load, sorted(glob.glob(os.path.join(root or RECORDS, "*.json"))))}


def transcribed(rec: dict) -> bool:
    """Whether a record was copied from the page's text rather than written by the command that measured it."""
    return rec["source"].startswith("transcribed")
