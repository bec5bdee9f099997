"""Where independent runs go: this process, a local process pool, or a Ray cluster.

Each backend maps one picklable function over items and yields results as they finish
(completion order; callers restore the input order). The function must be importable by
reference (a module-level function, or functools.partial of one) so that pool workers and
Ray workers can load it. Capacity search maps its candidates here; sweeps, their points.
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from typing import Any

from perfcast.errors import InputError

__all__ = ["BACKENDS", "RAY_EXTRA", "choose_backend", "imap_unordered"]

BACKENDS = ("local", "ray")
RAY_EXTRA = "pip install 'perfcast[ray]'"


def choose_backend(ray: bool, environ: Mapping[str, str] | None = None) -> str:
    """"ray" when asked for, or when RAY_ADDRESS names a cluster; otherwise "local"."""
    environ = os.environ if environ is None else environ
    return "ray" if ray or environ.get("RAY_ADDRESS") else "local"


def _worker_count(workers: int | None, items: int) -> int:
    if workers is not None and workers < 1:
        raise InputError("workers", f"{workers} is not a worker count", "an integer >= 1")
    return max(1, min(workers or os.cpu_count() or 1, items))


def imap_unordered(fn: Callable[[Any], Any], items: Sequence[Any], backend: str = "local",
                   workers: int | None = None) -> Iterator[Any]:
    """fn(item) for every item, yielded as each finishes. One worker: in this process."""
    if backend not in BACKENDS:
        raise InputError("backend", f"unknown backend {backend!r}", BACKENDS)
    if backend == "ray":
        yield from _ray_map(fn, items, workers)
        return
    count = _worker_count(workers, len(items))
    if count == 1:
        for item in items:
            yield fn(item)
        return
    yield from _pool_map(fn, items, count)


def _pool_map(fn: Callable[[Any], Any], items: Sequence[Any], count: int) -> Iterator[Any]:
    # spawn, not fork: the parent runs threads (rich's progress refresh), and a forked child
    # inherits their locks held
    pool = ProcessPoolExecutor(count, mp_context=multiprocessing.get_context("spawn"))
    finished = False
    try:
        futures = [pool.submit(fn, item) for item in items]
        for future in as_completed(futures):
            yield future.result()
        finished = True
    finally:
        if not finished:  # interrupted: stop the points in flight rather than wait for them
            for process in list((getattr(pool, "_processes", None) or {}).values()):
                process.terminate()
        pool.shutdown(wait=finished, cancel_futures=True)


def _call(fn: Callable[[Any], Any], item: Any) -> Any:
    return fn(item)


def _ray_map(fn: Callable[[Any], Any], items: Sequence[Any],
             workers: int | None) -> Iterator[Any]:
    """On the cluster at RAY_ADDRESS, or a local Ray instance (`workers` CPUs) without one;
    a Ray session already initialised by the caller is used as it is."""
    try:
        import ray
    except ImportError:
        raise InputError("ray", "the Ray backend needs the ray package, which is not "
                         "installed", RAY_EXTRA) from None
    started = not ray.is_initialized()
    if started:
        address = os.environ.get("RAY_ADDRESS") or "local"
        extra = {"num_cpus": workers} if address == "local" and workers else {}
        ray.init(address=address, include_dashboard=False, log_to_driver=False, **extra)
    remote = ray.remote(_call)
    pending = [remote.remote(fn, item) for item in items]
    try:
        while pending:
            done, pending = ray.wait(pending, num_returns=1)
            yield ray.get(done[0])
    finally:
        for ref in pending:
            ray.cancel(ref)
        if started:
            ray.shutdown()
