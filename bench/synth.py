"""The traces the analysis benchmarks run on: the largest real ones and synthetic replicas.

Shared by the ``analyze``, ``whatif`` and ``hta`` suites so they measure the same files.

Synthetic traces of about 1e5, 1e6 and 1e7 events are made by :mod:`bench.replicate`
(through :func:`bench.corpus.synthetic`, cached in ``bench/.cache``) from several real GPU
training traces, so that between them every pattern the analysis handles is exercised at
scale: NCCL collectives and a backward thread (``ddp_nccl``), recorded ``cuda_sync``
events (``alexnet``), an older Kineto format with a long single-threaded step
(``resnet50_v100``) and a ROCm trace with Python stacks and a backward thread
(``mi300_resnet18``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from bench import corpus
from bench.suites import Context

__all__ = ["SOURCES", "Target", "targets"]

#: replication sources (corpus-relative) and the pattern each brings
SOURCES: dict[str, str] = {
    "hta/ddp_nccl_allreduce_ws2_rank0.json.gz": "NCCL + backward thread",
    "hta/alexnet_param_benchmark_a100.json.gz": "cuda_sync events",
    "kineto/resnet50_v100_nw0_2021.json.gz": "2021 Kineto format",
    "tracelens/mi300_resnet18_train_bwd_thread.json.gz": "ROCm, Python stacks, backward thread",
}
#: a real GPU trace shipped with the repo, used when the corpus is absent
FALLBACK_SOURCE = "tests/data/hta/rocm62_mi250_minitoy_train.json.gz"

#: (target events, how many of SOURCES to replicate at that size)
SIZES_FULL: tuple[tuple[int, int], ...] = ((100_000, 4), (1_000_000, 4), (10_000_000, 1))
SIZES_QUICK: tuple[tuple[int, int], ...] = ((100_000, 2),)
N_CORPUS, N_CORPUS_QUICK = 5, 2


@dataclass
class Target:
    """One trace to measure."""

    family: str  #: "corpus" or "synthetic"
    label: str
    path: Path
    events: int | None = None  #: known for synthetic traces (from the replicator)
    size_class: int | None = None  #: the synthetic target (1e5, 1e6, 1e7 events)
    pattern: str = ""

    @property
    def key(self) -> str:
        """Stable identity across suites of one run (the file path)."""
        return str(self.path.resolve())


def _short(n: int) -> str:
    for div, unit in ((10**6, "M"), (10**3, "k")):
        if n >= div:
            return f"{n / div:g}{unit}"
    return str(n)


def targets(ctx: Context, notes: list[str]) -> list[Target]:
    """Corpus traces (largest first), then synthetic ones by size, small to large."""
    out: list[Target] = []
    if ctx.corpus is None:
        notes.append("Shared corpus not found ($CTDA_TRACE_CORPUS or ../shared/traces): corpus rows skipped.")
        sources = [ctx.repo / FALLBACK_SOURCE]
    else:
        n = N_CORPUS_QUICK if ctx.quick else N_CORPUS
        for p in corpus.largest(corpus.corpus_traces(ctx.corpus), n):
            out.append(Target("corpus", str(p.relative_to(ctx.corpus)), p))
        sources = [ctx.corpus / s for s in SOURCES]
    missing = [s.name for s in sources if not s.is_file()]
    if missing:
        notes.append(f"Synthetic source(s) not found, skipped: {', '.join(missing)}.")
    sources = [s for s in sources if s.is_file()]
    for n_events, n_sources in SIZES_QUICK if ctx.quick else SIZES_FULL:
        for src in sources[:n_sources]:
            syn = corpus.synthetic(src, ctx.cache, min_events=n_events, min_bytes=0, log=ctx.log)
            stem = syn.source.removesuffix(".gz").removesuffix(".json")
            rel = str(src.relative_to(ctx.corpus)) if ctx.corpus is not None else FALLBACK_SOURCE
            out.append(
                Target(
                    "synthetic",
                    f"{stem} ×{syn.copies + 1} ({_short(n_events)})",
                    syn.path,
                    events=syn.n_events,
                    size_class=n_events,
                    pattern=SOURCES.get(rel, ""),
                )
            )
    return out
