"""Per-series features: TensorBoard's smoothing to the last digit, robust levels and noise, spikes, plateaus."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from tbtriage.analysis.datamodel import Run, Series
from tbtriage.analysis.features import context_windows, find_spikes, periodicity, series_features
from tbtriage.analysis.roles import assign_roles
from tbtriage.analysis.smoothing import diff_noise, ema, scale_noise


def tensorboard_smoothing(values, weight):
    """TensorBoard's classicSmoothing (webapp line_chart_v2 data_transformer.ts), line for line."""
    if all(v == values[0] for v in values):
        return list(values)
    weight = max(0.0, min(weight, 0.999))
    last, count, out = 0.0, 0, []
    for value in values:
        if not math.isfinite(value):
            out.append(value)
            continue
        last = last * weight + (1 - weight) * value
        count += 1
        out.append(last / (1 - math.pow(weight, count)))
    return out


values_with_gaps = st.lists(
    st.one_of(
        st.floats(-1e6, 1e6, allow_nan=False, allow_infinity=False), st.just(float("nan")), st.just(float("inf"))
    ),
    min_size=1,
    max_size=400,
)


@settings(max_examples=200, deadline=None)
@given(values_with_gaps, st.floats(0.0, 0.999))
def test_ema_is_tensorboards_smoothing_point_for_point(values, weight):
    ours = ema(values, weight)
    theirs = np.array(tensorboard_smoothing(values, weight), dtype=np.float64)
    finite = np.isfinite(theirs)
    assert np.array_equal(ours[~finite], theirs[~finite], equal_nan=True)
    scale = max([abs(v) for v in values if math.isfinite(v)], default=1.0)
    assert np.allclose(ours[finite], theirs[finite], rtol=1e-12, atol=1e-12 * scale)


def test_ema_on_a_long_run_matches_the_loop_and_skips_nans():
    rng = np.random.default_rng(1)
    values = rng.normal(1.0, 0.3, 100_000)
    values[rng.random(values.size) < 0.01] = np.nan
    expected = np.array(tensorboard_smoothing(values.tolist(), 0.95))
    assert np.allclose(ema(values, 0.95), expected, rtol=1e-12, atol=1e-12, equal_nan=True)


def test_ema_clamps_the_weight_like_tensorboards_slider_and_keeps_constant_series():
    values = [1.0, 2.0, 3.0]
    assert np.allclose(ema(values, 5.0), tensorboard_smoothing(values, 0.999))
    assert np.allclose(ema(values, -1.0), values)
    assert ema([4.0] * 5, 0.9).tolist() == [4.0] * 5  # TensorBoard #786: constant series drawn as is
    assert ema([], 0.6).size == 0


def test_noise_of_a_falling_curve_is_its_scatter_not_its_trend():
    steps = np.arange(5000)
    rng = np.random.default_rng(0)
    curve = 3.0 * np.exp(-steps / 800) + 0.5
    noisy = curve + rng.normal(0, 0.02, steps.size)
    assert abs(diff_noise(noisy) - 0.02) < 0.002
    # A loss logged as the mean of 20 steps hides its noise from neighbouring points, not from scale_noise.
    averaged = np.convolve(curve + rng.normal(0, 0.2, steps.size), np.ones(20) / 20, mode="valid")
    assert scale_noise(averaged) > 3 * diff_noise(averaged)


def _series(values, every=1):
    values = np.asarray(values, dtype=np.float64)
    steps = np.arange(values.size, dtype=np.int64) * every
    return Series(steps, steps.astype(np.float64), values)


def test_features_report_best_final_and_the_first_nan():
    values = np.linspace(2.0, 0.5, 100)
    values[80:] = np.nan
    f = series_features("train/loss", _series(values, 10), "train_loss", -1)
    assert (f.best, f.best_step) == (0.5 + 1.5 * 20 / 99, 790)
    assert (f.final_step, f.first_nonfinite_step, f.points) == (790, 800, 100)
    assert f.extra["nonfinite"] == 20


def test_a_metric_where_higher_is_better_reports_its_maximum():
    f = series_features("val/acc", _series([0.2, 0.5, 0.9, 0.85]), "metric", 1)
    assert (f.best, f.best_step) == (0.9, 2)


