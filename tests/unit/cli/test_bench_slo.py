"""`kvtune bench --slo`: parsed as `kvtune run --slo`, and a slo_attainment target without one
refused (nothing would measure it, so it could only be missed). No server: the flags alone."""

from __future__ import annotations

import pytest

from kvtune.cli.bench import bench_slo, bench_targets
from kvtune.cli.bench_flags import BenchFlags
from kvtune.cli.flag_record import with_defaults
from kvtune.errors import SpecError


def flags(**given) -> BenchFlags:
    return with_defaults(BenchFlags, url="http://127.0.0.1:8080", **given)


def test_the_slo_is_parsed_as_kvtune_run_parses_it() -> None:
    f = flags(slo="ttft<2s, tpot<=100ms", target=["slo_attainment>99%"])
    slo = bench_slo(f, bench_targets(f))
    assert slo is not None and slo.text == "ttft<2s,tpot<=100ms"
    assert [(lim.metric, lim.op, lim.seconds) for lim in slo.limits] == [("ttft", "<", 2.0), ("tpot", "<=", 0.1)]
    assert bench_slo(flags(), []) is None


@pytest.mark.parametrize(
    "given,fragment",
    [
        (
            {"target": ["slo_attainment>99%"]},
            "target 'slo_attainment>99%' needs per-request SLOs to measure: add --slo",
        ),
        ({"slo": "ttft_p95<2s"}, "is no per-request metric"),
        ({"slo": "ttft<2"}, "needs a time unit"),
        ({"slo": ""}, "slo is empty"),
    ],
)
def test_bad_slos_are_one_line(given, fragment) -> None:
    f = flags(**given)
    with pytest.raises(SpecError) as e:
        bench_slo(f, bench_targets(f))
    assert fragment in str(e.value) and "\n" not in str(e.value)
