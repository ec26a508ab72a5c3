#!/usr/bin/env bash
# The static checks on the whole project: what CI runs (.ci/run) and the README's Development section names.
set -euo pipefail
cd "$(dirname "$0")/.."
uv run --frozen ruff check
uv run --frozen ruff format --check
uv run --frozen pyright
