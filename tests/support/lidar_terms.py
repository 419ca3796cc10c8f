"""A randomisation manager's lidar terms with fixed values per world, for code that only reads them."""

from __future__ import annotations

import torch


class LidarTerms:
    """The terms named, each with its params' values per world; no random stream of its own (a draw
    from it would fail: the code under test must draw from the generator it is given)."""

    def __init__(self, **values: dict[str, list[float]]) -> None:
        self.values = {t: {p: torch.tensor(v) for p, v in ps.items()} for t, ps in values.items()}

    def enabled(self, term: str) -> bool:
        return term in self.values

    def value(self, term: str, param: str) -> torch.Tensor:
        return self.values[term][param]
