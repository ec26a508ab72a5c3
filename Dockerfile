# The Perplexity MCP server over Streamable HTTP, for a team deployment (see compose.yaml and the README's
# "Deploying for a team"). Dependencies come from uv.lock; the image runs as an unprivileged user.
FROM python:3.12-slim AS build
# The uv that wrote uv.lock (its format revision needs a uv at least this new).
COPY --from=ghcr.io/astral-sh/uv:0.13.9 /uv /bin/uv
ENV UV_COMPILE_BYTECODE=1 UV_LINK_MODE=copy UV_PYTHON_DOWNLOADS=never
WORKDIR /app
COPY pyproject.toml uv.lock ./
RUN uv sync --frozen --no-dev --no-install-project --extra mcp --extra postgres
COPY README.md ./
COPY src ./src
RUN uv sync --frozen --no-dev --no-editable --extra mcp --extra postgres

FROM python:3.12-slim
RUN useradd --system --uid 10001 --no-create-home --home-dir /nonexistent research
COPY --from=build /app/.venv /app/.venv
ENV PATH=/app/.venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PERPLEXITY_STATE_DIR=/tmp/pydantic-ai-perplexity
USER research
EXPOSE 8000
# /healthz: 200 while the ledger answers, 503 when it does not or while the server shuts down.
HEALTHCHECK --interval=10s --timeout=5s --start-period=30s --retries=3 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/healthz', timeout=4)"]
# SIGTERM hands off the calls in flight (each answers with its response_id) and exits within 10 s.
STOPSIGNAL SIGTERM
CMD ["python", "-m", "pydantic_ai_perplexity.mcp", "--transport", "http", "--host", "0.0.0.0", "--port", "8000"]
