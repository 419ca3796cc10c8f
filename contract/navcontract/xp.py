"""A tiny array namespace shared by numpy and torch.

The observation terms, the action contract and the path-following rule (``navcontract.subgoal``) are
written once against these few functions, so that training (torch tensors, batched over worlds)
and the robot (numpy arrays, one robot) run the very same code. Nothing here imports torch: a
torch tensor is recognised by its module name.
"""

from __future__ import annotations

from typing import Any

import numpy as np


class NumpyOps:
    name = "numpy"

    # numpy's own functions, called directly (no wrapper frame: one robot's tick makes hundreds of calls)
    sqrt = staticmethod(np.sqrt)
    sin = staticmethod(np.sin)
    cos = staticmethod(np.cos)
    atan2 = staticmethod(np.arctan2)
    minimum = staticmethod(np.minimum)
    maximum = staticmethod(np.maximum)
    where = staticmethod(np.where)

    @staticmethod
    def clip(x: Any, lo: float, hi: float) -> Any:
        return np.minimum(np.maximum(x, lo), hi)  # np.clip's result, without its Python wrapper

    @staticmethod
    def stack(xs: list[Any], axis: int = -1) -> Any:
        if axis in (0, -1):  # np.stack's result in fewer calls, for arrays and numpy scalars
            try:
                return np.concatenate([x[None] if axis == 0 else x[..., None] for x in xs], axis=axis)
            except (TypeError, IndexError):  # Python numbers or lists: numpy's own stack
                pass
        return np.stack(xs, axis=axis)

    @staticmethod
    def concat(xs: list[Any], axis: int = -1) -> Any:
        return np.concatenate(xs, axis=axis)

    @staticmethod
    def zeros(shape: tuple[int, ...], like: Any) -> Any:
        return np.zeros(shape, dtype=np.float32)

    @staticmethod
    def as_float(x: Any) -> Any:
        return np.asarray(x, dtype=np.float32)

    @staticmethod
    def cumsum(x: Any, axis: int = -1) -> Any:
        return np.cumsum(x, axis=axis, dtype=x.dtype)

    @staticmethod
    def cummax(x: Any, axis: int = -1) -> Any:
        return np.maximum.accumulate(x, axis=axis)

    @staticmethod
    def flip(x: Any, axis: int = -1) -> Any:
        return np.flip(x, axis=axis)

    @staticmethod
    def sum(x: Any, axis: int = -1) -> Any:
        return np.add.reduce(x, axis=axis)

    @staticmethod
    def amin(x: Any, axis: int = -1) -> Any:
        return np.minimum.reduce(x, axis=axis)  # np.min without its Python wrapper (one robot: small arrays)

    @staticmethod
    def amax(x: Any, axis: int = -1) -> Any:
        return np.maximum.reduce(x, axis=axis)

    @staticmethod
    def any(x: Any, axis: int = -1) -> Any:
        return np.logical_or.reduce(x, axis=axis)

    @staticmethod
    def take_along(x: Any, index: Any, axis: int = -1) -> Any:
        if x.ndim == 2 and index.ndim == 2 and axis in (1, -1):  # the rules' case, by plain indexing (faster)
            return x[np.arange(x.shape[0])[:, None], index]
        return np.take_along_axis(x, index, axis=axis)

    @staticmethod
    def arange(n: int, like: Any) -> Any:
        return np.arange(n, dtype=np.int64)

    @staticmethod
    def as_index(x: Any, like: Any) -> Any:
        return np.asarray(x, dtype=np.int64)

    @staticmethod
    def constant(values: list[float], like: Any) -> Any:
        return np.asarray(values, dtype=np.float32)

    @staticmethod
    def broadcast(x: Any, shape: tuple[int, ...]) -> Any:
        return np.broadcast_to(x, shape)

    @staticmethod
    def nonzero(mask: Any) -> Any:
        """The indices of a 1-D mask's true entries."""
        return np.flatnonzero(mask)

    @staticmethod
    def copy(x: Any) -> Any:
        return np.array(x, copy=True)


