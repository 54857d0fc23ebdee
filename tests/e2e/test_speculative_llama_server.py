"""Speculative decoding on a real llama-server: the demo model drafts for itself (the same
vocabulary, so every greedy draft is the target's own choice and most are accepted).

`kvtune run --draft-model` adds the draft knobs; the study file fixes drafting on and leaves the
draft length to the search, so trial 1 drafts and the baseline (the server's defaults) does not.
The trial's metrics carry ``spec_acceptance_rate`` from the server's own per-request timings
(``draft_n`` / ``draft_n_accepted``): above 0 for the drafting trial, absent for the baseline.
Two short server starts and two 5-request measurements: well under two minutes on an idle box.
"""

from __future__ import annotations

import json
from pathlib import Path

from kvtune.launchers.models import demo_model_path
from tests.e2e.conftest import kvtune

STUDY = """\
space:
  spec-type: draft-simple
  spec-draft-n-max: [4, 8]
  parallel: 2
  threads: 2
  flash-attn: null
  cache-type-k: null
  cache-type-v: null
  batch-size: null
  ubatch-size: null
  cont-batching: null
"""


def test_a_draft_model_drafts_and_its_acceptance_rate_is_recorded(tmp_path: Path, llama_server: str) -> None:
    draft = str(demo_model_path())
    (tmp_path / "spec.yaml").write_text(STUDY)
    r = kvtune(
        "run",
        "--study-file",
        str(tmp_path / "spec.yaml"),
        "--study",
        "spec",
        "--runs-dir",
        str(tmp_path / "runs"),
        "--set",
        "llama_server=" + str(llama_server),
        "--set",
        "draft_model=" + str(draft),
        "--trials",
        "2",
        "--set",
        "confirm_top=0",
        "--set",
        "informed_start=false",
        "--target",
        "ttft<120s",
        "--concurrency",
        "2",
        "--prompt-tokens",
        "32",
        "--output-tokens",
        "32",
        "--set",
        "workload.num_requests=4",
        "--set",
        "workload.warmup_requests=1",
        cwd=tmp_path,
        timeout=900,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    trials = json.loads((tmp_path / "runs" / "spec" / "results.json").read_text())["trials"]
    baseline, drafting = trials[0], trials[1]
    assert "--spec-draft-model" not in baseline["argv"] and "spec_acceptance_rate" not in baseline["metrics"]
    argv = drafting["argv"]
    assert argv[argv.index("--spec-type") + 1] == "draft-simple" and argv[argv.index("--spec-draft-model") + 1] == draft
    assert 0 < drafting["metrics"]["spec_acceptance_rate"] <= 1
    assert drafting["metrics"]["spec_draft_tokens_server"] > 0
