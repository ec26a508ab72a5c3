"""The research core: the Researcher, reconciliation, the tool spec, batches and tracing."""
