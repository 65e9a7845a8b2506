"""`python -m manifold.deploy.cli`: the same as the `manifold` console script."""

from manifold.deploy.cli import main

raise SystemExit(main())
