"""What several `manifold` command groups share: the tenant help text and the `--profile` flag."""

from __future__ import annotations

import argparse

TENANT_HELP = "tenant slug (lower-case letters, digits, '-' and '_')"


def add_profile(command: argparse.ArgumentParser) -> None:
    """`--profile embedded|distributed`: `main` exports it as MANIFOLD_PROFILE before the command runs."""
    command.add_argument("--profile", choices=["embedded", "distributed"],
                         help="overrides MANIFOLD_PROFILE; embedded runs everything in this process")
