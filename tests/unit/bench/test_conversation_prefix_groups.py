"""Conversations that share a system prompt (issue 30 item 4, "system prompts shared by subsets
of users"): with `shared_prefix_fraction` every conversation opens with a system prompt, one of
`shared_prefix_groups` shared ones for that fraction of conversations, a unique one for the rest;
every turn carries it first, so the fake's prefix cache serves a group's prompt from its second
conversation on (on virtual time: exact on any machine)."""

from __future__ import annotations

from kvtune.bench.client import BenchOptions, BenchRun, run
from kvtune.bench.conversations import ConversationSource
from kvtune.testing.mock_openai import MockOpenAI
from kvtune.workload import Workload

WORDS = [f"w{i}" for i in range(50)]  # stand-ins for a tokenizer's single-token words
SYSTEM = 40


def _wl(fraction: float, groups: int, **kw: object) -> Workload:
    base: dict[str, object] = dict(
        multiturn=True,
        turns=2,
        concurrency=1,
        prompt_tokens=20,
        output_tokens=3,
        num_requests=12,
        warmup_requests=0,
        shared_prefix_fraction=fraction,
        shared_prefix_tokens=SYSTEM,
        shared_prefix_groups=groups,
    )
    base.update(kw)
    return Workload(**base).validate()  # type: ignore[arg-type]


def _on(wl: Workload) -> tuple[MockOpenAI, BenchRun]:
    fake = MockOpenAI(ttft_s=0.01, itl_s=0.001, prefill_s_per_token=0.001, prefix_cache=True)
    return fake, run(fake.base_url, wl, BenchOptions("m", transport=fake.transport(), clock=fake.clock))


def test_each_group_of_conversations_shares_its_system_prompt_and_the_rest_have_their_own() -> None:
    src = ConversationSource(_wl(0.5, 2), "salt", words=WORDS)
    systems = [src.system(c) for c in range(8)]
    shared = systems[1::2]  # fraction 0.5: conversations 1, 3, 5, 7 share, dealt to groups 0, 1, 0, 1
    assert shared[0] == shared[2] != shared[1] == shared[3]
    unique = systems[0::2]
    assert len(set(unique)) == 4 and not set(unique) & set(shared)
    assert all(len(s.split()) == SYSTEM for s in systems if s)  # every conversation pays the same prompt
    assert ConversationSource(_wl(0.0, 1, shared_prefix_tokens=0), "salt", words=WORDS).system(0) is None


def test_every_turn_opens_with_the_conversations_system_prompt() -> None:
    fake, res = _on(_wl(1.0, 2, num_requests=4))
    assert [(s.conversation, s.turn) for s in res.samples] == [(0, 1), (0, 2), (1, 1), (1, 2)]
    roles = [[m["role"] for m in body["messages"]] for body in fake.received]
    assert roles == [["system", "user"], ["system", "user", "assistant", "user"]] * 2
    firsts = [body["messages"][0]["content"] for body in fake.received]
    assert firsts[0] == firsts[1] != firsts[2] == firsts[3]  # conversations 0 and 1: groups 0 and 1
    assert "system prompt shared by 100% of conversations in 2 groups" in res.prompt_source


def test_the_cache_serves_a_groups_prompt_from_its_second_conversation_on() -> None:
    """One group: conversation 0's first turn pays for the system prompt, every later
    conversation's first turn finds it (and nothing more: its own nonce comes next)."""
    fake, res = _on(_wl(1.0, 1, num_requests=6))
    first_turns = [s.server_timings["cache_n"] for s in res.samples if s.turn == 1 and s.server_timings]
    system_words = len(fake.received[0]["messages"][0]["content"].split())  # ~40 tokens, in the fake's words
    assert first_turns == [0, system_words, system_words] and system_words > 10
