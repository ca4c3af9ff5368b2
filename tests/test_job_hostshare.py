"""Processor sharing on a host (``ctda.job.hostshare.mean_rates``): each busy interval's
mean share of a core, computed by hand."""

from __future__ import annotations

import numpy as np

from ctda.job.hostshare import mean_rates


def test_rates_of_overlapping_intervals_on_one_core() -> None:
    # one core: [0, 10) alone for 0..4, shared with [4, 8) for 4..8, alone again 8..10
    got = mean_rates(np.array([0, 4]), np.array([10.0, 4.0]), np.array([0, 0]), np.array([1.0]))
    assert np.allclose(got, [(4 + 4 * 0.5 + 2) / 10, 0.5])


def test_enough_cores_and_other_hosts_do_not_slow() -> None:
    # two cores: two overlapping intervals run at full speed; a third on another host of
    # one core overlaps them in time but not in cores
    got = mean_rates(
        np.array([0, 2, 0]), np.array([6.0, 6.0, 6.0]), np.array([0, 0, 1]), np.array([2.0, 1.0])
    )
    assert np.allclose(got, [1.0, 1.0, 1.0])


def test_three_threads_on_two_cores_and_empty_intervals() -> None:
    got = mean_rates(
        np.array([0, 0, 0, 5]), np.array([4.0, 4.0, 8.0, 0.0]), np.array([0, 0, 0, 0]), np.array([2.0])
    )
    # 0..4: three open, 2/3 each; 4..8: the third alone
    assert np.allclose(got, [2 / 3, 2 / 3, (4 * 2 / 3 + 4) / 8, 1.0])
