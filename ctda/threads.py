"""Independent work run beside the calling thread.

The compiled kernels and numpy's operations on large arrays release the GIL, so two
independent stages of one analysis (the host contention model beside the weighing and the
path; the self-check beside the report) overlap on two cores instead of queueing on one.
A forked process cannot do this as cheaply: each page either side then touches is copied.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
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
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"ctda-{getattr(fn, '__name__', 'work')}")
    future = pool.submit(fn, *args, **kwargs)
    pool.shutdown(wait=False)  # the thread ends with its one task
    return future.result
