"""The exception tree of pydantic-ai-perplexity.

```
PerplexityError
├── ConfigurationError            missing key, unsafe base URL, bad setting
├── BudgetExceededError           a run would push recorded spend past the cap
├── InvalidArgumentError          a research option we can tell is wrong before sending (effort, dates, domains)
├── ResearchTimeoutError          a run is still going when `wait(timeout=...)` ran out (not a network error)
└── APIError                      anything the HTTP exchange went wrong with
    ├── APIConnectionError        could not reach the API (DNS, refused, reset, dropped)
    │   ├── APITimeoutError       the network timed out (connect, read, write or pool)
    │   └── RunMayHaveStartedError   a create was lost in flight: a billed run may exist, it is not re-sent
    ├── MalformedResponseError    the API answered with something that is not the JSON it promised
    └── APIStatusError            a non-2xx answer: `status_code`, `type`, `param`, `request_id`
        ├── BadRequestError           400 (`param` names the offending field)
        ├── AuthenticationError       401
        ├── PermissionDeniedError     403
        ├── NotFoundError             404 (unknown, expired, other account's or `store: false` run)
        ├── RetiredEndpointError      the Sonar chat endpoints, retired on 2026-09-27
        ├── PayloadTooLargeError      413
        ├── ExternalConnectorError    424 (a remote MCP server Perplexity was asked to call)
        ├── RateLimitError            429 after retries
        └── InternalServerError       5xx after retries
```

Failed, incomplete and cancelled research runs are *results* with that status, never exceptions.
No message, repr or chained exception here ever holds the API key: messages are built from the
server's error text, our own words and the request's method and path only.
"""

from __future__ import annotations

from typing import Any

__all__ = (
    'APIConnectionError',
    'APIError',
    'APIStatusError',
    'APITimeoutError',
    'AuthenticationError',
    'BadRequestError',
    'BudgetExceededError',
    'ConfigurationError',
    'ExternalConnectorError',
    'InternalServerError',
    'InvalidArgumentError',
    'MalformedResponseError',
    'NotFoundError',
    'PayloadTooLargeError',
    'PermissionDeniedError',
    'PerplexityError',
    'RateLimitError',
    'ResearchTimeoutError',
    'RetiredEndpointError',
    'RunMayHaveStartedError',
)


def install_hint(extra: str) -> str:
    """How to add `extra`, the way the README says while the package is not on the package index."""
    return f'from a checkout: pip install ".[{extra}]"; once published: pip install "pydantic-ai-perplexity[{extra}]"'


