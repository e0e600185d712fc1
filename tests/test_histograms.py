"""Numbers read off histograms agree with the same numbers computed on the samples they were built from."""

from __future__ import annotations

import numpy as np
import pytest
from tensorboardX import SummaryWriter

import tbtriage
from tbtriage.analysis.histograms import (
    DISTRIBUTION_PERCENTILES,
    buckets,
    histogram_kind,
    l2_norm,
    layer_name,
    mass_at_ends,
    mass_at_zero,
    mass_near,
    mean_abs,
    percentiles,
    saturation_ends,
    series_buckets,
    summarise,
)


def _numpy_buckets(samples: np.ndarray, bins: int = 60):
    counts, edges = np.histogram(samples, bins=bins)
    return buckets([edges[1:]], [counts], np.array([samples.min()]), np.array([samples.max()]))


def _written(tmp_path, samples: dict[str, np.ndarray], bins="tensorflow"):
    writer = SummaryWriter(str(tmp_path / "run"))
    for tag, values in samples.items():
        writer.add_histogram(tag, values, 0, bins=bins)
    writer.close()
    return tbtriage.load(tmp_path).runs["run"].histograms


def test_percentiles_from_buckets_match_the_samples_within_a_bucket_width():
    samples = np.random.default_rng(0).standard_normal(50_000)
    b = _numpy_buckets(samples)
    got = percentiles(b)[0]
    want = np.percentile(samples, DISTRIBUTION_PERCENTILES)
    width = (samples.max() - samples.min()) / 60
    assert np.all(np.abs(got - want) <= width)
    assert got[0] == samples.min() and got[-1] == samples.max()
    assert np.all(np.diff(got) >= 0)


def test_mean_abs_and_l2_norm_estimates_are_within_two_percent_of_the_truth():
    samples = 0.1 * np.random.default_rng(1).standard_normal(20_000)
    b = _numpy_buckets(samples)
    assert mean_abs(b)[0] == pytest.approx(np.abs(samples).mean(), rel=0.02)
    assert l2_norm(b)[0] == pytest.approx(np.linalg.norm(samples), rel=0.02)


def test_a_dead_relu_layer_has_its_mass_at_zero_and_a_healthy_one_about_half(tmp_path):
    x = np.random.default_rng(2).standard_normal(10_000)
    dead = np.where(np.arange(x.size) % 20 == 0, np.abs(x), 0.0)  # 95 % of the units never fire
    for bins in ("tensorflow", 30):
        hists = _written(tmp_path / str(bins), {"act/relu_ok": np.maximum(x, 0), "act/relu_dead": dead}, bins)
        healthy = mass_at_zero(series_buckets(hists["act/relu_ok"]))[0]
        gone = mass_at_zero(series_buckets(hists["act/relu_dead"]))[0]
        assert 0.45 < healthy < 0.65, bins
        assert gone >= 0.95, bins


def test_a_saturated_tanh_piles_its_mass_at_plus_and_minus_one(tmp_path):
    x = np.random.default_rng(3).standard_normal(10_000)
    hists = _written(tmp_path, {"act/tanh_hot": np.tanh(4 * x), "act/tanh_ok": np.tanh(0.5 * x)})
    hot = mass_at_ends(series_buckets(hists["act/tanh_hot"]), (-1.0, 1.0))[0]
    calm = mass_at_ends(series_buckets(hists["act/tanh_ok"]), (-1.0, 1.0))[0]
    assert hot > 0.55 and calm < 0.02


def test_empty_and_malformed_points_give_nan_not_an_error():
    b = buckets([np.array([1.0, 2.0]), np.array([np.inf])], [np.array([0.0, 0.0]), np.array([5.0])],
                np.array([np.nan, np.nan]), np.array([np.nan, np.nan]))  # fmt: skip
    assert np.isnan(percentiles(b)[0]).all()
    assert np.isnan(mean_abs(b)[0]) and np.isnan(l2_norm(b)[0]) and np.isnan(mass_at_zero(b)[0])


def test_tf2_tensor_histograms_summarise_like_tensorboardx_ones(tmp_path):
    from tests._event_files import write_tf2_run

    run = tbtriage.load(write_tf2_run(tmp_path / "tf2")).runs["."]
    summary = summarise(run.histograms["hist"])
    assert len(summary) == len(run.histograms["hist"])
    assert np.all(np.isfinite(summary.bands)) and np.all(np.diff(summary.bands, axis=1) >= 0)


def test_tags_say_which_kind_of_histogram_and_which_layer():
    assert (histogram_kind("grads/fc1.weight"), layer_name("grads/fc1.weight")) == ("gradient", "fc1.weight")
    assert (histogram_kind("fc1.weight.grad"), layer_name("fc1.weight.grad")) == ("gradient", "fc1.weight")
    assert (histogram_kind("activations/relu1"), layer_name("activations/relu1")) == ("activation", "relu1")
    assert (histogram_kind("dense/kernel_0"), layer_name("dense/kernel_0")) == ("weight", "dense/kernel_0")
    assert histogram_kind("output.weight") == "weight"
    assert histogram_kind("loss_distribution") is None
    assert saturation_ends("act/tanh2", -1.0, 1.0) == (-1.0, 1.0)
    assert saturation_ends("act/sigmoid", 0.0, 1.0) == (0.0, 1.0)
    assert saturation_ends("act/tanh2", -3.0, 3.0) is None  # not a tanh's output after all


def test_a_point_mass_is_the_holding_buckets_count_beyond_its_neighbours_density():
    # Zeros in [0, 1) next to an empty [-1, 0): 80 values, of which the neighbours' density (10 and 0 per unit)
    # explains 5 as spread; 0 is the edge of both buckets and is counted once.
    b = buckets([np.array([-1.0, 0.0, 1.0, 2.0])], [np.array([10.0, 0.0, 80.0, 10.0])], np.array([-2.0]),
                np.array([2.0]))  # fmt: skip
    assert mass_near(b, 0.0, 0.0)[0] == pytest.approx(0.75)
    assert mass_near(b, 0.0, 1.0)[0] == pytest.approx(0.80)  # the band takes the whole bucket
