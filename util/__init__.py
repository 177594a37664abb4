"""The run-time plumbing every command shares.

    presets.py     named sizes (the quick start, the reference size, tiny), train.py's presets, sampling defaults
    cli.py         flags and --help generated from config dataclasses
    runtime.py     device, dtype ("auto": bf16 where native), several processes, the allocator setting
    checkpoint.py  plain-data checkpoints, written atomically, loaded safely
    timing.py      timing on a shared machine (bench.py, experiments/gpu_check.py)
"""
