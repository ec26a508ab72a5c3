"""Shared leaves every layer may use: errors, redaction, safe writes, the version, URL checks, live prices, slots."""
