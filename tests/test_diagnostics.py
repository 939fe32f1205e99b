"""The diagnostics against independent computations (scipy, numpy, brute force)."""

import math

import numpy as np
import pytest
import torch
from scipy import stats

from torchrl_vase.diagnostics import CoverageGrid, advantage_alignment, pearson


def test_pearson_matches_scipy_and_refuses_unpaired_input():
    gen = torch.Generator().manual_seed(0)
    x = torch.randint(0, 20, (300,), generator=gen).double()
    y = x + torch.randn(300, generator=gen, dtype=torch.float64) * 5
    assert math.isclose(pearson(x, y), stats.pearsonr(x, y).statistic, rel_tol=1e-9)
    assert math.isnan(pearson(torch.ones(5), torch.arange(5.0)))
    with pytest.raises(ValueError, match="as many"):
        pearson(torch.ones(3), torch.ones(4))
    with pytest.raises(ValueError, match="at least 2"):
        pearson(torch.ones(1), torch.ones(1))


def test_advantage_alignment_is_correlation_and_variance_ratio():
    gen = torch.Generator().manual_seed(1)
    bonus = torch.randn(500, generator=gen, dtype=torch.float64)
    noise = torch.randn(500, generator=gen, dtype=torch.float64)
    out = advantage_alignment(2 * bonus + noise, bonus)
    expected_corr = stats.pearsonr(2 * bonus + noise, bonus).statistic
    assert math.isclose(out["correlation"], expected_corr, rel_tol=1e-9)
    share = bonus.double().var(unbiased=False) / (2 * bonus + noise).double().var(unbiased=False)
    assert math.isclose(out["bonus_share"], float(share), rel_tol=1e-6)


def test_coverage_grid_counts_match_numpy_histogram():
    gen = np.random.default_rng(4)
    points = gen.uniform(-2, 2, size=(5000, 2)) * gen.uniform(0, 1, size=(5000, 1))
    grid = CoverageGrid([-2.0, -2.0], [2.0, 2.0], cell_size=0.1)
    grid.update(torch.tensor(points[:2000]))
    grid.update(torch.tensor(points[2000:]))
    edges = np.linspace(-2, 2, 41)
    expected, _, _ = np.histogram2d(points[:, 0], points[:, 1], bins=[edges, edges])
    np.testing.assert_array_equal(grid.counts.numpy(), expected)
    assert grid.coverage() == (expected > 0).mean()
    # the upper edge and beyond fall in the last cell, not outside
    edge = CoverageGrid([0.0], [1.0], cell_size=0.25)
    edge.update(torch.tensor([[1.0], [7.0], [-3.0]]))
    assert edge.counts.tolist() == [1, 0, 0, 2]
    clone = grid.like(grid.counts)
    assert clone.coverage() == grid.coverage()
    with pytest.raises(ValueError, match="high > low"):
        CoverageGrid([1.0], [0.0], 0.1)
