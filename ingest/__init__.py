"""Ingestion: stage handlers (one module each), the stage runner, workers and the upstream client."""

from manifold.shared.topics import ACCESS, TOPOLOGY

ROLES = tuple(stage.role for stage in TOPOLOGY + ACCESS)
"""The worker roles `manifold workers` runs by default: the pipeline in order (`topics.TOPOLOGY`),
then the ACL applier's two roles (`topics.ACCESS`)."""

EXTRA_ROLES = ("reconcile",)
"""Roles run only when named (`--roles reconcile`): the periodic gc + reconcile pass."""
