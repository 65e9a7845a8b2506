"""Ingestion: stage handlers (one module each), the stage runner, workers and the upstream client."""

from manifold.shared.topics import TOPOLOGY

ROLES = tuple(stage.role for stage in TOPOLOGY)
"""The worker roles `manifold workers` runs by default, in pipeline order (`topics.TOPOLOGY`)."""

EXTRA_ROLES = ("reconcile",)
"""Roles run only when named (`--roles reconcile`): the periodic gc + reconcile pass."""
