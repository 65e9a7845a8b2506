"""Ingestion: stage handlers (one module each), the stage runner, workers and the upstream client."""

ROLES = ("parse", "chunk", "embed", "extract", "load", "publish")
"""The worker roles `manifold workers` runs by default, in pipeline order."""

EXTRA_ROLES = ("reconcile",)
"""Roles run only when named (`--roles reconcile`): the periodic gc + reconcile pass."""
