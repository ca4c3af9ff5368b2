"""Independent work run beside the calling thread.

The compiled kernels and numpy's operations on large arrays release the GIL, so two
independent stages of one analysis (the host contention model beside the weighing and the
path; the self-check beside the report) overlap on two cores instead of queueing on one.
A forked process cannot do this as cheaply: each page either side then touches is copied.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, TypeVar

from ctda.forking import usable_cpus

T = TypeVar("T")


def beside(fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> Callable[[], T]:
    """Start ``fn(*args, **kwargs)`` in a thread; the returned callable waits for its result
    (or raises what it raised). On one usable CPU it runs when the result is asked for.

    ``fn`` must only read what the caller goes on to use (or compute the same cached values).
    """
    if usable_cpus() < 2:
        return lambda: fn(*args, **kwargs)
    out: list[Any] = []

    def run() -> None:
        try:
            out.append((True, fn(*args, **kwargs)))
        except BaseException as exc:  # handed to the caller, who decides
            out.append((False, exc))

    thread = threading.Thread(target=run, name=f"ctda-{getattr(fn, '__name__', 'work')}", daemon=True)
    thread.start()

    def result() -> T:
        thread.join()
        ok, value = out[0]
        if not ok:
            raise value
        return value  # type: ignore[no-any-return]

    return result
