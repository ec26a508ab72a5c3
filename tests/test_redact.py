"""Any URL shown anywhere has its user info's password and its secret parameters replaced by `***`."""

from __future__ import annotations

import pytest

from pydantic_ai_perplexity._base.errors import ConfigurationError
from pydantic_ai_perplexity._base.redact import (
    ConninfoError,
    has_secret,
    is_conninfo,
    parse_conninfo,
    password_misread,
    redact_target_and_secrets,
    redact_url,
    redact_url_and_secrets,
    redact_urls_in,
)
from pydantic_ai_perplexity._ledger import Ledger


@pytest.mark.parametrize(
    ('url', 'shown'),
    [
        (
            'postgresql://127.0.0.1:1/db?sslmode=require&password=pw%2Fx&sslpassword=k/y',
            'postgresql://127.0.0.1:1/db?sslmode=require&password=***&sslpassword=***',
        ),
        ('postgresql://me:pa%2Fss@127.0.0.1:1/db', 'postgresql://me:***@127.0.0.1:1/db'),
        (
            "host=127.0.0.1 port=1 password='pa ss' options='-c app.secret=s3'",
            'host=127.0.0.1 port=1 password=*** options=***',
        ),
    ],
)
def test_the_ledger_never_shows_a_password(url: str, shown: str) -> None:
    ledger = Ledger(url)
    try:
        assert ledger.describe() == shown
        assert repr(ledger) == f'Ledger({shown!r}, healthy=True)'
    finally:
        ledger.close()


@pytest.mark.parametrize(
    ('url', 'shown'),
    [
        ('postgresql://me:pa/ss@127.0.0.1:1/db', 'postgresql://me:***@127.0.0.1:1/db'),
        ('postgresql://me:a@b/c:d@127.0.0.1:1/db', 'postgresql://me:***@127.0.0.1:1/db'),
    ],
)
def test_a_password_with_an_unencoded_slash_or_at_is_refused_without_showing_it(url: str, shown: str) -> None:
    # libpq ends the password at the first `/` or `@`: the rest would be read as the host, port or database, and
    # shown in the driver's errors. Until this change such a URL was accepted (and shown redacted).
    with pytest.raises(ConfigurationError) as caught:
        Ledger(url)
    message = str(caught.value)
    assert message.startswith(f'the ledger argument names a PostgreSQL ledger ({shown}) whose password holds')
    assert 'pa/ss' not in message and 'a@b' not in message and '%40' in message


#: Keyword/value strings as libpq reads them (checked against psycopg's own reading below).
CONNINFOS = [
    'host=db password=hunter2',
    'host = db   port= 5432 dbname =runs',
    "host=db password='a b' user=bob",
    "password='it\\'s' host=db",
    "password='back\\\\slash' host=db",
    'password=un\\ quoted host=db',
    "password='' host=db",
    "options='-c search_path=x -c app.password=y'",
    '  dbname=runs  ',
]


@pytest.mark.parametrize('conninfo', CONNINFOS)
def test_a_keyword_string_is_read_as_libpq_reads_it(conninfo: str) -> None:
    from psycopg.conninfo import conninfo_to_dict

    assert is_conninfo(conninfo)
    assert dict(parse_conninfo(conninfo)) == {k: str(v) for k, v in conninfo_to_dict(conninfo).items()}


@pytest.mark.parametrize('value', ["host=db password='open", 'host=db password', 'host db'])
def test_an_unreadable_keyword_string_is_hidden_whole(value: str) -> None:
    from psycopg import ProgrammingError
    from psycopg.conninfo import conninfo_to_dict

    with pytest.raises(ProgrammingError):  # libpq cannot read it either
        conninfo_to_dict(value)
    if not is_conninfo(value):  # `host db`: no keyword=value at the start, so it is a path
        assert redact_url(value) == value
        return
    with pytest.raises(ConninfoError):
        parse_conninfo(value)
    shown, secrets = redact_target_and_secrets(value)
    assert shown.startswith('(a PostgreSQL connection string that cannot be read: ') and 'open' not in shown
    assert has_secret(value) and value in secrets


@pytest.mark.parametrize(
    ('value', 'shown', 'secrets'),
    [
        ("host=db password='a b' user=bob", 'host=db password=*** user=bob', {'a b'}),
        ('host=db sslpassword=k1 sslmode=require', 'host=db sslpassword=*** sslmode=require', {'k1'}),
        ("host=db options='-c search_path=x'", "host=db options='-c search_path=x'", set[str]()),
        ("host=db options='-c search_path=x -c app.password=p9'", 'host=db options=***', {'p9'}),
        ('postgresql://u@db/runs?options=-c%20app.token%3Dt7', 'postgresql://u@db/runs?options=***', {'t7'}),
        ('postgresql://u@db/runs?options=-csearch_path%3Dx', 'postgresql://u@db/runs?options=-csearch_path%3Dx', set()),
        ('./ledgers/password=1.sqlite3', './ledgers/password=1.sqlite3', set()),  # a path: no keyword at its start
        ('mydb=1.sqlite3', 'mydb=1.sqlite3', set()),  # not a libpq keyword: a path
    ],
)
def test_passwords_and_secret_settings_of_every_form_are_hidden(value: str, shown: str, secrets: set[str]) -> None:
    redacted, found = redact_target_and_secrets(value)
    assert redacted == shown
    assert secrets <= found and all(s not in redacted for s in found)
    assert has_secret(value) == bool(secrets)


def test_a_password_libpq_would_end_early_is_detected() -> None:
    assert password_misread('postgresql://bob:p@SECRET@host/db')
    assert password_misread('postgres://bob:pa/ss@host/db')
    assert not password_misread('postgresql://bob:p%40S%2Fx@host/db')
    assert not password_misread('postgresql://host/db@name')  # no password: libpq reads db@name as the database
    assert not password_misread('host=db password=a@b/c')


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
