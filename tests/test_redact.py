"""Any URL shown anywhere has its user info's password and its secret parameters replaced by `***`."""

from __future__ import annotations

import pytest

from pydantic_ai_perplexity._redact import has_secret, redact_url, redact_url_and_secrets, redact_urls_in
from pydantic_ai_perplexity.ledger import Ledger


@pytest.mark.parametrize(
    ('url', 'shown'),
    [
        ('postgresql://me:pa/ss@127.0.0.1:1/db', 'postgresql://me:***@127.0.0.1:1/db'),
        ('postgresql://me:a@b/c:d@127.0.0.1:1/db', 'postgresql://me:***@127.0.0.1:1/db'),
        (
            'postgresql://127.0.0.1:1/db?sslmode=require&password=pw%2Fx&sslpassword=k/y',
            'postgresql://127.0.0.1:1/db?sslmode=require&password=***&sslpassword=***',
        ),
    ],
)
def test_the_ledger_never_shows_a_password_even_with_an_unencoded_slash(url: str, shown: str) -> None:
    ledger = Ledger(url)
    try:
        assert ledger.describe() == shown
        assert repr(ledger) == f'Ledger({shown!r}, healthy=True)'
    finally:
        ledger.close()


@pytest.mark.parametrize(
    ('url', 'shown'),
    [
        ('https://u:p@ss/w@collector:4318/v1', 'https://u:***@collector:4318/v1'),
        (
            'https://collector/v1?api_key=A1&token=B2&access_token=C3&X-Amz-Signature=D4&client_secret=E5&page=2',
            'https://collector/v1?api_key=***&token=***&access_token=***&X-Amz-Signature=***&client_secret=***&page=2',
        ),
        ('https://collector/v1?key=A1#part', 'https://collector/v1?key=***#part'),
        ('http://127.0.0.1:8787', 'http://127.0.0.1:8787'),
        ('postgresql:///db?host=/run/postgresql&target_session_attrs=any', None),
        ('not a url', None),
    ],
)
def test_userinfo_and_secret_parameters_are_redacted(url: str, shown: str | None) -> None:
    assert redact_url(url) == (shown or url)
    assert has_secret(url) == (shown is not None and shown != url)


def test_urls_inside_text_are_redacted() -> None:
    text = 'cannot reach https://me:hunter2@otel.example/v1 (or postgresql://u:x/y@db/runs?password=zz).'
    assert (
        redact_urls_in(text)
        == 'cannot reach https://me:***@otel.example/v1 (or postgresql://u:***@db/runs?password=***).'
    )


@pytest.mark.parametrize(
    ('url', 'stored', 'secrets'),
    [
        ('https://ghp_TOKEN123@mcp.example/mcp', 'https://***@mcp.example/mcp', {'ghp_TOKEN123'}),
        ('https://alice:pw-1/x@mcp.example/mcp', 'https://***@mcp.example/mcp', {'pw-1/x'}),
        (
            'https://mcp.zapier.com/api/mcp/s/ZjQ2ZTk4NTgtYmMxNS00YjQ1/mcp',
            'https://mcp.zapier.com/api/mcp/s/***/mcp',
            {'ZjQ2ZTk4NTgtYmMxNS00YjQ1'},
        ),
        ('https://mcp.example/api-key/k3y/mcp?x=1', 'https://mcp.example/api-key/***/mcp?x=1', {'k3y'}),
        (
            'https://api.telegram.org/bot123456:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw/getMe',
            'https://api.telegram.org/***/getMe',
            {'bot123456:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw'},
        ),
        ('https://mcp.example/v1/mcp?sig=abc', 'https://mcp.example/v1/mcp?sig=***', {'abc'}),
        ('https://medium.com/@someone/a-post', 'https://medium.com/@someone/a-post', set()),  # an `@` in the path
        ('https://docs.example/mcp', 'https://docs.example/mcp', set()),
    ],
)
def test_stored_urls_lose_every_credential_form(url: str, stored: str, secrets: set[str]) -> None:
    """What a recording keeps of a remote MCP server's URL: no user info, secret parameter or path token."""
    assert redact_url_and_secrets(url, whole_userinfo=True, path_tokens=True) == (stored, frozenset(secrets))
