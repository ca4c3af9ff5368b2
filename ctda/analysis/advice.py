"""Short recommendations keyed on the dominant bound-by classes of a critical path."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from ctda.analysis.classify import CLASSES

#: longest event name quoted in a recommendation
NAME_IN_TEXT = 80


@dataclass(frozen=True)
class Advice:
    """Say ``text`` when the classes' share of the path exceeds ``threshold``."""

    classes: tuple[str, ...]
    threshold: float
    text: str  # formatted with {share} and {top}


ADVICE = (
    Advice(
        ("data_loading",),
        0.10,
        "Data loading is {share} of the critical path: use more DataLoader workers, "
        "pin_memory and prefetching, or move decoding off the training process{top}.",
    ),
    Advice(
        ("gpu_comm", "communication"),
        0.15,
        "Communication is {share} of the critical path: overlap it with "
        "compute (DDP bucket size, gradient accumulation, async collectives){top}.",
    ),
    Advice(
        ("launch_overhead",),
        0.15,
        "Kernel launch overhead is {share} of the critical path: capture CUDA "
        "graphs, use torch.compile, or fuse small ops{top}.",
    ),
    Advice(
        ("sync_wait",),
        0.10,
        "CPU/GPU synchronisation is {share} of the critical path: remove .item(), "
        ".cpu() and explicit synchronize calls from the step{top}.",
    ),
    Advice(
        ("cross_thread",),
        0.10,
        "Cross-thread waits are {share} of the critical path: another thread holds "
        "the GIL or the runtime lock; make background Python work cheaper or move it to a process.",
    ),
    Advice(
        ("gpu_compute", "gpu_memcpy"),
        0.5,
        "The step is GPU-bound ({share}): speed up the top kernels{top} "
        "(mixed precision, better kernels, larger fusion).",
    ),
)
CPU_BOUND_GPU = Advice(
    ("cpu", "cpu_gap"),
    0.5,
    "The step is CPU-bound ({share} CPU work and unrecorded CPU "
    "time){top}: reduce Python and framework overhead, or give the GPU more work per launch.",
)
CPU_BOUND_CPU = Advice(
    ("cpu", "cpu_gap"),
    0.5,
    "The step is CPU-bound ({share} CPU work and unrecorded CPU "
    "time){top}: speed up the top CPU work, or spread it over more cores or processes.",
)


def recommend(by_class: pd.DataFrame, hot: pd.DataFrame, has_gpu: bool) -> list[str]:
    """Advice whose classes dominate the path, most important first."""
    share = dict(zip(by_class["class"], by_class.share))
    named = ~hot.name.astype(str).str.startswith("(")
    out: list[tuple[float, str]] = []
    for adv in (*ADVICE, CPU_BOUND_GPU if has_gpu else CPU_BOUND_CPU):
        s = sum(share.get(c, 0.0) for c in adv.classes)
        if s <= adv.threshold:
            continue
        top = [_clip(n) for n in hot[named & hot["class"].isin(adv.classes)].name.head(3).astype(str)]
        out.append((s, adv.text.format(share=f"{s:.0%}", top=f" (top: {', '.join(top)})" if top else "")))
    return [text for _, text in sorted(out, reverse=True)]


def _clip(name: str) -> str:
    # a sentence names events by their head: a C++ kernel name can run to megabytes
    return name if len(name) <= NAME_IN_TEXT else name[: NAME_IN_TEXT - 1] + "…"


__all__ = ["ADVICE", "CLASSES", "recommend"]
