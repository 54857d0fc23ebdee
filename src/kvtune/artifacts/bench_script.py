"""`kvtune export --format bench`: a script that checks a deployed server against the study.

What a study measured on the tuning box is a claim until it is seen on the production box. The
script re-runs the study's workload (users or rate, prompt and output lengths, requests, warm-up,
dataset and its length filter, shared prefix, trace and its fit, conversations and their turns,
seed) against the deployed server with `kvtune bench`, with the study's targets and nothing else
(relative ones fixed at the thresholds the baseline gave them, and the error-rate target the study
added) and its per-request SLOs (`--slo`, only when the study had them: they give slo_attainment,
which a target may check), and exits with kvtune bench's status: 0 when every target held, 1 when
one was missed. It first prints the equivalent `vllm bench serve` command line (vllm_bench.py),
for whoever wants the figure from vLLM's own benchmark, with a note for each part of the load it
cannot express. A capacity study is checked at the capacity it found (a trace at the replay speed
it held). It runs the kvtune that wrote it (`writer_kvtune`, an absolute path), so it works from
a shell without kvtune's venv on PATH; `KVTUNE` overrides that, and where the path is gone
(the script was copied to another box) the `kvtune` on PATH stands in. Pure but for reading
which Python runs: a `Deployable` (the trial and its study's spec, read once) in, script text
out; `export.write` makes it executable.
"""

from __future__ import annotations

import os
import re
import shlex
import sys
from dataclasses import replace
from typing import Sequence

from kvtune.artifacts.deployable import Deployable
from kvtune.artifacts.vllm_bench import TRACE_PATH_VAR, VllmLine, served_model, vllm_line
from kvtune.errors import SpecError, TargetError
from kvtune.objectives.slo import Slo
from kvtune.objectives.targets import Target
from kvtune.study.outcome import TrialOutcome
from kvtune.study.spec import StudySpec
from kvtune.workload import Workload


def absolute_targets(d: Deployable) -> list[Target]:
    """The study's targets as absolute thresholds: relative ones set from the baseline."""
    out = []
    for t in d.spec.judged_targets:
        if t.relative:
            try:
                t = t.resolve(d.baseline_metrics)
            except TargetError:
                raise SpecError(
                    f"target {t.text!r} is relative to the baseline, and the baseline was "
                    f"not measured: there is no threshold to check"
                ) from None
            t = replace(t, factor=None)
        out.append(t)
    return out


def load_for(trial: TrialOutcome, spec: StudySpec) -> Workload:
    """The workload to re-run; a capacity study's at the capacity the trial reached (on a trace,
    the replay's speed factor: tuner/trial/capacity.py)."""
    w = spec.workload
    if not spec.is_capacity:
        return w
    capacity = (trial.metrics or {}).get("capacity")
    if not capacity:
        raise SpecError(f"trial {trial.number} held no load: there is no capacity to verify")
    if w.trace is not None:
        return replace(w, trace_speed=capacity)
    return replace(w, rate=capacity) if w.mode == "open" else replace(w, concurrency=int(capacity))


#: Workload settings `bench_args` writes whatever their value (the rest: only when not the
#: default); `mode`, `rate`, `trace` and `multiturn` are said by --rate and --workload.
ALWAYS = ("prompt_tokens", "output_tokens", "num_requests", "seed", "endpoint")
BY_FLAG = ("mode", "rate", "trace", "multiturn", "concurrency")


def bench_args(w: Workload, targets: list[Target], slo: Slo | None = None) -> list[str]:
    """`kvtune bench` flags for workload `w`, `targets` and the study's SLOs `slo` (the URL goes
    first): the front door's flags, and `--set workload.KEY=VALUE` for every other setting of
    `w` that is not its default, so the script drives the load the study measured (the same
    seeded draws, trace fit and conversations)."""
    from kvtune.study.settings import all_settings

    args: list[object] = []
    if w.mode == "open":
        args += ["--rate", w.rate]
    else:
        args += ["--concurrency", w.concurrency]  # a trace's open loop: sizes its warm-up
    if w.trace is not None:
        args += ["--workload", f"trace:{w.trace}"]
    elif w.multiturn:
        args += ["--workload", "multiturn"]
    for s in all_settings():
        if s.section != "workload" or s.field in BY_FLAG:
            continue
        value = getattr(w, s.field)
        if s.field not in ALWAYS and (value == s.default or value is None):
            continue
        if s.doc.bench_flag:
            args += [s.doc.bench_flag, value]
        else:
            args += ["--set", f"{s.key}={_yaml_scalar(value)}"]
    if w.reuses_prefixes:  # a trace, conversations, a shared prefix: the tuner measured them cached
        args += ["--prompt-cache", "on"]
    if slo is not None:
        args += ["--slo", slo.text]
    for t in targets:
        args += ["--target", t.constraint_key]
    return [str(a) for a in args]


def _yaml_scalar(value: object) -> str:
    """A value as `--set` reads it back (YAML): true/false, numbers, a string quoted where YAML
    would read it as something else (`on`, `1e3`, `null`)."""
    import yaml

    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    text = str(value)
    return text if yaml.safe_load(text) == text else yaml.safe_dump(text, default_style="'").strip()


