"""Reading results.json back (study/results_file.py): kvtune's own file reads, anything else of
another shape is one line naming the file and the key; NaN and Infinity read as null."""

from __future__ import annotations

import json
import os

import pytest

from kvtune.errors import SpecError
from kvtune.knobs import Candidate
from kvtune.study.outcome import TrialOutcome
from kvtune.study.results_file import read_results, shape_problem

TRIAL = TrialOutcome(number=0, candidate=Candidate(), argv=["x"], env={}).to_dict()
GOOD = {"study": "s", "spec": {}, "targets": ["ttft<1s"], "trials": [TRIAL], "best_trial": None}


def test_what_kvtune_writes_has_no_problem():
    assert shape_problem(json.loads(json.dumps(GOOD))) is None


@pytest.mark.parametrize(
    "data,problem",
    [
        ([], "it holds a list, not a JSON object"),
        ({"trials": []}, "it has no 'study'"),
        ({**GOOD, "trials": {"0": TRIAL}}, "'trials' is an object, not a list"),
        ({**GOOD, "trials": [1]}, "trials[0] is a number 1, not an object"),
        ({**GOOD, "best_trial": "3"}, "'best_trial' is a string '3', not a whole number or null"),
        ({**GOOD, "targets": [1]}, "targets[0] is a number 1, not a string"),
        ({**GOOD, "trials": [{**TRIAL, "number": True}]}, "trials[0]: 'number' is true or false"),
        ({**GOOD, "trials": [{**TRIAL, "argv": "llama-server -c 4"}]}, "trials[0]: 'argv' is a string"),
        ({**GOOD, "trials": [{**TRIAL, "candidate": {"flags": {}, "gpu": 1}}]}, "'candidate' is an object"),
        ({**GOOD, "trials": [{**TRIAL, "failure": "exploded"}]}, "'failure' 'exploded' is no failure kind"),
        ({**GOOD, "trials": [{"argv": []}]}, "trials[0]: it has no 'number'"),
        ({**GOOD, "never_started": 5}, "'never_started' is a number 5, not a list or null"),
    ],
)
def test_another_shape_is_named_by_its_key(data, problem):
    assert problem in (shape_problem(data) or "")


def test_non_finite_numbers_read_as_null(tmp_path):
    f = tmp_path / "results.json"
    trial = {**TRIAL, "metrics": {"a": "N", "b": "I", "c": "H"}, "objective": "N"}
    text = json.dumps({**GOOD, "trials": [trial]})
    f.write_text(text.replace('"N"', "NaN").replace('"I"', "-Infinity").replace('"H"', "1e999"))
    read = read_results(f)["trials"][0]
    assert read["metrics"] == {"a": None, "b": None, "c": None} and read["objective"] is None


def test_bytes_that_are_not_utf8_or_json_and_a_pipe_are_one_line(tmp_path):
    f = tmp_path / "results.json"
    f.write_bytes(json.dumps(GOOD).encode("utf-16"))
    with pytest.raises(SpecError, match=r"is not UTF-8 text \(byte 0xff at offset 0\)"):
        read_results(f)
    f.write_bytes(b"\xef\xbb\xbf" + json.dumps(GOOD).encode())  # a byte-order mark is skipped
    assert read_results(f)["study"] == "s"
    f.write_text(json.dumps(GOOD)[:40])
    with pytest.raises(SpecError, match="is not valid JSON"):
        read_results(f)
    pipe = tmp_path / "pipe.json"
    os.mkfifo(pipe)
    with pytest.raises(SpecError, match=r"is a named pipe \(FIFO\), not a file"):
        read_results(pipe)