def test_an_isolated_loss_spike_is_found_with_its_levels_and_a_step_drop_is_not():
    rng = np.random.default_rng(3)
    steps = np.arange(3000)
    loss = np.where(steps < 1500, 2.0, 0.8) * np.exp(rng.normal(0, 0.03, steps.size))  # step decay at 1500
    loss[2200] *= 4.0
    spikes = find_spikes(steps, loss, log_scale=True)
    assert [s.peak_step for s in spikes] == [2200]
    spike = spikes[0]
    assert abs(spike.before - 0.8) < 0.05 and abs(spike.after - 0.8) < 0.05 and spike.peak > 3.0
    assert (spike.prev_step, spike.prev_value) == (2199, loss[2199])


def test_a_wide_bump_is_found_at_a_coarser_resolution():
    rng = np.random.default_rng(4)
    steps = np.arange(20_000)
    loss = np.exp(rng.normal(0, 0.02, steps.size))
    loss[9000:9040] *= 2.0  # 40 points up, then back: too wide for single points, a bump at 16
    spikes = find_spikes(steps, loss, log_scale=True)
    assert len(spikes) == 1 and 8980 <= spikes[0].start_step <= 9000 and spikes[0].end_step >= 9030


def test_spikes_that_recur_every_epoch_have_that_period():
    assert periodicity([120, 370, 620, 870, 1120]) == 250
    assert periodicity([120, 370, 870, 1120, 1370]) == 250  # a missed epoch is a multiple of the period
    assert periodicity([100, 180, 530, 600, 1400]) is None
    assert periodicity([10, 20]) is None


def test_a_flat_start_is_a_plateau_and_a_falling_curve_has_none_at_its_start():
    rng = np.random.default_rng(5)
    steps = np.arange(0, 3000, 10)
    stuck = np.where(steps < 900, 2.303, 0.3 + 2.0 * np.exp(-(steps - 900) / 300)) * np.exp(
        rng.normal(0, 0.02, steps.size)
    )
    plateaus = series_features("loss", Series(steps, steps * 1.0, stuck), "train_loss", -1).plateaus
    assert plateaus and plateaus[0][0] <= 60 and 800 <= plateaus[0][1] <= 950
    falling = 0.3 + 2.0 * np.exp(-steps / 500) * np.exp(rng.normal(0, 0.02, steps.size))
    plateaus = series_features("loss", Series(steps, steps * 1.0, falling), "train_loss", -1).plateaus
    assert all(start > 1000 for start, _ in plateaus)


def test_recent_trend_says_whether_the_curve_still_moves():
    steps = np.arange(1000)
    falling = series_features("loss", _series(3.0 - steps / 1000), "train_loss", -1)
    flat = series_features("loss", _series(np.full(1000, 2.0)), "train_loss", -1)
    assert falling.trend < -0.003 and flat.trend == 0.0


def test_a_handful_of_points_gets_no_noise_spikes_or_plateaus():
    f = series_features("loss", _series([2.0, 1.5, 9.0, 1.2, 1.1]), "train_loss", -1)
    assert f.noise is None and f.plateaus == () and "spikes" not in f.extra and f.outlier_steps.size == 0


def test_context_windows_give_lr_grad_norm_and_memory_around_a_step():
    steps = np.arange(0, 1000, 10, dtype=np.int64)
    run = Run("r", path=None)
    run.scalars = {
        "train/loss": Series(steps, steps * 1.0, np.ones(steps.size)),
        "train/learning_rate": Series(steps, steps * 1.0, steps * 1e-5),
        "train/grad_norm": Series(steps, steps * 1.0, np.arange(steps.size, dtype=np.float64)),
        "grad_norm/layer1.weight": Series(steps[:5], steps[:5] * 1.0, np.ones(5)),
        "gpu/mem_gb": Series(steps, steps * 1.0, np.full(steps.size, 30.5)),
    }
    windows = context_windows(run, assign_roles(run.scalars), 500, k=2)
    assert windows["grad_norm"] == [(480, 48.0), (490, 49.0), (500, 50.0), (510, 51.0), (520, 52.0)]
    assert [s for s, _ in windows["lr"]] == [480, 490, 500, 510, 520]
    assert windows["gpu_mem"][0] == (480, 30.5)
    edge = context_windows(run, assign_roles(run.scalars), 0, k=5)
    assert [s for s, _ in edge["lr"]] == [0, 10, 20, 30, 40, 50]
