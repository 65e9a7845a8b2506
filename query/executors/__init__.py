"""Executors: one per plan operator, each with typed input (`manifold.query.plan`) and a `StepResult`."""
