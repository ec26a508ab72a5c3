"""Text made safe to print on an operator's terminal: no control characters, escape sequences or invisible text.

Questions come from callers (an MCP token holder, a notebook) and answers, titles and URLs from the web; printed raw,
`ESC ] 0 ; TITLE BEL` sets the terminal's title, OSC 8 makes a link that reads as one URL and opens another, CSI
sequences move the cursor or clear the screen, and zero-width or bidi characters make text read other than it is.
`for_terminal` removes whole escape sequences (CSI, OSC, DCS, SOS, PM, APC, in their 7- and 8-bit forms), then every
character of the classes `render.sanitize` strips for models too (controls, format characters such as zero-width and
bidi marks, private use, surrogates, line/paragraph separators), keeping newlines and tabs where text is multi-line.
`json_for_terminal` escapes the same characters inside JSON, so the printed JSON still means the same values.
"""

from __future__ import annotations

import re
import textwrap
import unicodedata

__all__ = ('STRIPPED_CATEGORIES', 'for_terminal', 'json_for_terminal', 'line_for_terminal', 'wrap_for_terminal')

#: Unicode categories stripped from untrusted text, for models (`render.sanitize`) and terminals alike: controls,
#: format characters (zero-width, bidi marks, tags), private use, surrogates, line and paragraph separators.
STRIPPED_CATEGORIES = frozenset({'Cc', 'Cf', 'Co', 'Cs', 'Zl', 'Zp'})

#: A complete escape sequence: CSI (ESC [ or 0x9B, parameters, intermediates, a final byte); OSC, DCS, SOS, PM or APC
#: (ESC ] P X ^ _ or their 8-bit forms, a payload, then BEL or ST); or any other ESC sequence (ESC, intermediates, a
#: final byte). An unterminated string loses only its introducer (below), so no text after it is swallowed.
_ESCAPE_SEQUENCE = re.compile(
    r'(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]'
    r'|(?:\x1b[\]PX^_]|[\x9d\x90\x98\x9e\x9f])[^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)'
    r'|\x1b[ -/]*[0-~]'
)
_MULTILINE_KEEP = frozenset('\n\t')


def _visible(ch: str, keep: frozenset[str]) -> bool:
    return ch in keep or unicodedata.category(ch) not in STRIPPED_CATEGORIES


def for_terminal(text: str, *, multiline: bool = True) -> str:
    """`text` without escape sequences, control, format (zero-width, bidi) or other invisible characters.

    Newlines and tabs are kept when `multiline` (an answer); otherwise they go too (see `line_for_terminal`).
    """
    keep = _MULTILINE_KEEP if multiline else frozenset[str]()
    text = _ESCAPE_SEQUENCE.sub('', text)
    return ''.join(ch for ch in text if _visible(ch, keep))


def line_for_terminal(text: str) -> str:
    """A value shown on one line (a title, a question in a list): made safe, whitespace runs collapsed to a space."""
    return ' '.join(for_terminal(text.replace('\t', ' ').replace('\n', ' ')).split())


def json_for_terminal(text: str) -> str:
    """JSON text with every character `for_terminal` would strip written as a `\\uXXXX` escape (same values)."""

    def escape(ch: str) -> str:
        code = ord(ch)
        if code > 0xFFFF:
            code -= 0x10000
            return f'\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}'
        return f'\\u{code:04x}'

    return ''.join(ch if _visible(ch, _MULTILINE_KEEP) else escape(ch) for ch in text)


#: A line's lead that its wrapped continuation lines align under: indentation, a quote mark, a list bullet.
_LEAD = re.compile(r'^(\s*(?:>\s*)*(?:[-*+]\s+|\d+[.)]\s+)?)')


def wrap_for_terminal(text: str, width: int, *, keep_indented: bool = False) -> str:
    """`text` wrapped at spaces to `width` columns, so the terminal never splits a word.

    A word longer than the width (a URL, a run id) stays whole on a line of its own, to be copied; a list item's or a
    quote's continuation lines align under its text; code blocks and table rows are left as they are, and so are
    indented lines with `keep_indented` (in a notice, they are commands to copy whole).
    """
    out: list[str] = []
    fenced = False
    for line in text.split('\n'):
        if line.lstrip().startswith(('```', '~~~')):
            fenced = not fenced
        kept = fenced or line.lstrip().startswith(('```', '~~~', '|')) or (keep_indented and line[:1].isspace())
        if kept or len(line) <= width:
            out.append(line)
            continue
        lead = _LEAD.match(line)
        first = lead.group(1) if lead else ''
        rest = re.sub(r'[^>\s]', ' ', first)  # `- ` continues as `  `, `> ` as `> `
        out.extend(
            textwrap.wrap(
                line[len(first) :],
                width=max(width, len(first) + 1),
                initial_indent=first,
                subsequent_indent=rest,
                break_long_words=False,
                break_on_hyphens=False,
            )
            or [line]
        )
    return '\n'.join(out)
