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


@pytest.mark.parametrize("axis", [0, -1, 1])
def test_stack_gives_numpys_stack_for_arrays_scalars_and_numbers(axis: int) -> None:
    """The fast path (concatenate of expanded parts) and its fallback give np.stack's array."""
    rng = np.random.default_rng(1)
    a, b = rng.normal(size=(2, 3)).astype(np.float32), rng.normal(size=(2, 3)).astype(np.float32)
    got = NumpyOps.stack([a, b], axis=axis)
    want = np.stack([a, b], axis=axis)
    assert got.dtype == want.dtype and np.array_equal(got, want)
    scalars = [a[0, 0] * 0.0, a[..., 0][0]]  # numpy scalars, as a one-robot command's parts are
    assert np.array_equal(NumpyOps.stack(scalars, axis=-1), np.stack(scalars, axis=-1))
    assert np.array_equal(NumpyOps.stack([1.0, 2.0], axis=0), np.stack([1.0, 2.0], axis=0))
    with pytest.raises(ValueError):
        NumpyOps.stack([np.zeros(2), np.zeros(3)], axis=-1)


def test_reductions_and_clip_give_numpys_results() -> None:
    rng = np.random.default_rng(2)
    x = rng.normal(size=(4, 7)).astype(np.float32)
    x[1, 2] = np.nan
    b = x > 0.0
    assert np.array_equal(NumpyOps.amin(x, axis=-1), np.min(x, axis=-1), equal_nan=True)
    assert np.array_equal(NumpyOps.amax(x, axis=0), np.max(x, axis=0), equal_nan=True)
    assert np.array_equal(NumpyOps.any(b, axis=-1), np.any(b, axis=-1))
    assert NumpyOps.sum(b, axis=-1).dtype == np.sum(b, axis=-1).dtype
    assert np.array_equal(NumpyOps.sum(b, axis=-1), np.sum(b, axis=-1))
    assert np.array_equal(NumpyOps.clip(x, -0.5, 0.5), np.clip(x, -0.5, 0.5), equal_nan=True)
    t = torch.as_tensor(b)
    assert np.array_equal(TorchOps(torch).any(t, axis=-1).numpy(), np.any(b, axis=-1))


@pytest.mark.parametrize("axis", [-1, 0])
def test_running_maximum_and_flip_give_numpys_and_torchs_results(axis: int) -> None:
    """cummax is numpy's maximum.accumulate and torch's cummax values; flip reverses one axis, in both."""
    rng = np.random.default_rng(2)
    x = rng.normal(size=(3, 7)).astype(np.float32)
    want = np.maximum.accumulate(x, axis=axis)
    assert np.array_equal(NumpyOps.cummax(x, axis=axis), want)
    assert np.array_equal(TorchOps(torch).cummax(torch.as_tensor(x), axis=axis).numpy(), want)
    assert float(want.reshape(-1)[-1]) == float(x.max(axis=axis).reshape(-1)[-1])
    flipped = np.flip(x, axis=axis)
    assert np.array_equal(NumpyOps.flip(x, axis=axis), flipped)
    assert np.array_equal(TorchOps(torch).flip(torch.as_tensor(x), axis=axis).numpy(), flipped)
    assert not np.array_equal(flipped, x)
