"""Probes: small experiments behind a figure in benchmarks/README.md, kept so it can be rerun."""
