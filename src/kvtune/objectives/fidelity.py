"""Does a config still answer like the defaults? Its greedy answers against the defaults'. Pure.

KV cache quantisation, fp8 caches and speculation that is not exact change what the model says;
a speed tuner that never looks at the tokens can recommend a config that answers wrongly. The
yardstick is llama.cpp's (`llama-perplexity --kl-divergence`): per position, the KL divergence of
the next-token distribution against the reference's, and the share of positions whose top token
agrees. Through the OpenAI API only the top-k log-probabilities are seen, so the KL is taken over
the reference's top-k tokens plus one lumped "rest" (a coarsening: it can only understate the
full-vocabulary KL, docs/fidelity.md), with k fixed.

Both servers answer greedily from the same prompt; the two answers stay conditioned on the same
text only up to their first differing token, so the KL is averaged over those aligned positions
(the first differing one included: it is still conditioned on the same prefix). The per-prompt
means are the sample the gate is judged on: the config passes when the one-sided 95% upper bound
of their mean is below the threshold (`kld<0.01` by default), so a config is refused unless the
prompts show it close to the defaults, and a config as close as the defaults' own A/A (KL 0 on a
deterministic build) always passes.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from scipy import stats as scipy_stats

# The one-sided confidence of the gate's upper bound on the mean KL divergence.
CONFIDENCE = 0.95
# Two answers "identical" when their first this many tokens are.
IDENTICAL_TOKENS = 16
# A probability below this is taken as this (a log-probability of -inf, a missing token).
_FLOOR = 1e-10

TopK = Sequence[tuple[str, float]]  # (token, log-probability), most likely first


@dataclass(frozen=True)
class Answer:
    """One greedy answer: its tokens and, per position, the top-k (token, log-probability)."""

    tokens: tuple[str, ...]
    top: tuple[tuple[tuple[str, float], ...], ...]

    def to_dict(self) -> dict[str, Any]:
        return {"tokens": list(self.tokens), "top": [[[t, round(lp, 5)] for t, lp in pos] for pos in self.top]}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Answer":
        return cls(
            tokens=tuple(str(t) for t in d.get("tokens") or ()),
            top=tuple(tuple((str(t), float(lp)) for t, lp in pos) for pos in d.get("top") or ()),
        )


def position_kld(reference: TopK, candidate: TopK) -> float:
    """KL(reference || candidate) at one position over the reference's top-k tokens and the rest.

    A reference token outside the candidate's top-k gets the most the candidate can give it: its
    smallest listed probability, or its unlisted mass if that is less. Never negative."""
    p = {t: math.exp(lp) for t, lp in reference}
    q_listed = {t: math.exp(lp) for t, lp in candidate}
    # at least a micro-unit: rounded log-probabilities can sum past 1
    q_unlisted = max(1.0 - sum(q_listed.values()), 1e-6)
    q_cap = min(min(q_listed.values()), q_unlisted) if q_listed else _FLOOR
    q = {t: q_listed.get(t, q_cap) for t in p}
    kl = sum(pt * math.log(pt / max(q[t], _FLOOR)) for t, pt in p.items() if pt > 0)
    p_rest = max(1.0 - sum(p.values()), 0.0)
    q_rest = max(1.0 - sum(q.values()), _FLOOR)
    if p_rest > _FLOOR:
        kl += p_rest * math.log(p_rest / q_rest)
    return max(kl, 0.0)


@dataclass(frozen=True)
class AnswerComparison:
    """One prompt: where the answers part, how many tokens agree, the mean KL before parting."""

    first_difference: int | None  # the first position whose token differs; None: identical
    agreement: float  # share of positions with the same token at the same place
    kld: float  # mean KL over the aligned positions
    aligned: int  # positions the KL is averaged over

    @property
    def identical_start(self) -> bool:
        """The answers agree over their first IDENTICAL_TOKENS tokens."""
        return self.first_difference is None or self.first_difference >= IDENTICAL_TOKENS


def compare_answers(reference: Answer, candidate: Answer) -> AnswerComparison:
    """The candidate's answer against the reference's (same prompt, both greedy)."""
    ref, cand = reference.tokens, candidate.tokens
    common = min(len(ref), len(cand))
    first = next((i for i in range(common) if ref[i] != cand[i]), None)
    if first is None and len(ref) != len(cand):
        first = common  # one answer stopped where the other went on
    longest = max(len(ref), len(cand))
    same = sum(1 for i in range(common) if ref[i] == cand[i])
    agreement = same / longest if longest else 1.0
    end = common if first is None else min(first + 1, common)
    end = min(end, len(reference.top), len(candidate.top))
    klds = [position_kld(reference.top[i], candidate.top[i]) for i in range(end)]
    return AnswerComparison(first, agreement, statistics.fmean(klds) if klds else 0.0, len(klds))


@dataclass(frozen=True)
class Fidelity:
    """A config's answers on the reference prompts against the defaults'. `kld_upper` is the
    one-sided 95% upper bound of the mean of the per-prompt KL divergences (what the gate
    reads); `probed` False: nothing in the config changes the model's numerics, so it was not
    probed and stands at the floor by construction."""

    prompts: int
    kld: float
    kld_upper: float
    agreement: float
    identical: float  # share of answers identical over their first IDENTICAL_TOKENS tokens
    first_difference_median: float | None  # over the prompts whose answers differ
    probed: bool = True
    method: str = "greedy, compared up to the first differing token"

    def metrics(self) -> dict[str, float]:
        """The figures a trial's metrics carry (the `kld` target reads `kld_upper`)."""
        return {
            "kld": self.kld,
            "kld_upper": self.kld_upper,
            "token_agreement": self.agreement,
            "identical_answers": self.identical,
        }

    def to_dict(self) -> dict[str, Any]:
        return {
            "prompts": self.prompts,
            "kld": self.kld,
            "kld_upper": self.kld_upper,
            "agreement": self.agreement,
            "identical": self.identical,
            "first_difference_median": self.first_difference_median,
            "probed": self.probed,
            "method": self.method,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Fidelity":
        first = d.get("first_difference_median")

        def kl(key: str) -> float:  # results.json writes an infinite KL (a failed probe) as null
            v = d.get(key)
            return math.inf if v is None else float(v)

        return cls(
            prompts=int(d.get("prompts") or 0),
            kld=kl("kld"),
            kld_upper=kl("kld_upper"),
            agreement=float(d.get("agreement", 1.0)),
            identical=float(d.get("identical", 1.0)),
            first_difference_median=None if first is None else float(first),
            probed=bool(d.get("probed", True)),
            method=str(d.get("method") or cls.method),
        )

    def describe(self) -> str:
        """``12% of tokens agree with the defaults', KLD 0.081 (95% upper bound 0.11)``."""
        if not self.probed:
            return "not probed: no flag that changes the model's numerics"
        first = (
            ""
            if self.first_difference_median is None
            else f", first difference at token {self.first_difference_median:g}"
        )
        return (
            f"{self.agreement * 100:.0f}% of tokens agree with the defaults'{first}, "
            f"KLD {self.kld:.4f} (95% upper bound {self.kld_upper:.4f}) over {self.prompts} prompts"
        )


def upper_bound(values: Sequence[float], confidence: float = CONFIDENCE) -> float:
    """One-sided upper confidence bound of the mean (Student t); the value itself for one."""
    n = len(values)
    mean = statistics.fmean(values)
    if n < 2:
        return mean
    sd = statistics.stdev(values)
    if sd == 0:
        return mean
    return mean + float(scipy_stats.t.ppf(confidence, n - 1)) * sd / math.sqrt(n)


def fidelity(reference: Sequence[Answer], candidate: Sequence[Answer]) -> Fidelity:
    """Compare answers prompt by prompt (same order, same prompts)."""
    if len(reference) != len(candidate) or not reference:
        raise ValueError(f"{len(candidate)} answers against {len(reference)} reference answers")
    compared = [compare_answers(r, c) for r, c in zip(reference, candidate)]
    klds = [c.kld for c in compared]
    firsts = [c.first_difference for c in compared if c.first_difference is not None]
    return Fidelity(
        prompts=len(compared),
        kld=statistics.fmean(klds),
        kld_upper=upper_bound(klds),
        agreement=statistics.fmean(c.agreement for c in compared),
        identical=sum(c.identical_start for c in compared) / len(compared),
        first_difference_median=float(statistics.median(firsts)) if firsts else None,
    )


# The figures of a config that changes nothing numeric: the floor, by construction.
UNPROBED = Fidelity(
    prompts=0, kld=0.0, kld_upper=0.0, agreement=1.0, identical=1.0, first_difference_median=None, probed=False
)
