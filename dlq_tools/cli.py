"""The `dlq` command: operator tools for the dead-letter topic.

The dead-letter record model and the list/show/replay/purge/stats commands arrive with the
publication issue; until then this entry point only documents itself.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence


def build_parser() -> argparse.ArgumentParser:
    return argparse.ArgumentParser(
        prog="dlq",
        description="Inspect and replay manifold's dead-letter topic (manifold.dlq). "
        "No subcommands are available yet in this version.",
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    parser.parse_args(argv)
    parser.print_help()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