class TorchOps:
    name = "torch"

    def __init__(self, torch_module: Any) -> None:
        self.t = torch_module

    def sqrt(self, x: Any) -> Any:
        return self.t.sqrt(x)

    def sin(self, x: Any) -> Any:
        return self.t.sin(x)

    def cos(self, x: Any) -> Any:
        return self.t.cos(x)

    def atan2(self, y: Any, x: Any) -> Any:
        return self.t.atan2(y, x)

    def clip(self, x: Any, lo: float, hi: float) -> Any:
        return self.t.clamp(x, lo, hi)

    def minimum(self, x: Any, y: Any) -> Any:
        if not self.t.is_tensor(y):
            return self.t.clamp(x, max=y)
        return self.t.minimum(x, y)

    def maximum(self, x: Any, y: Any) -> Any:
        if not self.t.is_tensor(y):
            return self.t.clamp(x, min=y)
        return self.t.maximum(x, y)

    def stack(self, xs: list[Any], axis: int = -1) -> Any:
        return self.t.stack(xs, dim=axis)

    def concat(self, xs: list[Any], axis: int = -1) -> Any:
        return self.t.cat(xs, dim=axis)

    def zeros(self, shape: tuple[int, ...], like: Any) -> Any:
        return self.t.zeros(shape, dtype=self.t.float32, device=like.device)

    def as_float(self, x: Any) -> Any:
        return x.float()

    def where(self, cond: Any, x: Any, y: Any) -> Any:
        return self.t.where(cond, x, y)

    def cumsum(self, x: Any, axis: int = -1) -> Any:
        return self.t.cumsum(x, dim=axis)

    def cummax(self, x: Any, axis: int = -1) -> Any:
        return self.t.cummax(x, dim=axis).values

    def flip(self, x: Any, axis: int = -1) -> Any:
        return self.t.flip(x, dims=(axis,))

    def sum(self, x: Any, axis: int = -1) -> Any:
        return self.t.sum(x, dim=axis)

    def amin(self, x: Any, axis: int = -1) -> Any:
        return self.t.amin(x, dim=axis)

    def amax(self, x: Any, axis: int = -1) -> Any:
        return self.t.amax(x, dim=axis)

    def any(self, x: Any, axis: int = -1) -> Any:
        return self.t.any(x, dim=axis)

    def take_along(self, x: Any, index: Any, axis: int = -1) -> Any:
        return self.t.take_along_dim(x, index, dim=axis)

    def arange(self, n: int, like: Any) -> Any:
        return self.t.arange(n, dtype=self.t.int64, device=like.device)

    def as_index(self, x: Any, like: Any) -> Any:
        return self.t.as_tensor(x, dtype=self.t.int64, device=like.device)

    def constant(self, values: list[float], like: Any) -> Any:
        return self.t.tensor(values, dtype=self.t.float32, device=like.device)

    def broadcast(self, x: Any, shape: tuple[int, ...]) -> Any:
        return x.expand(*shape)

    def nonzero(self, mask: Any) -> Any:
        """The indices of a 1-D mask's true entries (a host sync on a GPU)."""
        return self.t.nonzero(mask).reshape(-1)

    def copy(self, x: Any) -> Any:
        return x.clone()


NUMPY_OPS = NumpyOps()
_TORCH_OPS: list[TorchOps] = []


def ops_for(x: Any) -> Any:
    """The namespace for an array: TorchOps for torch tensors, NumpyOps otherwise (one of each, shared)."""
    if type(x) is np.ndarray:
        return NUMPY_OPS
    if type(x).__module__.startswith("torch"):
        if not _TORCH_OPS:
            import sys

            _TORCH_OPS.append(TorchOps(sys.modules["torch"]))
        return _TORCH_OPS[0]
    return NUMPY_OPS
