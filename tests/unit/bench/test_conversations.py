"""Conversations' user turns: a nonce opens each conversation only, ShareGPT gives every human turn."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvtune.bench.conversations import ConversationSource, conversation_source
from kvtune.bench.prompts import prompt_nonce
from kvtune.errors import SpecError
from kvtune.workload import Workload

WL = Workload(multiturn=True, turns=3, prompt_tokens=40)
WORDS = [f"w{i}" for i in range(50)]


def test_conversations_differ_from_their_first_word_and_later_turns_carry_no_nonce() -> None:
    src = ConversationSource(WL, "salt", words=WORDS)
    a, b = src.turns(0), src.turns(1)
    assert len(a) == 3 and a[0].split()[0] != b[0].split()[0]
    assert all(len(t.split()) == 40 for t in a) and all(src.tokens(t) == 40 for t in a)
    assert ConversationSource(WL, "other", words=WORDS).turns(0)[0] != a[0]  # a new run: a new nonce
    assert ConversationSource(WL, "other", words=WORDS).turns(0)[1:] == a[1:]  # the same work after it
    assert src.exact


def test_without_words_turns_are_approximate_and_the_source_says_so() -> None:
    src = ConversationSource(WL, "salt")
    first = src.turns(0)[0]
    assert first.startswith(prompt_nonce(0, WL.seed, "conversation:salt")[:5]) and not src.exact
    assert "about 40 new tokens" in src.describe()


def test_sharegpt_conversations_give_every_human_turn(tmp_path: Path) -> None:
    f = tmp_path / "sg.json"
    records = [
        {
            "conversations": [
                {"from": "human", "value": "hi"},
                {"from": "gpt", "value": "x"},
                {"from": "human", "value": "more"},
            ]
        },
        {"conversations": [{"from": "gpt", "value": "no human turn"}]},
        {"messages": [{"role": "user", "content": "one"}]},
    ]
    f.write_text(json.dumps(records))
    src = conversation_source(Workload(multiturn=True, dataset=str(f)), "s", [], None)
    seen = sorted(tuple(t[1:]) + (t[0].split("] ", 1)[1],) for t in (src.turns(0), src.turns(1)))
    assert seen == [("more", "hi"), ("one",)]
    two = next(t for t in (src.turns(0), src.turns(1)) if len(t) == 2)
    assert two[0].startswith("[req-") and two[1] == "more"  # the nonce opens the conversation only
    assert "2 conversations of 3 records, 1.5 human turns each" in src.describe()


def test_a_dataset_without_conversations_is_one_line(tmp_path: Path) -> None:
    f = tmp_path / "p.jsonl"
    f.write_text('{"prompt": "only prompts"}\n')
    with pytest.raises(SpecError, match="has no conversations: a multi-turn workload needs ShareGPT records"):
        conversation_source(Workload(multiturn=True, dataset=str(f)), "s", [], None)
