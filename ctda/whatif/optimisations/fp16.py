"""``fp16``: the step under ``torch.autocast(dtype=torch.float16)``.

The same model as :mod:`~ctda.whatif.optimisations.bf16`, with the device's FP16 tensor
peak (on V100 and T4, which have FP16 but no BF16 tensor cores, the two differ). Loss
scaling (``GradScaler``) is not modelled: its unscale and inf checks add a few kernels per
step and one sync when the scaler is read.
"""

from __future__ import annotations

from ctda.analysis.engine import Analysis
from ctda.whatif.effect import Effect
from ctda.whatif.optimisations import optimisation
from ctda.whatif.optimisations.bf16 import _candidates as bf16_candidates
from ctda.whatif.optimisations.bf16 import autocast
from ctda.whatif.optimisations.devices import peaks_of


def _candidates(a: Analysis) -> list[str]:
    """Worth listing beside ``bf16`` only where the device's FP16 peak differs from its BF16 one."""
    p, _ = peaks_of(a)
    return ["fp16"] if p.fp16 != p.bf16 and bf16_candidates(a) else []


@optimisation("fp16", candidates=_candidates)
def fp16(a: Analysis, arg: str | None) -> Effect:
    """Autocast to FP16: as ``bf16`` with the device's FP16 tensor peak (no loss scaling)."""
    eff = autocast(a, "fp16")
    eff.assumptions.append("GradScaler's unscale/inf-check kernels and its sync are not added")
    return eff