def writer_kvtune() -> list[str]:
    """The kvtune command that is running now: this Python (not resolved: a venv's python is a
    link whose target would lose the venv) with ``-m kvtune.cli``, the same installation
    whatever PATH holds. ``kvtune`` where Python cannot say where it runs from."""
    return [os.path.abspath(sys.executable), "-m", "kvtune.cli"] if sys.executable else ["kvtune"]


def _one_line(text: str) -> str:
    """Text for a comment line: a control character (a newline) would end the comment."""
    return re.sub(r"[\x00-\x1f\x7f]", "?", text)


def _kvtune_lines(kvtune: Sequence[str]) -> list[str]:
    """Pick the kvtune to run: $KVTUNE, else the one that wrote the script, else kvtune on PATH;
    none of them: one line on stderr and exit 127 (bash's "command not found")."""
    return [
        f"WROTE_IT=({' '.join(shlex.quote(a) for a in kvtune)})",
        'if [ -n "${KVTUNE:-}" ]; then',
        '    read -r -a KVTUNE_CMD <<< "$KVTUNE"',
        'elif [ -x "${WROTE_IT[0]}" ] || [ "${WROTE_IT[0]}" = kvtune ]; then',
        '    KVTUNE_CMD=("${WROTE_IT[@]}")',
        "elif command -v kvtune > /dev/null; then",
        '    echo "note: ${WROTE_IT[0]}, the kvtune that wrote this script, is not here; '
        'running $(command -v kvtune)" >&2',
        "    KVTUNE_CMD=(kvtune)",
        "else",
        '    echo "$0: no kvtune to run: ${WROTE_IT[0]}, the kvtune that wrote this script, is not here '
        "and none is on PATH; set KVTUNE (e.g. KVTUNE='python3 -m kvtune.cli')\" >&2",
        "    exit 127",
        "fi",
    ]


def _vllm_lines(line: VllmLine) -> list[str]:
    """The script lines that print the vLLM equivalent (a trace's rows written first)."""
    out = ["echo 'The same load with vLLM bench serve (not run here):'"]
    out += [f"echo {shlex.quote('  note: ' + n)}" for n in line.notes]
    cmd = shlex.quote(shlex.join(line.argv))
    if not line.argv:
        return out
    if not line.trace_rows:
        return [*out, f"printf '  %s --base-url %s\\n' {cmd} \"$URL\""]
    return [
        *out,
        f'{TRACE_PATH_VAR}="$(mktemp "${{TMPDIR:-/tmp}}/kvtune-vllm-trace.XXXXXX")"',
        f"cat > \"${TRACE_PATH_VAR}\" <<'KVTUNE_TRACE'",
        *line.trace_rows,
        "KVTUNE_TRACE",
        f'printf \'  %s --dataset-path %s --base-url %s\\n\' {cmd} "${TRACE_PATH_VAR}" "$URL"',
    ]


def render(d: Deployable, host: str, port: int, header: list[str], kvtune: Sequence[str] | None = None) -> str:
    """The verification script for the trial `d` (header: the launch script's lines);
    `kvtune`: the command it runs by default (`writer_kvtune()` unless given)."""
    kvtune = list(kvtune or writer_kvtune())
    spec = d.spec
    w = load_for(d.trial, spec)
    targets = absolute_targets(d)
    url = f"http://{'127.0.0.1' if host in ('0.0.0.0', '::', '') else host}:{port}"
    model = served_model(d.trial.argv, spec)
    bench = " ".join(shlex.quote(a) for a in bench_args(w, targets, spec.slo))
    vllm = vllm_line(w, spec.slo, model)
    lines = [
        "#!/usr/bin/env bash",
        "# Generated by kvtune: checks a deployed server against the study's workload and targets.",
        *[f"# {h}" for h in header],
        "# targets checked: " + ", ".join(t.constraint_key for t in targets),
        f"# per-request SLOs: {spec.slo.text if spec.slo else 'none (the study had no --slo)'}",
        f"# usage: verify.sh [BASE_URL]   (default {url}); exit 0 = every target held,",
        "#        1 = a target was missed (or every request failed), 2 = bad input,",
        "#        127 = no kvtune to run (the line before says why).",
        f"# KVTUNE names the kvtune command (default: {_one_line(shlex.join(kvtune))}, the kvtune that wrote",
        "# this script, else kvtune on PATH), e.g. KVTUNE='python -m kvtune.cli';",
        "# KVTUNE_TOKENIZER a GGUF file or HF folder whose tokenizer makes prompt sizes exact",
        "# (default: the study's model where it exists on this box; else sizes are approximate).",
        "set -euo pipefail",
        f'URL="${{1:-{url}}}"',
        *_kvtune_lines(kvtune),
        f"MODEL_TOKENIZER={shlex.quote(model.path)}",
        'TOKENIZER="${KVTUNE_TOKENIZER:-$MODEL_TOKENIZER}"',
        "EXTRA=()",
        'if [ -n "$TOKENIZER" ] && [ -e "$TOKENIZER" ]; then EXTRA=(--tokenizer "$TOKENIZER"); fi',
        *_vllm_lines(vllm),
        f'exec "${{KVTUNE_CMD[@]}}" bench "$URL" {bench} ${{EXTRA[@]+"${{EXTRA[@]}}"}}',
        "",
    ]
    return "\n".join(lines)
