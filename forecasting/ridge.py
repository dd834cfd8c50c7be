"""Ridge regression learned one example at a time, and the empirical quantiles of its errors.

The model is kept as its sufficient statistics (X'X and X'y), so learning from a completion is
one rank-one update, the fit is the same whatever the order of the examples, and the state is two
arrays of plain numbers that snapshots and replays restore exactly. The penalty pulls the
weights towards zero: a correction that knows nothing leaves the physics baseline as it is.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from statistics import NormalDist
from typing import Any

import numpy as np

PRIOR_SPREAD = 0.6  # log-error spread assumed before any error is seen (a factor of about 1.8)
MIN_ERRORS = 20  # errors needed before their own quantiles replace the assumed spread


@dataclass
class OnlineRidge:
    dims: int
    penalty: float = 1.0
    # None only until __post_init__ sizes them by dims (load passes both)
    xtx: np.ndarray = field(default=None)  # type: ignore[arg-type]
    xty: np.ndarray = field(default=None)  # type: ignore[arg-type]
    examples: int = 0
    # the penalty in examples' worth: scaled by each term's mean square, so a term of large values
    # (GB of a part) is held back as much as a small one (for corrections learned from few examples)
    relative: bool = False
    _weights: np.ndarray | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if self.xtx is None:
            self.xtx = np.zeros((self.dims, self.dims))
            self.xty = np.zeros(self.dims)

    def learn(self, x: np.ndarray, y: float) -> None:
        self.xtx += np.outer(x, x)
        self.xty += x * y
        self.examples += 1
        self._weights = None

    def predict(self, x: np.ndarray) -> float:
        if self.examples == 0:
            return 0.0
        if self._weights is None:
            scale = np.diag(self.xtx) / self.examples if self.relative else np.ones(self.dims)
            self._weights = np.linalg.solve(self.xtx + self.penalty * np.diag(np.maximum(scale, 1e-12)), self.xty)
        return float(x @ self._weights)

    def dump(self) -> dict[str, Any]:
        return {"xtx": self.xtx.tolist(), "xty": self.xty.tolist(), "examples": self.examples}

    @classmethod
    def load(
        cls, data: dict[str, Any], penalty: float = 1.0, relative: bool = False, dims: int | None = None
    ) -> "OnlineRidge":
        """From `dump`; with `dims` above the dump's, the terms added since extend it with zeros
        (what was learned stays, the new terms start unlearned)."""
        xty = np.array(data["xty"], dtype=float)
        xtx = np.array(data["xtx"], dtype=float)
        if dims is not None and dims > len(xty):
            xty = np.concatenate([xty, np.zeros(dims - len(xty))])
            xtx = np.pad(xtx, ((0, dims - len(xtx)), (0, dims - len(xtx))))
        return cls(len(xty), penalty, xtx, xty, data["examples"], relative)


@dataclass
class ErrorWindow:
    """The last `size` out-of-sample errors (log actual - log predicted, each taken before the
    model learned from its example): the quantiles of the later half of them are the prediction
    interval, so it is as wide as the model's recent errors (not its early ones, made before it
    had learned much, nor its fit to data it has seen)."""

    size: int = 150
    errors: list[float] = field(default_factory=list)  # oldest first
    prior: float = PRIOR_SPREAD  # the normal spread assumed while fewer than MIN_ERRORS are known

    def add(self, error: float) -> None:
        self.errors.append(error)
        del self.errors[: -self.size]

    def quantile(self, p: float) -> float:
        """The p-quantile of the errors (linear between order statistics); a normal spread of
        `prior` while fewer than `MIN_ERRORS` are known."""
        if len(self.errors) < MIN_ERRORS:
            return self.prior * NormalDist().inv_cdf(min(max(p, 1e-6), 1 - 1e-6))
        ordered = sorted(self.errors[-max(MIN_ERRORS, len(self.errors) // 2) :])
        at = p * (len(ordered) - 1)
        lo = math.floor(at)
        hi = min(lo + 1, len(ordered) - 1)
        return ordered[lo] + (at - lo) * (ordered[hi] - ordered[lo])
