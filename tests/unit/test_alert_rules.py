"""The alerting rules and the dashboard in deploy/observability/ are valid and use real metrics.

- `promtool check rules` accepts alerts.yml, and `promtool test rules` runs alerts_test.yml, which
  feeds series and expects every alert to fire on a bad series and stay silent on a healthy one.
  promtool comes from Debian's `prometheus` package (.ci/run installs it); under CI=true a missing
  promtool FAILS the test instead of skipping it.
- Every `manifold_*` series named by a rule or a dashboard panel is exported by the code, so a
  renamed metric cannot silently blind a panel or an alert.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from prometheus_client import REGISTRY

import manifold.ingest.publisher  # noqa: F401 - registers manifold_publish_total
import manifold.ingest.reconciler  # noqa: F401 - registers manifold_reconcile_*
import manifold.query.worker  # noqa: F401 - registers manifold_query_*
import manifold.shared.metrics  # noqa: F401 - registers manifold_stage_* and manifold_consumer_lag
from tests.conftest import IN_CI

OBS = Path(__file__).resolve().parents[2] / "deploy" / "observability"
_SERIES = re.compile(r"\bmanifold_[a-z_]+\b")
_SUFFIXES = {"counter": ("_total",), "histogram": ("_bucket", "_sum", "_count"), "gauge": ("",)}


def _promtool() -> str:
    path = shutil.which("promtool")
    if path is None:
        message = "promtool not found (Debian package `prometheus`; .ci/run installs it)"
        if IN_CI:
            pytest.fail(f"CI=true and {message}", pytrace=False)
        pytest.skip(message)
    return path


def _exported_series() -> set[str]:
    names: set[str] = set()
    for family in REGISTRY.collect():
        for suffix in _SUFFIXES.get(family.type, ("",)):
            names.add(family.name + suffix)
    return names


def _rule_expressions() -> list[str]:
    doc = yaml.safe_load((OBS / "alerts.yml").read_text())
    return [rule["expr"] for group in doc["groups"] for rule in group["rules"]]


def _panel_expressions() -> list[str]:
    doc = json.loads((OBS / "grafana-dashboard.json").read_text())
    return [target["expr"] for panel in doc["panels"] for target in panel["targets"]]


def test_promtool_checks_the_rules() -> None:
    proc = subprocess.run([_promtool(), "check", "rules", "alerts.yml"], cwd=OBS, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "SUCCESS: 6 rules found" in proc.stdout


def test_every_alert_fires_in_promtool_tests() -> None:
    proc = subprocess.run([_promtool(), "test", "rules", "alerts_test.yml"], cwd=OBS, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    tested = set(re.findall(r"alertname: (\w+)", (OBS / "alerts_test.yml").read_text()))
    defined = {rule["alert"] for group in yaml.safe_load((OBS / "alerts.yml").read_text())["groups"]
               for rule in group["rules"]}
    assert defined == tested, f"alerts without a promtool test: {sorted(defined - tested)}"


@pytest.mark.parametrize("source", ["alerts", "dashboard"])
def test_rules_and_panels_use_exported_metrics(source: str) -> None:
    exprs = _rule_expressions() if source == "alerts" else _panel_expressions()
    used = {name for expr in exprs for name in _SERIES.findall(expr)}
    assert used, "no manifold series found"
    unknown = used - _exported_series()
    assert not unknown, f"{source} use series the code does not export: {sorted(unknown)}"
