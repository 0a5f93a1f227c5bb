"""Score fusion: z-normalised lexical and embedding scores, weighted (the hybrid rankers)."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

Vector = npt.NDArray[np.float64]


def znorm(scores: Vector) -> Vector:
    """Scores as standard deviations from their mean (all zeros when they are all equal)."""
    std = float(scores.std())
    if std <= 1e-12:
        return np.zeros_like(scores)
    out: Vector = (scores - scores.mean()) / std
    return out


def fuse(lexical: Vector, similarity: Vector, *, lexical_weight: float) -> Vector:
    """`lexical_weight` x z(lexical) + (1 - lexical_weight) x z(similarity)."""
    out: Vector = lexical_weight * znorm(lexical) + (1.0 - lexical_weight) * znorm(similarity)
    return out
