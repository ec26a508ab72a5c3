"""The domain: options, settings, steps, results, timelines, prices and the budget; no I/O above the wire."""
