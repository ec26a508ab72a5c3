#!/usr/bin/env bash
# Build the Claude Desktop bundle (MCPB) dist/pydantic-ai-perplexity-<version>.mcpb: manifest.json, the package's
# source, pyproject.toml and uv.lock (the "uv" server type: uv installs the locked dependencies on first start, so
# the bundle works before and after the package is on PyPI). Validates the manifest, then packs it with the pinned
# @anthropic-ai/mcpb. Everything it writes, npm's cache included, stays under build/ and dist/ in the checkout.
set -euo pipefail
cd "$(dirname "$0")/.."
MCPB="@anthropic-ai/mcpb@2.1.2"
version=$(python3 -c 'import tomllib; print(tomllib.load(open("pyproject.toml", "rb"))["project"]["version"])')
stage=build/mcpb
out="dist/pydantic-ai-perplexity-${version}.mcpb"
export npm_config_cache="$PWD/build/npm-cache" npm_config_update_notifier=false npm_config_fund=false
rm -rf "$stage" && mkdir -p "$stage" dist
cp manifest.json pyproject.toml uv.lock README.md LICENSE "$stage/"
mkdir -p "$stage/src" && cp -R src/pydantic_ai_perplexity "$stage/src/"
find "$stage" -name '__pycache__' -type d -prune -exec rm -rf {} +
npx --yes "$MCPB" validate "$stage/manifest.json"
npx --yes "$MCPB" pack "$stage" "$out"
echo "$out"
