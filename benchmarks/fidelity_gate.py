"""How often the fidelity gate refuses, by how far a config's answers really moved: its false
refusals below the threshold and its power above it, simulated through kvtune's own comparison
(`objectives.fidelity.fidelity`) and gate (`kld<0.01`, the one-sided 95% upper bound).

    .venv/bin/python benchmarks/fidelity_gate.py [--studies 2000] [--pool 600] [--prompts 8] [--seed 0]

The answers come from the fake model (testing/fake_openai.py `fake_answer`: each next word's
logit drawn from the prompt and the words so far; a drift of scale d moves every logit, as a
quantised cache moves the numerics). For each drift a pool of prompts is answered by the
reference (drift 0) and the drifted model; the drift's true mean KL is the pool's mean. Each
simulated study draws `--prompts` prompts from the pool, runs `fidelity()` and asks the gate.
Prints, per drift: the true mean KL, the refusal rate with its 95% Wilson interval, and what the
gate could not detect (a true KL above the threshold refused less than 80% of the time).
"""

from __future__ import annotations

import argparse
import math
import random
import statistics
import sys
from typing import Sequence

from kvtune.objectives.fidelity import Answer, compare_answers, fidelity
from kvtune.objectives.targets import DEFAULT_FIDELITY_TARGET, parse_target
from kvtune.testing.fake_openai import fake_answer

DRIFTS = (0.0, 0.2, 0.45, 0.55, 0.6, 0.65, 0.7, 0.75, 0.8, 0.9, 1.5)
TOKENS, TOP_K = 16, 5


def answer(prompt: str, drift: float) -> Answer:
    content = fake_answer(prompt, TOKENS, TOP_K, drift)
    top = tuple(tuple((a["token"], a["logprob"]) for a in c["top_logprobs"]) for c in content)
    return Answer(tuple(c["token"] for c in content), top)


def wilson(k: int, n: int) -> tuple[float, float]:
    """95% Wilson interval of a rate k/n."""
    if n == 0:
        return (0.0, 1.0)
    z, p = 1.96, k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return (max(0.0, centre - half), min(1.0, centre + half))


def refusal_rate(
    reference: Sequence[Answer], candidate: Sequence[Answer], studies: int, prompts: int, rng: random.Random
) -> int:
    """How many of `studies` draws of `prompts` prompts the gate refuses."""
    gate = parse_target(DEFAULT_FIDELITY_TARGET)
    refused = 0
    for _ in range(studies):
        idx = rng.sample(range(len(reference)), prompts)
        f = fidelity([reference[i] for i in idx], [candidate[i] for i in idx])
        refused += not gate.met(f.metrics())
    return refused


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--studies", type=int, default=2000)
    ap.add_argument("--pool", type=int, default=600)
    ap.add_argument("--prompts", type=int, default=8)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args(argv)
    rng = random.Random(a.seed)
    pool = [f"reference prompt {a.seed}-{i}" for i in range(a.pool)]
    reference = [answer(p, 0.0) for p in pool]
    threshold = parse_target(DEFAULT_FIDELITY_TARGET).threshold
    print(
        f"gate {DEFAULT_FIDELITY_TARGET}, {a.prompts} prompts x {TOKENS} tokens, top-{TOP_K}; {a.studies} studies per drift"
    )
    print("| drift | true mean KL | refused | 95% interval |")
    print("|---|---|---|---|")
    missed = []
    for d in DRIFTS:
        candidate = [answer(p, d) for p in pool]
        true_kl = statistics.fmean(compare_answers(r, c).kld for r, c in zip(reference, candidate))
        k = refusal_rate(reference, candidate, a.studies, a.prompts, rng)
        lo, hi = wilson(k, a.studies)
        print(f"| {d:g} | {true_kl:.4f} | {k / a.studies * 100:.1f}% | [{lo * 100:.1f}, {hi * 100:.1f}] |")
        if true_kl > threshold and k / a.studies < 0.8:
            missed.append(f"true KL {true_kl:.4f} refused only {k / a.studies * 100:.0f}% of the time")
    print("could not detect (true KL above the threshold, refused < 80%): " + ("; ".join(missed) or "none"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
