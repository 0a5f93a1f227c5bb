"""Score fusion: z-normalised lexical and embedding scores, weighted (the hybrid rankers)."""

from __future__ import annotations

from typing import TypeVar

import numpy as np
import numpy.typing as npt

Vector = npt.NDArray[np.float64]
Rows = TypeVar("Rows", npt.NDArray[np.float32], npt.NDArray[np.float64])


def znorm_rows(scores: Rows, *, flat: float = 1e-6) -> Rows:
    """Each row as standard deviations from its mean; a row whose deviation is at most `flat`
    (all its scores equal, up to rounding) becomes zeros. The hybrid tool ranker passes the
    request and its clauses as rows of one matrix."""
    mean = scores.mean(axis=1, keepdims=True)
    std = scores.std(axis=1, keepdims=True)
    constant = std <= flat
    out: Rows = (scores - mean) / np.where(constant, 1.0, std).astype(scores.dtype)
    if constant.any():
        out[constant[:, 0]] = 0.0
    return out


def znorm(scores: Vector) -> Vector:
    """Scores as standard deviations from their mean (all zeros when they are all equal)."""
    out: Vector = znorm_rows(scores[np.newaxis, :], flat=1e-12)[0]
    return out


def fuse(lexical: Vector, similarity: Vector, *, lexical_weight: float) -> Vector:
    """`lexical_weight` x z(lexical) + (1 - lexical_weight) x z(similarity)."""
    out: Vector = lexical_weight * znorm(lexical) + (1.0 - lexical_weight) * znorm(similarity)
    return out
