"""The fidelity probe: the reference prompts asked greedily of a running server, with top-k
log-probabilities, over the OpenAI chat API both llama-server and vLLM speak.

The probe reuses the trial's own server after its measurement (no extra launch), so its cost
is a few short answers: `PROBE` keeps it to about a tenth of a demo trial
(benchmarks/fidelity.py measures it). The prompts are a fixed, versioned set shipped with
kvtune (data/fidelity/prompts-v1.json) or the user's own (`fidelity_prompts:` in a study file).
What the answers are compared with is objectives/fidelity.py's business.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

import httpx

from kvtune.errors import SpecError
from kvtune.objectives.fidelity import Answer
from kvtune.readable import check_regular_file

PROMPTS_FILE = Path(__file__).resolve().parent.parent / "data" / "fidelity" / "prompts-v1.json"


@dataclass(frozen=True)
class ProbePlan:
    """What the probe asks: the prompts, how many tokens each answer runs to (the first
    differing token of a lossy cache comes within 5-14 on the demo model), the top-k it reads
    (vLLM allows up to 20; 5 keeps the lumped tail honest and the replies small), and how many
    prompts are in flight at once: one, because a batch's shape changes the numerics (the
    defaults against themselves agreed on 78% of tokens with 4 prompts in flight, on 100% one at
    a time; docs/fidelity.md)."""

    prompts: tuple[str, ...]
    max_tokens: int = 16
    top_k: int = 5
    concurrency: int = 1
    timeout_s: float = 120.0


def shipped_prompts(path: Path = PROMPTS_FILE) -> tuple[str, ...]:
    """The reference prompts kvtune ships (one version; a new set is a new file)."""
    data = json.loads(path.read_text(encoding="utf-8"))
    return tuple(p["text"] for p in data["prompts"])


def read_prompts(path: str | Path) -> tuple[str, ...]:
    """A user's reference prompts: a text file, one prompt a line (blank lines skipped), or a
    JSON list of strings. `SpecError` in one line when it holds none or cannot be read."""
    p = Path(path)
    check_regular_file(p, f"fidelity_prompts: {str(path)!r}")  # a named pipe would block the read
    try:
        text = p.read_text(encoding="utf-8-sig")  # a byte-order mark is skipped, as a trace's
    except FileNotFoundError:
        raise SpecError(f"fidelity_prompts: {str(path)!r} does not exist") from None
    except UnicodeDecodeError:
        raise SpecError(f"fidelity_prompts: {str(path)!r} is not UTF-8 text") from None
    except OSError as e:
        raise SpecError(f"fidelity_prompts: cannot read {str(path)!r}: {e.strerror}") from None
    if p.suffix == ".json":
        try:
            data = json.loads(text)
        except ValueError:
            raise SpecError(f"fidelity_prompts: {str(path)!r} is not valid JSON") from None
        if not isinstance(data, list) or not all(isinstance(x, str) for x in data):
            raise SpecError(f"fidelity_prompts: {str(path)!r} must be a JSON list of prompt strings")
        prompts = tuple(x.strip() for x in data if x.strip())
    else:
        prompts = tuple(line.strip() for line in text.splitlines() if line.strip())
    if not prompts:
        raise SpecError(f"fidelity_prompts: {str(path)!r} holds no prompt")
    return prompts


class ProbeFailed(Exception):
    """The server did not answer a probe prompt with log-probabilities (the reason for people)."""


def _answer(body: Mapping[str, Any]) -> Answer:
    """The tokens and top-k log-probabilities of a chat completion."""
    try:
        content = body["choices"][0]["logprobs"]["content"]
    except (KeyError, IndexError, TypeError):
        raise ProbeFailed("the server answered without log-probabilities") from None
    tokens, top = [], []
    for pos in content or []:
        tokens.append(str(pos.get("token", "")))
        alts = pos.get("top_logprobs") or [{"token": pos.get("token", ""), "logprob": pos.get("logprob", 0.0)}]
        top.append(tuple((str(a.get("token", "")), _logprob(a.get("logprob"))) for a in alts))
    return Answer(tuple(tokens), tuple(top))


def _logprob(v: Any) -> float:
    """A log-probability as a float (a server may send null or -inf for a vanishing one)."""
    try:
        x = float(v)
    except (TypeError, ValueError):
        return -1e9
    return x if x > -1e9 else -1e9


async def _ask_all(
    base_url: str,
    model: str,
    plan: ProbePlan,
    extra_body: Mapping[str, Any],
    transport: httpx.AsyncBaseTransport | None,
) -> list[Answer]:
    url = base_url.rstrip("/") + "/v1/chat/completions"
    gate = asyncio.Semaphore(max(1, plan.concurrency))
    async with httpx.AsyncClient(timeout=plan.timeout_s, transport=transport) as client:

        async def ask(prompt: str) -> Answer:
            body = {
                **extra_body,
                "model": model,
                "messages": [{"role": "user", "content": prompt}],
                "max_tokens": plan.max_tokens,
                "temperature": 0.0,
                "seed": 0,
                "logprobs": True,
                "top_logprobs": plan.top_k,
                "stream": False,
            }
            async with gate:
                try:
                    r = await client.post(url, json=body)
                except httpx.HTTPError as e:
                    raise ProbeFailed(f"the probe's request failed: {type(e).__name__}") from None
            if r.status_code != 200:
                raise ProbeFailed(f"the server answered the probe with HTTP {r.status_code}")
            try:
                return _answer(r.json())
            except ValueError:
                raise ProbeFailed("the server's answer to the probe is not JSON") from None

        return list(await asyncio.gather(*(ask(p) for p in plan.prompts)))


def ask_answers(
    base_url: str,
    model: str,
    plan: ProbePlan,
    extra_body: Mapping[str, Any] | None = None,
    transport: httpx.AsyncBaseTransport | None = None,
) -> list[Answer]:
    """Every prompt's greedy answer, in the plan's order; `ProbeFailed` when one has none."""
    return asyncio.run(_ask_all(base_url, model, plan, dict(extra_body or {}), transport))


def answers_to_json(answers: Sequence[Answer]) -> list[dict[str, Any]]:
    return [a.to_dict() for a in answers]


def answers_from_json(data: Sequence[Mapping[str, Any]]) -> list[Answer]:
    return [Answer.from_dict(d) for d in data]
