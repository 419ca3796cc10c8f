"""The array namespace the contract's rules are written against (navcontract.xp): numpy's gathers
give what numpy's own take_along_axis gives, and what torch's gives."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from navcontract.xp import NumpyOps, TorchOps


@pytest.mark.parametrize(
    ("x_shape", "index_shape", "axis"),
    [((3, 5), (3, 2), 1), ((1, 5), (1, 4), -1), ((4, 6), (1, 3), 1), ((1, 6), (4, 3), 1), ((2, 3, 4), (2, 3, 2), 2)],
)
def test_take_along_gathers_as_numpy_and_torch_do(x_shape, index_shape, axis) -> None:
    rng = np.random.default_rng(0)
    x = rng.normal(size=x_shape)
    index = rng.integers(0, x_shape[axis], index_shape)
    got = NumpyOps.take_along(x, index, axis=axis)
    assert np.array_equal(got, np.take_along_axis(x, index, axis=axis))
    wide = np.broadcast_shapes(x_shape[:-1], index_shape[:-1])  # torch broadcasts no batch dimension
    tx = torch.as_tensor(np.broadcast_to(x, (*wide, x_shape[-1])).copy())
    ti = torch.as_tensor(np.broadcast_to(index, (*wide, index_shape[-1])).copy())
    assert np.array_equal(got, TorchOps(torch).take_along(tx, ti, axis=axis).numpy())
