"""Multi-turn conversations in a closed loop: each user holds one conversation at a time.

A user sends turn 1, reads the server's answer, waits `think_time_s`, then sends turn 2 with the
whole history (its earlier turns and the server's *actual* answers, as a chat client does), and so
on; when a conversation ends it starts the next one not yet taken. A conversation ends at its last
turn, at a failed turn (there is no answer to continue from), or when its next turn would not fit
the context `ceiling`: the tokens the server counted for the last request (its prompt plus answer,
``usage``) plus the new turn, its answer and the template's share. Every sample says which
conversation and turn it was, so TTFT is reported for first turns (a cold prefill) apart from later
ones (where a prefix cache serves the history): ``median_ttft_ms_turn1`` vs
``median_ttft_ms_later``.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Callable

import httpx

from kvtune.bench.conversations import ConversationSource
from kvtune.bench.loops import Stopper, span
from kvtune.bench.stream import one_request
from kvtune.clock import REAL_CLOCK, Clock
from kvtune.objectives.metrics import RequestSample, percentile
from kvtune.workload import TEMPLATE_TOKENS, TEMPLATE_TOKENS_PER_TURN, Workload

Messages = list[dict[str, str]]


@dataclass
class ConversationStats:
    """What the conversations did: how many ran, and how many the context cut short."""

    started: int = 0
    cut_by_context: int = 0
    turns_sent: int = 0

    def describe(self) -> str:
        text = f"{self.started} conversations, {self.turns_sent} turns sent"
        if self.cut_by_context:
            text += f"; {self.cut_by_context} ended early: the next turn would not fit the context"
        return text


@dataclass
class ConversationLoop:
    """The conversations of one phase, against one server (`url` is the chat endpoint)."""

    client: httpx.AsyncClient
    url: str
    source: ConversationSource
    body: Callable[[Messages], dict]
    workload: Workload
    secret: str | None = None
    clock: Clock = REAL_CLOCK
    max_turns: int | None = None  # the warm-up sends first turns only
    stats: ConversationStats = field(default_factory=ConversationStats)

    @property
    def ceiling(self) -> int:
        w = self.workload
        return w.conversation_max_tokens if w.conversation_max_tokens is not None else w.request_tokens

    def fits(self, used: int, turn_text: str, first: bool) -> bool:
        """Whether the next turn fits: the context so far, the new turn, its answer, the template."""
        need = used + self.source.tokens(turn_text) + self.workload.output_tokens + TEMPLATE_TOKENS_PER_TURN
        return need + (TEMPLATE_TOKENS if first else 0) <= self.ceiling

    async def conversation(self, c: int, keep: Callable[[RequestSample], bool]) -> None:
        """Run conversation `c` to its end; `keep` records each turn (False: the phase stopped)."""
        history: Messages = []
        used = 0
        turns = self.source.turns(c)[: self.max_turns]
        self.stats.started += 1
        for k, text in enumerate(turns, 1):
            if not self.fits(used, text, k == 1):
                self.stats.cut_by_context += 1
                return
            if k > 1 and self.workload.think_time_s > 0:
                await self.clock.asleep(self.workload.think_time_s)
            user = {"role": "user", "content": text}
            answer: list[str] = []
            body, due = self.body(history + [user]), self.clock.monotonic()
            timeout_s = self.workload.request_timeout_s
            sample = await one_request(
                self.client, self.url, body, timeout_s, due, secret=self.secret, clock=self.clock, answer=answer
            )
            sample.conversation, sample.turn = c, k
            self.stats.turns_sent += 1
            if not keep(sample) or not sample.ok:
                return
            history += [user, {"role": "assistant", "content": "".join(answer)}]
            used = sample.prompt_tokens + sample.output_tokens if sample.prompt_tokens else self._estimate(history)

    def _estimate(self, history: Messages) -> int:
        """The context a history takes when the server did not count it (no ``usage``)."""
        return TEMPLATE_TOKENS + sum(self.source.tokens(m["content"]) + TEMPLATE_TOKENS_PER_TURN // 2 for m in history)

    async def run(
        self, first: int, count: int, users: int, stopper: Stopper | None = None
    ) -> tuple[list[RequestSample], float]:
        """Conversations ``first .. first + count - 1`` over `users` users, each one at a time;
        (samples in conversation and turn order, first send to last end)."""
        stop = stopper or Stopper(None)
        samples: list[RequestSample] = []
        taken = 0

        def keep(sample: RequestSample) -> bool:
            stop.sent += 1
            if stop.keep(sample):
                samples.append(sample)
                return stop.reason is None
            return False

        async def user() -> None:
            nonlocal taken
            while taken < count and stop.reason is None:
                c = first + taken
                taken += 1
                await self.conversation(c, keep)

        stop.tasks = [asyncio.create_task(user()) for _ in range(min(users, count))]
        await stop.gather()
        samples.sort(key=lambda s: (s.conversation or 0, s.turn or 0))
        return samples, span(samples)


def turn_metrics(samples: list[RequestSample]) -> dict[str, float]:
    """TTFT of first turns apart from later turns (ms; a failed turn enters the percentiles as
    +inf, as in `summarize_requests`), and the conversations' length. Empty without turns."""
    turned = [s for s in samples if s.turn is not None]
    if not turned:
        return {}
    out: dict[str, float] = {}
    for suffix, group in (("turn1", [s for s in turned if s.turn == 1]), ("later", [s for s in turned if s.turn != 1])):
        ttfts = [1000.0 * s.ttft_s for s in group if s.ok and s.ttft_s is not None]
        pooled = ttfts + [float("inf")] * sum(1 for s in group if not s.ok)
        out[f"mean_ttft_ms_{suffix}"] = sum(ttfts) / len(ttfts) if ttfts else float("nan")
        out[f"median_ttft_ms_{suffix}"] = percentile(pooled, 50)
        out[f"p90_ttft_ms_{suffix}"] = percentile(pooled, 90)
        out[f"requests_{suffix}"] = float(len(group))
    conversations = {s.conversation for s in turned}
    out["conversations"] = float(len(conversations))
    out["mean_turns_per_conversation"] = len(turned) / len(conversations)
    return out


def planned_turns(workload: Workload) -> int | None:
    """The turns a multi-turn run plans: every turn of its synthetic conversations (the context
    may end some early); None for a dataset's, whose conversations differ in length."""
    return None if workload.dataset is not None else workload.conversations * workload.turns
