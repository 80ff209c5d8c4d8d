# SPDX-License-Identifier: MIT
"""timer() and timed: a block's or a call's wall time, by perf_counter, sent
as one StatsD timing."""

import functools
from time import perf_counter

from ._statsd import _S


class timer:
    """with mlmon.timer("inference", category="model_inference"): ...

    Sends the block's duration in milliseconds when it ends (also when it
    raises; the exception goes on). .ms holds the duration afterwards."""

    __slots__ = ("op", "category", "ms", "_t0")

    def __init__(self, op, category=None):
        self.op = op
        self.category = category
        self.ms = None

    def __enter__(self):
        self._t0 = perf_counter()
        return self

    def __exit__(self, exc_type, exc, tb):
        ms = (perf_counter() - self._t0) * 1000.0
        self.ms = ms
        try:
            t = _S.templates.get((self.op, self.category, "ms")) or _S.template(self.op, self.category, "ms")
            _S.add(t % ms)
        except Exception:
            pass
        return False


def timed(op=None, category=None):
    """Decorator: @mlmon.timed, @mlmon.timed("op") or
    @mlmon.timed(category="preprocessing"); the op defaults to the
    function's qualified name."""
    def wrap(fn, name):
        @functools.wraps(fn)
        def inner(*args, **kwargs):
            t0 = perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                ms = (perf_counter() - t0) * 1000.0
                try:
                    _S.add(_S.template(name, category, "ms") % ms)
                except Exception:
                    pass
        return inner

    if callable(op):  # bare @mlmon.timed
        return wrap(op, op.__qualname__)
    return lambda fn: wrap(fn, op if op is not None else fn.__qualname__)
