"""The client side of MCP: configs and toolsets that reach this server from pydantic-ai, pydantic-deep and apps."""
