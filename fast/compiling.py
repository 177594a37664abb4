"""
torch.compile and the fast paths: the functions a compiled model must run eagerly (a graph break: loops over blocks
or chunks that would unroll, shapes that depend on the data), kept out of its graphs without importing torch._dynamo
in commands that never compile (torch.compiler.disable at import time costs every command about a second).

    compiled = fast.compile_model(model)   # torch.compile(model), the fast paths' eager functions disabled first
"""
import functools

import torch

EAGER = []   # (slot, fn) of each eager_when_compiled function; slot[0]: its torch.compiler.disable form, once made


def eager_when_compiled(fn):
    """fn, which a compiled graph runs eagerly as torch.compiler.disable(fn) would, once disable_eager has made that
    form (compile_model does, before it compiles); a model given to torch.compile directly traces fn itself (the same
    numbers, a longer compile). Outside torch.compile: fn."""
    slot = [None]

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        disabled = slot[0]
        if disabled is not None and torch.compiler.is_compiling():
            return disabled(*args, **kwargs)
        return fn(*args, **kwargs)
    EAGER.append((slot, fn))
    return wrapper


def disable_eager():
    """Make the torch.compiler.disable form of every eager_when_compiled function (this imports torch._dynamo)."""
    for slot, fn in EAGER:
        if slot[0] is None:
            slot[0] = torch.compiler.disable(fn)


def compile_model(obj, **kwargs):
    """torch.compile(obj, **kwargs) with the fast paths' eager functions kept out of its graphs."""
    disable_eager()
    return torch.compile(obj, **kwargs)
