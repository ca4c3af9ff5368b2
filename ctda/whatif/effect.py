"""What a named optimisation does to a calibrated graph: an :class:`Effect`.

A scale override (``--scale``) only multiplies events' own time. A named optimisation
(``--apply``, :mod:`ctda.whatif.optimisations`) also changes waits: a CUDA graph removes the
host gaps between launches and the syncs inside the captured region, an overlap makes a
stream dependency non-blocking. An Effect therefore carries both:

- ``factor``: per analysed event, a multiplier on its own time (composed by product with
  the scale overrides and the other effects);
- ``edges`` / ``weights``: edges whose replay weight is *set* after the factors were applied
  (later effects win on a shared edge). :data:`NEVER` makes an edge unable to bind: the
  dependency stays in the graph (replay stays a max-plus pass over the same edges) but no
  longer delays its target.

Every effect says what it assumed, in words, next to the numbers it used
(``assumptions``): the CLI prints them beside the answer and stored scenarios keep them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

I64 = npt.NDArray[np.int64]

#: weight of an edge that no longer constrains its target: far below any real gap, and far
#: enough from int64's limits that adding node times (ns since the epoch) cannot overflow
NEVER = -(1 << 50)


@dataclass
class Effect:
    """One applied optimisation: per-event factors, set edge weights, and its assumptions."""

    label: str
    factor: npt.NDArray[np.float64]
    edges: I64 = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    weights: I64 = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    assumptions: list[str] = field(default_factory=list)

    @classmethod
    def identity(cls, label: str, n_events: int) -> Effect:
        return cls(label, np.ones(n_events, dtype=np.float64))

    def set_edges(self, edges: npt.ArrayLike, weights: npt.ArrayLike) -> None:
        """Set the weight of ``edges`` (a later call wins on a shared edge)."""
        e = np.asarray(edges, dtype=np.int64)
        w = np.broadcast_to(np.asarray(weights, dtype=np.int64), e.shape)
        self.edges = np.concatenate([self.edges, e])
        self.weights = np.concatenate([self.weights, w])

    @property
    def n_changed(self) -> int:
        """Events whose time changed, plus edges set."""
        return int(np.sum(self.factor != 1.0)) + len(np.unique(self.edges))

    def to_json(self) -> dict[str, object]:
        return {"label": self.label, "assumptions": list(self.assumptions), "changed": self.n_changed}


def apply_edges(weight: I64, effects: list[Effect]) -> I64:
    """``weight`` with every effect's set edges applied in order (later effects win)."""
    if not any(len(e.edges) for e in effects):
        return weight
    w = weight.copy()
    for e in effects:
        w[e.edges] = e.weights  # numpy assigns in order: the last write to an edge wins
    return w