class PerplexityError(Exception):
    """Root of every error this library raises."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message


class ConfigurationError(PerplexityError, ValueError):
    """A setting is missing or unsafe, e.g. no `PERPLEXITY_API_KEY`, or a plain-http base URL to a remote host."""


class BudgetExceededError(PerplexityError):
    """Starting the run would push the recorded spend past the configured budget; nothing was started.

    An application reads the numbers here rather than parsing the message: `spent_usd` (recorded, including what
    runs in flight hold), `held_usd` (the part held by runs not finished yet: it comes back if they cost less),
    `left_usd`, `estimate_usd` (what this run needs) and `fits` (each effort that fits what is left, cheapest first;
    empty: nothing fits, do not retry).
    """

    def __init__(
        self,
        message: str,
        *,
        spent_usd: float,
        cap_usd: float,
        estimate_usd: float,
        held_usd: float = 0.0,
        fits: tuple[tuple[str, float], ...] = (),
    ) -> None:
        super().__init__(message)
        self.spent_usd = spent_usd
        self.cap_usd = cap_usd
        self.estimate_usd = estimate_usd
        self.held_usd = held_usd
        self.fits = fits

    @property
    def left_usd(self) -> float:
        """What is left of the cap (0 when the spend is unknown or at the cap)."""
        left = self.cap_usd - self.spent_usd
        return left if left > 0 else 0.0

    @property
    def cheapest_effort(self) -> str | None:
        """The cheapest effort that fits what is left, or None when nothing fits."""
        return self.fits[0][0] if self.fits else None


class ResearchTimeoutError(PerplexityError):
    """The run is still going when the wait ran out; it goes on server-side and can be collected by id."""

    def __init__(self, message: str, *, response_id: str, last: Any = None) -> None:
        super().__init__(message)
        self.response_id = response_id
        #: The last snapshot of the run seen while waiting (a `Response`), if any.
        self.last = last


class APIError(PerplexityError):
    """The HTTP exchange with the API failed."""

    def __init__(self, message: str, *, method: str | None = None, path: str | None = None) -> None:
        super().__init__(message)
        self.method = method
        self.path = path


class APIConnectionError(APIError):
    """The API could not be reached (DNS failure, connection refused or reset, dropped stream)."""


class APITimeoutError(APIConnectionError):
    """The network timed out. Distinct from `ResearchTimeoutError`, which means the *run* is still going."""


class RunMayHaveStartedError(APIConnectionError):
    """A create request failed after it may have reached the API, so a billed run may exist.

    The request is not re-sent automatically (that could start and bill a second run). Runs started in
    background mode can be found with `retrieve` once their id is known; the ledger records every run
    whose id we received.
    """


class MalformedResponseError(APIError):
    """The API answered 2xx with a body that is not the JSON the contract promises."""

    def __init__(self, message: str, *, method: str | None = None, path: str | None = None, body: str = '') -> None:
        super().__init__(message, method=method, path=path)
        self.body = body[:500]


class APIStatusError(APIError):
    """The API answered with a non-2xx status."""

    status_code: int

    def __init__(
        self,
        message: str,
        *,
        status_code: int,
        error_type: str | None = None,
        param: str | None = None,
        request_id: str | None = None,
        body: Any = None,
        method: str | None = None,
        path: str | None = None,
    ) -> None:
        super().__init__(message, method=method, path=path)
        self.status_code = status_code
        #: The envelope's `error.type`, e.g. `invalid_request` or `request_rate_limit_exceeded`.
        self.type = error_type
        #: The request field the API rejected (400 only).
        self.param = param
        self.request_id = request_id
        self.body = body


class BadRequestError(APIStatusError):
    """400: the request was rejected; `param` names the offending field when the API said which."""


class AuthenticationError(APIStatusError):
    """401: the key was missing or not accepted."""


class PermissionDeniedError(APIStatusError):
    """403: the key is valid but may not do this (blocked key, beta feature, other account's run)."""


class NotFoundError(APIStatusError):
    """No such run: 404 (unknown or expired, another account's, or created with `store: false`), or an id the API
    refused as malformed (a 400 on `GET /v1/agent/{id}`). `reason`, when set, says in a phrase which it was."""

    def __init__(self, message: str, *, reason: str | None = None, **kwargs: Any) -> None:
        super().__init__(message, **kwargs)
        self.reason = reason

    @classmethod
    def because(cls, reason: str, message: str, answer: APIStatusError) -> NotFoundError:
        """A not-found error in our own words (`message`, `reason`) for the API's `answer`, keeping its details."""
        return cls(
            message,
            reason=reason,
            status_code=answer.status_code,
            error_type=answer.type,
            param=answer.param,
            request_id=answer.request_id,
            body=answer.body,
            method=answer.method,
            path=answer.path,
        )


class RetiredEndpointError(APIStatusError):
    """A retired Sonar endpoint answered; the replacement is `POST /v1/agent`."""


class PayloadTooLargeError(APIStatusError):
    """413: the request body is larger than the API accepts (32 MiB)."""


class ExternalConnectorError(APIStatusError):
    """424: a remote MCP server named in the request's `mcp` tools could not be initialized."""

    def __init__(self, message: str, *, server_label: str | None = None, **kwargs: Any) -> None:
        super().__init__(message, **kwargs)
        self.server_label = server_label


class RateLimitError(APIStatusError):
    """429: rate limited, still after the allowed retries."""

    def __init__(self, message: str, *, retry_after: float | None = None, **kwargs: Any) -> None:
        super().__init__(message, **kwargs)
        self.retry_after = retry_after


class InternalServerError(APIStatusError):
    """5xx: the API failed, still after the allowed retries."""


class InvalidArgumentError(PerplexityError, ValueError):
    """A research option has a value we can tell is wrong before sending anything (bad effort, date, domain).

    `argument` names the option; the message says what would be accepted. A model calling a tool can fix
    this itself, so the toolset turns it into a retry prompt rather than a failure.
    """

    def __init__(self, message: str, *, argument: str) -> None:
        super().__init__(message)
        self.argument = argument


for _name in __all__:
    globals()[_name].__module__ = 'pydantic_ai_perplexity'
