"""Issue 22 §1: the noise is measured (pooled over configs measured twice), not assumed."""

from __future__ import annotations

import math
import statistics

import pytest

from kvtune.objectives.noise import (
    MIN_JUDGE_DOF,
    PRIOR,
    Noise,
    from_dict,
    inconsistent,
    inconsistent_pairs,
    pool,
    study_noise,
    t95,
    t995,
    within_noise,
)


def test_pooled_variance_of_log_values_over_configs_measured_twice():
    samples = {0: [100.0, 110.0], 1: [50.0, 45.0], 2: [80.0]}  # trial 2 measured once: no dof
    noise = pool(samples)
    ss = math.log(110 / 100) ** 2 / 2 + math.log(50 / 45) ** 2 / 2  # two values: d^2 / 2 each
    assert noise.dof == 2 and noise.configs == (0, 1)
    assert noise.rel_sd == pytest.approx(math.sqrt(ss / 2))
    assert noise.measured and noise.source() == f"pooled noise {noise.rel_sd:.1%}, 2 dof"


def test_scale_does_not_matter_only_ratios_do():
    assert pool({0: [10.0, 11.0]}).rel_sd == pytest.approx(pool({0: [1000.0, 1100.0]}).rel_sd)


def test_repeat_runs_add_their_coefficient_of_variation():
    noise = pool({0: [100.0]}, {0: (0.05, 3)})  # 3 runs on one server, CV 5%: 2 dof
    assert noise.dof == 2 and noise.rel_sd == pytest.approx(0.05)
    both = pool({1: [100.0, 100.0]}, {0: (0.05, 3)})
    assert both.dof == 3 and both.rel_sd == pytest.approx(math.sqrt(2 * 0.05**2 / 3))


def test_nothing_repeated_is_the_prior_and_labelled_so():
    noise = pool({0: [100.0], 1: [50.0, math.inf]})  # a failed measurement is no repeat
    assert noise is PRIOR and not noise.measured
    assert noise.source() == "prior 10%, not measured: no repeats yet"
    assert noise.half_width(100.0, 1) == pytest.approx(1.96 * 10.0)


def test_half_width_uses_t_at_the_pooled_dof():
    noise = Noise(0.05, 4)
    assert noise.half_width(200.0, 2) == pytest.approx(2.776 * 0.05 * 200 / math.sqrt(2))


def test_t995_table():
    assert t995(1) == 63.657 and t995(30) == 2.750 and t995(31) == 2.576
    with pytest.raises(ValueError):
        t995(0)


def test_two_measurements_beyond_the_noise_are_inconsistent():
    noise = Noise(0.05, 6)  # limit: 3.707 * 0.05 * sqrt 2 = 0.262 on the log scale
    assert not inconsistent(100.0, 100.0 * math.exp(0.26), noise)
    assert inconsistent(100.0, 100.0 * math.exp(0.265), noise)
    assert inconsistent(100.0 * math.exp(0.265), 100.0, noise)  # symmetric
    assert not inconsistent(100.0, math.inf, noise)  # a failure is not a figure
    # under the prior: 2.576 * 0.10 * sqrt 2 = 0.364 (a 1.44x disagreement)
    assert inconsistent(14.94, 48.1, PRIOR) and not inconsistent(40.0, 55.0, PRIOR)


def test_the_demo_baseline_is_flagged_against_the_other_configs_noise():
    # issue 22's demo: baseline 14.94 then 48.1 tok/s while two other configs repeated within 3%
    samples = {0: [14.94, 48.1], 4: [47.0, 48.2], 5: [46.0, 47.1], 6: [30.0]}
    flagged = inconsistent_pairs(samples)
    assert [p["trial"] for p in flagged] == [0]
    # the other configs' 2 dof are too few to judge by (MIN_JUDGE_DOF): the prior judges, and
    # a 3.2x gap is beyond it as well
    assert flagged[0]["values"] == [14.94, 48.1] and flagged[0]["against"] == PRIOR.source()
    noise = study_noise(samples)
    # the inconsistent pair is not evidence: it does not set the noise, and it is recorded
    assert noise.configs == (4, 5) and noise.dof == 2 and noise.rel_sd < 0.03
    assert noise.is_inconsistent(0) and not noise.is_inconsistent(4)


def test_consistent_pairs_are_not_flagged():
    samples = {0: [100.0, 104.0], 1: [50.0, 49.0], 2: [70.0, 73.0]}
    assert inconsistent_pairs(samples) == []
    assert study_noise(samples).dof == 3


def test_a_noise_round_trips_through_its_dict():
    noise = study_noise({0: [14.94, 48.1], 4: [47.0, 48.2], 5: [46.0, 47.1]})
    back = from_dict(noise.to_dict())
    assert (back.rel_sd, back.dof, back.configs) == (noise.rel_sd, noise.dof, noise.configs)
    assert back.is_inconsistent(0)
    assert from_dict(None) is PRIOR and from_dict(PRIOR.to_dict()) is PRIOR


def test_first_measurements_within_the_noise_of_each_other_could_be_one_config_measured_twice():
    five = Noise(0.05, 6)  # band: t95(6) * 5% * sqrt(2) = 17.3% in ln units
    band = t95(6) * 0.05 * math.sqrt(2)
    assert within_noise(100.0, 100.0 * math.exp(band * 0.99), five)
    assert not within_noise(100.0, 100.0 * math.exp(band * 1.01), five)
    assert within_noise(100.0 * math.exp(-band * 0.99), 100.0, five)  # symmetric
    assert within_noise(44.55, 43.77, PRIOR)  # the CI run's leader and defaults (2% apart)
    assert not within_noise(200.0, 100.0, PRIOR)  # 2x: beyond the prior's 27.7% band
    assert not within_noise(100.0, 0.0, PRIOR) and not within_noise(math.inf, 100.0, PRIOR)


def test_a_pool_too_unsure_to_judge_does_not_narrow_the_band_below_the_priors():
    """The hogged demo: the baseline's one pair (21.43, 21.44) pooled to 0.03% with 1 dof, and the
    leader's 22.75 then looked beyond the noise of the defaults' 21.43."""
    one_pair = Noise(abs(math.log(21.44 / 21.43)) / math.sqrt(2), 1)
    assert within_noise(22.75, 21.43, one_pair)
    assert not within_noise(200.0, 100.0, one_pair)  # the prior's band still ends somewhere
    enough = Noise(one_pair.rel_sd, MIN_JUDGE_DOF)
    assert not within_noise(22.75, 21.43, enough)  # a pool of enough dof is believed


def test_a_pool_of_too_few_dof_does_not_drop_a_pair_and_print_a_plus_minus_narrower_than_it():
    # a demo run: the baseline 24.55 then 22.39 (8.8% apart); the one other repeated config's two
    # runs agreed within 0.1%. Judged by that 1-dof "noise" the baseline was dropped from the
    # pool, which then said 0.1%: +/- 0.16 tok/s on a 2.2 tok/s disagreement.
    samples = {0: [24.55, 22.39], 2: [21.80, 21.82]}
    assert inconsistent_pairs(samples) == []
    noise = study_noise(samples)
    assert noise.configs == (0, 2) and noise.dof == 2
    half = noise.half_width(statistics.fmean(samples[0]), 2)
    assert half > (24.55 - 22.39) / 2  # the +/- of the baseline's mean covers its own two runs
    # with enough other dof, a real outlier is still dropped
    more = {**samples, 3: [30.0, 30.1, 29.9], 4: [40.0, 40.2]}
    assert [p["trial"] for p in inconsistent_pairs({**more, 0: [14.94, 48.1]})] == [0]
