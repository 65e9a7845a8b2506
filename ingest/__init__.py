"""Ingestion: stage handlers (one module each), the stage runner, workers and the upstream client."""

ROLES = ("parse", "chunk", "embed", "extract", "load")
"""The worker roles of `manifold workers`, in pipeline order."""
