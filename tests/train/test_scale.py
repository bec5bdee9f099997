"""Scale effects (perfcast.train._scale): stragglers, host time and checkpoint stalls added to
the engine's iteration; every option of `perfcast train` that sets one changes the answer
or is refused by name."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from perfcast.api import TrainRequest, run
from perfcast.cli import app
from perfcast.errors import InputError
from perfcast.specs import ParallelPlan, get_cluster, get_model
from perfcast.train import SCALE_PARTS, ScaleEffects, TrainJob, forecast_training
from perfcast.train._scale import expected_max_normal, max_normal_quantile, scale_columns

CLUSTER = get_cluster("dgx-h100", 4096)
MODEL = get_model("gpt2-medium")


def _job(gpus: int = 64, **scale) -> TrainJob:
    return TrainJob(model=MODEL, cluster=CLUSTER, plan=ParallelPlan(dp=gpus), seq_len=1024,
                    micro_batch=2, global_batch=2 * gpus, scale=ScaleEffects(**scale))


def _cols(n: int, compute_s: float = 0.2, rest_s: float = 0.05) -> dict[str, np.ndarray]:
    """Engine-shaped columns: parts that sum to the iteration."""
    return {"iteration_time_s": np.full(n, compute_s + rest_s),
            "breakdown.compute_s": np.full(n, compute_s),
            "breakdown.optimizer_s": np.full(n, rest_s)}


def _parts(cols: dict[str, np.ndarray]) -> np.ndarray:
    return sum(cols[f"breakdown.{k}"] for k in ("compute_s", "optimizer_s", *SCALE_PARTS))


# --- order statistics ---------------------------------------------------------------------

def test_expected_max_matches_a_seeded_monte_carlo():
    rng = np.random.default_rng(0)
    for ranks in (2, 8, 64, 512):
        sample = rng.standard_normal((20_000, ranks)).max(axis=1).mean()
        assert expected_max_normal(np.array([ranks]))[0] == pytest.approx(sample, rel=0.02)
    assert expected_max_normal(np.array([1]))[0] == 0.0
    exact = np.array([1, 1.5]) / np.sqrt(np.pi)  # R = 2, 3 in closed form
    assert expected_max_normal(np.array([2, 3])) == pytest.approx(exact, abs=1e-6)


@given(st.integers(1, 10**6), st.integers(1, 10**6))
def test_expected_max_grows_with_ranks_and_sits_between_the_median_and_p99(a, b):
    lo, hi = sorted((a, b))
    e = expected_max_normal(np.array([lo, hi]))
    assert e[0] <= e[1]
    assert max_normal_quantile(0.5, np.array([lo]))[0] <= e[0] + 1e-12
    assert e[0] <= max_normal_quantile(0.99, np.array([lo]))[0]


# --- scale_columns: vectorised over jobs ---------------------------------------------------

@settings(max_examples=40, deadline=None)
@given(st.floats(0, 0.3), st.floats(0, 0.3), st.integers(1, 4096), st.integers(1, 4096))
def test_straggler_is_nonnegative_and_grows_with_ranks_and_cv(cv_a, cv_b, r_a, r_b):
    (cv_lo, cv_hi), (r_lo, r_hi) = sorted((cv_a, cv_b)), sorted((r_a, r_b))
    jobs = [_job(r, rank_jitter_cv=cv) for r, cv in
            ((r_lo, cv_lo), (r_hi, cv_lo), (r_lo, cv_hi), (r_hi, cv_hi))]
    out = scale_columns(jobs, _cols(4))
    s = out["breakdown.straggler_s"]
    assert (s >= 0).all()
    assert s[0] <= s[1] + 1e-15 and s[2] <= s[3] + 1e-15  # more ranks
    assert s[0] <= s[2] + 1e-15 and s[1] <= s[3] + 1e-15  # more jitter


def test_all_terms_off_leave_the_columns_byte_for_byte():
    cols = _cols(3)
    out = scale_columns([_job(8), _job(64), _job(512)], cols)
    for key, value in cols.items():
        assert out[key].tobytes() == value.tobytes()
    for key in SCALE_PARTS:
        assert not out[f"breakdown.{key}"].any()
    assert out["iteration_p50_s"].tobytes() == cols["iteration_time_s"].tobytes()
    assert out["iteration_p99_s"].tobytes() == cols["iteration_time_s"].tobytes()


def test_a_job_with_terms_off_is_unchanged_beside_one_with_terms_on():
    cols = _cols(2)
    out = scale_columns([_job(64), _job(64, rank_jitter_cv=0.1, host_s_per_iteration=0.01)],
                        cols)
    assert out["iteration_time_s"][0] == cols["iteration_time_s"][0]
    assert out["iteration_time_s"][1] > cols["iteration_time_s"][1]


@settings(max_examples=40, deadline=None)
@given(cv=st.floats(0, 0.3), host=st.floats(0, 0.05), loader=st.floats(0, 0.05),
       interval=st.one_of(st.none(), st.integers(1, 1000)), bandwidth=st.floats(1e8, 1e12),
       asynchronous=st.booleans(), ranks=st.integers(1, 4096))
def test_parts_sum_to_the_iteration_and_percentiles_are_ordered(cv, host, loader, interval,
                                                                 bandwidth, asynchronous,
                                                                 ranks):
    scale = {"rank_jitter_cv": cv, "host_s_per_iteration": host,
             "dataloader_s_per_iteration": loader}
    if interval is not None:
        scale.update(checkpoint_every_iterations=interval,
                     checkpoint_bandwidth_bps=bandwidth, checkpoint_async=asynchronous)
    job = _job(ranks, **scale)
    cols = _cols(1)
    out = scale_columns([job], cols)
    assert _parts(out)[0] == pytest.approx(out["iteration_time_s"][0], rel=1e-12)
    assert out["iteration_time_s"][0] >= cols["iteration_time_s"][0]
    p50, p99 = out["iteration_p50_s"][0], out["iteration_p99_s"][0]
    assert p50 <= p99 + 1e-12
    assert p50 >= cols["iteration_time_s"][0] + host + loader - 1e-12
    if interval is None:  # no rare stall: the median sits below the mean, P99 above
        assert p50 <= out["iteration_time_s"][0] + 1e-12 <= p99 + 2e-12


def test_same_job_same_answer():
    jobs = [_job(256, rank_jitter_cv=0.05, checkpoint_every_iterations=50,
                 checkpoint_bandwidth_bps=5e9)]
    first, second = scale_columns(jobs, _cols(1)), scale_columns(jobs, _cols(1))
    assert all(first[k].tobytes() == second[k].tobytes() for k in first)


def test_checkpoint_stall_is_the_model_state_over_the_bandwidth_amortised():
    job = _job(64, checkpoint_every_iterations=100, checkpoint_bandwidth_bps=1e9)
    out = scale_columns([job], _cols(1))
    state = MODEL.total_params() * (2 + 12)  # bf16 weights + fp32 master and two moments
    assert out["breakdown.checkpoint_s"][0] == pytest.approx(state / 1e9 / 100)
    asynchronous = _job(64, checkpoint_every_iterations=100, checkpoint_bandwidth_bps=1e9,
                        checkpoint_async=True)
    stall = scale_columns([asynchronous], _cols(1))["breakdown.checkpoint_s"][0]
    assert 0 < stall < out["breakdown.checkpoint_s"][0]


@pytest.mark.parametrize(("scale", "field"), [
    ({"checkpoint_every_iterations": 10}, "checkpoint_bandwidth_bps"),
    ({"checkpoint_bandwidth_bps": 1e9}, "checkpoint_bandwidth_bps"),
    ({"checkpoint_async": True}, "checkpoint_async"),
    ({"rank_jitter_cv": -0.1}, "rank_jitter_cv"),
    ({"host_s_per_iteration": -1.0}, "host_s_per_iteration"),
    ({"stragglers": 1}, "stragglers"),
])
def test_bad_scale_names_its_field(scale, field):
    with pytest.raises(InputError) as err:
        ScaleEffects(**scale)
    assert err.value.field == field


def test_forecast_uses_the_expected_iteration():
    plain, jittery = forecast_training(_job(512)), forecast_training(
        _job(512, rank_jitter_cv=0.05))
    assert jittery.iteration_time_s > plain.iteration_time_s
    assert jittery.tokens_per_s == pytest.approx(plain.tokens_per_s * plain.iteration_time_s
                                                 / jittery.iteration_time_s)
    assert jittery.mfu < plain.mfu
    assert jittery.iteration_p50_s <= jittery.iteration_time_s <= jittery.iteration_p99_s
    assert plain.iteration_p50_s == plain.iteration_p99_s == plain.iteration_time_s
    assert jittery.breakdown["straggler_s"] > 0 == plain.breakdown["straggler_s"]


# --- request and command line -------------------------------------------------------------

BASE = {"model": "gpt2-medium", "gpu": "h100-sxm", "num_gpus": 64, "global_batch": 128}
FLAGS = {"rank_jitter_cv": ({"rank_jitter_cv": 0.05}, "straggler_s"),
         "host_s_per_iteration": ({"host_s_per_iteration": 0.01}, "host_s"),
         "dataloader_s_per_iteration": ({"dataloader_s_per_iteration": 0.01}, "host_s"),
         "checkpoint_every_iterations": ({"checkpoint_every_iterations": 50,
                                             "checkpoint_bandwidth_bps": 1e9},
                                            "checkpoint_s"),
         "checkpoint_async": ({"checkpoint_every_iterations": 50,
                               "checkpoint_bandwidth_bps": 1e9, "checkpoint_async": True},
                              "checkpoint_s")}


@pytest.fixture(scope="module")
def plain():
    return run(TrainRequest.from_options(BASE)).payload()


@pytest.mark.parametrize("flag", list(FLAGS))
def test_each_scale_option_changes_the_forecast(plain, flag):
    options, part = FLAGS[flag]
    payload = run(TrainRequest.from_options({**BASE, **options})).payload()
    assert payload["iteration_time_s"] > plain["iteration_time_s"]
    assert payload["breakdown"][part] > 0 == plain["breakdown"][part]
    assert payload["inputs"]["scale"][flag] == options[flag]
    assert "scale" not in plain["inputs"]


def test_async_checkpoint_stalls_less_than_a_synchronous_one():
    sync = run(TrainRequest.from_options({**BASE, **FLAGS["checkpoint_every_iterations"][0]}))
    both = run(TrainRequest.from_options({**BASE, **FLAGS["checkpoint_async"][0]}))
    assert both.payload()["breakdown"]["checkpoint_s"] < sync.payload()["breakdown"][
        "checkpoint_s"]


@pytest.mark.parametrize(("options", "field"), [
    ({"model": "resnet50", "gpu": "h100-sxm", "num_gpus": 8, "rank_jitter_cv": 0.05},
     "rank_jitter_cv"),
    ({**BASE, "sweep": True, "host_s_per_iteration": 0.01}, "host_s_per_iteration"),
    ({**BASE, "rlhf": True, "checkpoint_async": True}, "checkpoint_async"),
    ({**BASE, "checkpoint_every_iterations": 10}, "checkpoint_bandwidth_bps"),
])
def test_scale_options_a_question_does_not_take_are_refused(options, field):
    with pytest.raises(InputError) as err:
        run(TrainRequest.from_options(options))
    assert err.value.field == field


def test_cli_flags_change_the_output_or_exit_2_naming_the_field():
    runner = CliRunner()
    args = ["train", "--model", "gpt2-medium", "--gpu", "h100-sxm", "--num-gpus", "64",
            "--global-batch", "128", "--json"]
    plain = json.loads(runner.invoke(app, args).stdout)
    jittery = runner.invoke(app, [*args, "--rank-jitter-cv", "0.05", "--checkpoint-every-"
                                  "iterations", "50", "--checkpoint-bandwidth-bps", "1e9"])
    assert jittery.exit_code == 0, jittery.output
    out = json.loads(jittery.stdout)
    assert out["iteration_time_s"] > plain["iteration_time_s"]
    assert out["iteration_p99_s"] > out["iteration_p50_s"]
    refused = runner.invoke(app, [*args[:-1], "--checkpoint-every-iterations", "10"])
    assert refused.exit_code == 2
    assert "checkpoint_bandwidth_bps" in refused.output
    cnn = runner.invoke(app, ["train", "--model", "resnet50", "--gpu", "h100-sxm",
                              "--num-gpus", "8", "--host-s-per-iteration", "0.1"])
    assert cnn.exit_code == 2 and "host_s_per_iteration" in cnn.output
