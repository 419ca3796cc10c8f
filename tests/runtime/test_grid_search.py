"""navdeploy.grid_search's edge graph: exactly the edges and weights of its rule, on any grid."""

from __future__ import annotations

import math

import numpy as np
import pytest

from navdeploy.grid_search import CLEARANCE_WEIGHT, GridFrame, cheapest_cells, edge_graph

NEIGHBOURS = ((0, 1), (1, 0), (1, 1), (1, -1))


def rule_edges(clear: np.ndarray, radius: float, frame: GridFrame, keep: float, certify: bool) -> dict:
    """The module's rule, one neighbouring pair at a time: {(a, b): weight} with a < b."""
    H, W = clear.shape
    out = {}
    for y in range(H):
        for x in range(W):
            for dy, dx in NEIGHBOURS:
                y2, x2 = y + dy, x + dx
                if not (0 <= y2 < H and 0 <= x2 < W):
                    continue
                length = math.hypot(dx * frame.sx, dy * frame.sy)
                need = radius + (length / 2 if certify else 0.0)
                c1, c2 = float(clear[y, x]), float(clear[y2, x2])
                if c1 > need and c2 > need:
                    weight = length
                    if keep > 0:
                        inside = min(max(1.0 - (min(c1, c2) - radius) / keep, 0.0), 1.0)
                        weight *= 1.0 + CLEARANCE_WEIGHT * inside * inside
                    a, b = y * W + x, y2 * W + x2
                    out[(min(a, b), max(a, b))] = weight
    return out


@pytest.mark.parametrize(("certify", "keep"), [(True, 0.0), (True, 0.3), (False, 0.25)])
@pytest.mark.parametrize(("shape", "dtype"), [((7, 9), np.float64), ((12, 5), np.float64), ((6, 11), np.float32)])
def test_the_graph_holds_exactly_the_rule_s_edges_and_weights(
    shape: tuple[int, int], dtype: type, certify: bool, keep: float
) -> None:
    rng = np.random.default_rng(shape[0] * 31 + int(certify))
    frame = GridFrame(-0.3, 0.2, 0.1, 0.08, shape)
    clear = rng.uniform(0.0, 0.6, size=shape).astype(dtype)
    csr = edge_graph(clear, 0.2, frame, keep=keep, certify=certify)
    assert csr.has_sorted_indices and csr.has_canonical_format  # each row's edges in ascending order
    graph = csr.tocoo()
    got = {(int(min(a, b)), int(max(a, b))): float(w) for a, b, w in zip(graph.row, graph.col, graph.data, strict=True)}
    expected = rule_edges(clear, 0.2, frame, keep, certify)
    assert len(expected) > 10 and len(expected) < len(rule_edges(np.ones(shape), 0.2, frame, keep, certify))
    assert got.keys() == expected.keys()
    rel = 1e-12 if dtype is np.float64 else 1e-6  # a float32 grid's weights are its precision's
    assert all(got[k] == pytest.approx(w, rel=rel) for k, w in expected.items())


def test_a_grid_of_another_shape_or_cell_size_gets_its_own_edges() -> None:
    """Grids of another shape or cell size get their own pairs and lengths."""
    clear = np.ones((4, 4))
    assert edge_graph(clear, 0.2, GridFrame(0, 0, 0.1, 0.1, (4, 4))).nnz == 3 * 4 + 3 * 4 + 2 * 3 * 3
    wide = edge_graph(np.ones((4, 6)), 0.2, GridFrame(0, 0, 0.1, 0.1, (4, 6)))
    assert wide.shape == (24, 24) and wide.nnz == 5 * 4 + 3 * 6 + 2 * 5 * 3
    coarse = edge_graph(clear, 0.2, GridFrame(0, 0, 0.2, 0.2, (4, 4)))
    assert coarse.data.max() == pytest.approx(math.hypot(0.2, 0.2))
    cells = cheapest_cells(coarse, 15, 0)
    assert cells is not None and list(cells) == [0, 5, 10, 15]
