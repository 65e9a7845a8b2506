"""Typed failures, routed in one place (the stage runner) to retry, dead-letter or stop.

- `BadInput`: the message itself is wrong (malformed, unsupported, corrupt). Retrying cannot
  help; it goes to the DLQ at once with the reason.
- `Transient`: a dependency failed (store down, timeout). Retried with bounded backoff; when the
  retries are exhausted the message goes to the DLQ, marked as exhausted.
Any other exception is a bug in a handler; it is treated as poison: dead-lettered with its
traceback, never retried in a loop.
"""

from __future__ import annotations

from typing import ClassVar, Literal


class ManifoldError(Exception):
    """Base class of manifold's own failures."""


class BadInput(ManifoldError):
    """The input cannot be processed as it is; send it to the DLQ with this reason, under the
    DLQ error kind `error_kind` (`unauthorized` for `envelope_auth.Unauthorized`)."""

    error_kind: ClassVar[Literal["bad_input", "unauthorized"]] = "bad_input"


class BadEvent(BadInput):
    """An envelope from the bus failed validation."""


class UnsupportedMediaType(BadInput):
    """No parser handles this media type."""


class Transient(ManifoldError):
    """A retryable fault in a dependency."""
