"""Multi-turn conversations: a closed loop where each user holds one conversation at a time, or
an open loop where conversations start at precomputed arrival times.

A user sends turn 1, reads the server's answer, waits `think_time_s` (drawn per turn with
`think_spread`: lengths.py `think_pause`), then sends turn 2 with the whole history (its earlier
turns and the server's *actual* answers, as a chat client does), and so on; in the closed loop
(`run`) when a conversation ends its user starts the next one not yet taken. In the open loop
(`run_open`) conversation c starts at its offset whatever the others are doing, as real sessions
arrive (arrivals.py's schedule, so a slow server is not offered fewer sessions); its first turn
records the intended start, so the schedule lag says whether the client kept up. A conversation ends at its last
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

from kvtune.bench.arrivals import arrival_offsets, arrival_offsets_for
from kvtune.bench.conversations import ConversationSource
from kvtune.bench.lengths import think_pause
from kvtune.bench.loops import OPEN_LEAD_S, Stopper, span
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

    async def conversation(self, c: int, keep: Callable[[RequestSample], bool], start: float | None = None) -> None:
        """Run conversation `c` to its end; `keep` records each turn (False: the phase stopped).
        `start`: the open loop's due time of its first turn (recorded as the intended send)."""
        system = self.source.system(c)
        history: Messages = [] if system is None else [{"role": "system", "content": system}]
        used = 0 if system is None else self.source.tokens(system)
        turns = self.source.turns(c)[: self.max_turns]
        self.stats.started += 1
        for k, text in enumerate(turns, 1):
            if not self.fits(used, text, k == 1):
                self.stats.cut_by_context += 1
                return
            pause = think_pause(self.workload, c, k) if k > 1 else 0.0
            if pause > 0:
                await self.clock.asleep(pause)
            user = {"role": "user", "content": text}
            answer: list[str] = []
            body = self.body(history + [user])
            due = start if k == 1 and start is not None else self.clock.monotonic()
            intended = start if k == 1 else None
            timeout_s = self.workload.request_timeout_s
            sample = await one_request(
                self.client, self.url, body, timeout_s, due, intended, self.secret, self.clock, answer
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
        keep = _keeper(stop, samples)
        taken = 0

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

    async def run_open(self, offsets: list[float], stopper: Stopper | None = None) -> tuple[list[RequestSample], float]:
        """Conversation c (0, 1, ...) starts at ``start + offsets[c]`` whatever the others are
        doing (a start the scheduler reaches late goes out at once, its lag recorded); each then
        runs its turns. Nothing more starts once `stopper` stops the run."""
        stop = stopper or Stopper(None)
        samples: list[RequestSample] = []
        keep = _keeper(stop, samples)
        start = self.clock.monotonic() + OPEN_LEAD_S

        async def starter() -> None:
            for c, offset in enumerate(offsets):
                due = start + offset
                if due > self.clock.monotonic():
                    await self.clock.asleep(due - self.clock.monotonic())
                stop.tasks.append(asyncio.create_task(self.conversation(c, keep, due)))

        stop.tasks.append(asyncio.create_task(starter()))
        # every conversation is started (or the stop cancelled the starter) before the waiting starts
        await asyncio.gather(stop.tasks[0], return_exceptions=True)
        await stop.gather()
        samples.sort(key=lambda s: (s.conversation or 0, s.turn or 0))
        return samples, span(samples)


def _keeper(stop: Stopper, samples: list[RequestSample]) -> Callable[[RequestSample], bool]:
    """`keep` for a phase's conversations: counts the turn sent, records it unless the stop came
    first; False ends the conversation (the phase stopped)."""

    def keep(sample: RequestSample) -> bool:
        stop.sent += 1
        if stop.keep(sample):
            samples.append(sample)
            return stop.reason is None
        return False

    return keep


def conversation_starts(workload: Workload) -> list[float]:
    """An open loop's conversation start offsets (seconds from the phase start): those in
    `duration_s` when set, else `workload.conversations` of them; empty for a closed loop."""
    w = workload
    if w.mode != "open" or w.rate is None:
        return []
    if w.duration_s is not None:
        return arrival_offsets_for(w.duration_s, w.rate, w.arrival, w.burstiness, w.seed)
    return arrival_offsets(w.conversations, w.rate, w.arrival, w.burstiness, w.seed)


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
    may end some early; an open loop's: those its schedule starts); None for a dataset's, whose
    conversations differ in length."""
    if workload.dataset is not None:
        return None
    started = len(conversation_starts(workload)) if workload.mode == "open" else workload.conversations
    return started * workload.turns
