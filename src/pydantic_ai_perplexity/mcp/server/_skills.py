"""The MCP Skills extension (SEP-2640, `io.modelcontextprotocol/skills`): `skills/list` and `skills/get` for the one
skill this server publishes, `SKILL.md`, also served as the resource `skill://perplexity-research/SKILL.md`.

An entry carries the file's `SKILL.md` frontmatter verbatim and its size and SHA-256 digest, so that a host can check
the resource it reads is the one listed (the TypeScript SDK's `SkillsClient` does).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.extension import Extension, MethodBinding
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS, PaginatedRequestParams, RequestParams

__all__ = ('SKILL_URI', 'SkillsExtension', 'skill_text')

SKILL_URI = 'skill://perplexity-research/SKILL.md'
SKILL_FILE = Path(__file__).with_name('SKILL.md')
#: How long a host may cache the listing: the skill changes only with a new release of the package.
_TTL_MS = 3_600_000


def skill_text() -> str:
    """`SKILL.md`, exactly as the resource serves it (the bytes the digest covers are its UTF-8)."""
    return SKILL_FILE.read_bytes().decode('utf-8')


def frontmatter(text: str) -> dict[str, str]:
    """The `key: value` lines between the leading `---` lines (all `SKILL.md` holds there: name, description)."""
    lines = text.splitlines()
    if not lines or lines[0].strip() != '---':
        return {}
    fields: dict[str, str] = {}
    for line in lines[1:]:
        if line.strip() == '---':
            break
        key, sep, value = line.partition(':')
        if sep and key.strip():
            fields[key.strip()] = value.strip()
    return fields


def skill_entry() -> dict[str, Any]:
    """The skill as `skills/list` and `skills/get` carry it: uri, frontmatter, and its one file's size and digest."""
    text = skill_text()
    data = text.encode('utf-8')
    digest = 'sha256:' + hashlib.sha256(data).hexdigest()
    return {
        'uri': SKILL_URI,
        'frontmatter': frontmatter(text),
        'resources': [{'uri': SKILL_URI, 'digest': digest, 'size': len(data)}],
    }


class GetSkillParams(RequestParams):
    """The params of `skills/get`: the skill's `SKILL.md` URI."""

    uri: str


class SkillsExtension(Extension):
    """`skills/list` and `skills/get`, declared under `capabilities.extensions` as the SEP says."""

    identifier = 'io.modelcontextprotocol/skills'

    def methods(self) -> Sequence[MethodBinding]:
        return (
            MethodBinding('skills/list', PaginatedRequestParams, self._list),
            MethodBinding('skills/get', GetSkillParams, self._get),
        )

    async def middleware(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        """Declares the extension in the `initialize` answer of every era (the SDK does so only from 2026-07-28)."""
        result = await call_next(ctx)
        if ctx.method == 'initialize' and isinstance(result, dict):
            capabilities: dict[str, Any] = dict(result.get('capabilities') or {})
            extensions: dict[str, Any] = dict(capabilities.get('extensions') or {})
            extensions.setdefault(self.identifier, {})
            result = {**result, 'capabilities': {**capabilities, 'extensions': extensions}}
        return result

    async def _list(self, ctx: ServerRequestContext[Any, Any], params: Any) -> HandlerResult:
        return {'skills': [skill_entry()], 'ttlMs': _TTL_MS, 'cacheScope': 'public'}

    async def _get(self, ctx: ServerRequestContext[Any, Any], params: Any) -> HandlerResult:
        uri = str(getattr(params, 'uri', ''))
        if uri != SKILL_URI:
            raise MCPError(code=INVALID_PARAMS, message=f'No skill at {uri[:200]!r}: this server has {SKILL_URI}.')
        return {'skill': skill_entry(), 'ttlMs': _TTL_MS, 'cacheScope': 'public'}
