"""
What train.py needs besides the loop, one concept per module:

    flags.py        the command line: every TrainConfig and GPTConfig field a flag, each value checked before anything
                    is built or written
    run_control.py  a run's state, its folder and checkpoints: the out-dir and resume checks, the log a resumed run
                    keeps, saving and restoring, the stop flag (Ctrl-C, SIGTERM, --stop-at) and the exit codes
    report.py       what a run prints: the start-up banner, the progress and evaluation lines, the closing summary
"""
