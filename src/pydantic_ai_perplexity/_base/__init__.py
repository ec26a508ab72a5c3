"""Shared leaves every layer may use: the error types, redaction and safe file writes."""
