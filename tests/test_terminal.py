"""What the command prints from callers and the web: no escape sequence, control or invisible character survives."""

from __future__ import annotations

import json

import pytest

from pydantic_ai_perplexity._present.terminal import for_terminal, json_for_terminal, line_for_terminal


@pytest.mark.parametrize(
    ('raw', 'shown'),
    [
        ('\x1b]0;TITLE\x07after', 'after'),  # a title set, BEL-terminated
        ('\x1b]2;TITLE\x1b\\after', 'after'),  # ST-terminated
        ('\x1b]8;;https://evil.example/\x07link\x1b]8;;\x07', 'link'),  # an OSC 8 hyperlink keeps its text only
        ('\x9d0;TITLE\x9cafter', 'after'),  # 8-bit OSC and ST
        ('a\x1b[2Jb\x1b[31mc\x9b1;2Hd', 'abcd'),  # CSI, 7- and 8-bit
        ('a\x1bPq#0;2;0;0;0\x1b\\b', 'ab'),  # DCS (sixel)
        ('a\x1b_payload\x1b\\b\x1b^pm\x07c', 'abc'),  # APC, PM
        ('a\x1bcb\x1b(0c', 'abc'),  # reset, charset
        ('open \x1b]0;never closed', 'open 0;never closed'),  # unterminated: only the introducer goes
        ('zero\u200bwidth\u200d\u2060\ufeff bidi\u202e\u2066x\u2069 tag\U000e0041', 'zerowidth bidix tag'),
        ('bell\x07 back\x08space car\rriage del\x7f nul\x00', 'bell backspace carriage del nul'),
        ('line\u2028sep\u2029para', 'lineseppara'),
        ('keeps\nlines\tand tabs, ü, 中文, emoji 🙂', 'keeps\nlines\tand tabs, ü, 中文, emoji 🙂'),
    ],
)
def test_escape_sequences_and_invisible_characters_are_removed(raw: str, shown: str) -> None:
    assert for_terminal(raw) == shown


def test_one_line_values_collapse_whitespace() -> None:
    assert line_for_terminal(' a\n\tb \x1b]0;x\x07 c\u2028d ') == 'a b cd'


def test_json_keeps_its_values_with_the_characters_escaped() -> None:
    value = {'q': '\x1b]0;T\x07 zero\u200bwidth \u202e \U000e0041 \x9b', 'ok': 'ü 中文 🙂'}
    text = json.dumps(value, ensure_ascii=False, indent=2)
    shown = json_for_terminal(text)
    assert json.loads(shown) == value
    assert for_terminal(shown) == shown  # nothing left for a terminal to act on
    assert 'ü 中文 🙂' in shown
