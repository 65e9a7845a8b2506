#!/usr/bin/env bash
# Measures what the README quotes about install size and start times, on this machine:
#   1. a locked venv install with an EMPTY pip cache (first install: downloads everything),
#   2. the Maven downloads of Kafka, Elasticsearch and Neo4j into an EMPTY local repository,
#   3. `manifold stack up` on an empty stack directory (first start: format, initdb, ...),
#   4. `manifold stack up` again after `down` (warm start).
# Writes bench/results/stack_install.json. Uses its own ports-compatible stack dir under /tmp, so
# stop any other running stack first. Takes about 5-10 minutes.
set -euo pipefail
cd "$(dirname "$0")/.."
work=$(mktemp -d /tmp/manifold-bench.XXXXXX)
trap 'rm -rf "$work"' EXIT
now() { date +%s.%N; }

t0=$(now)
python3 -m venv "$work/venv"
PIP_NO_CACHE_DIR=1 "$work/venv/bin/python" -m pip install -q --no-deps -r deploy/python/requirements.lock
"$work/venv/bin/python" -m pip install -q --no-deps --no-build-isolation ./deploy/python/en_core_web_sm
"$work/venv/bin/python" -m pip install -q --no-deps --no-build-isolation .
t1=$(now)
venv_bytes=$(du -sb "$work/venv" | cut -f1)
site="$work/venv/lib/python3.11/site-packages"
torch_bytes=$(du -sbc "$site/torch" "$site/nvidia" | tail -1 | cut -f1)

export MANIFOLD_STACK__DIR="$work/stack"
export MAVEN_OPTS="-Dmaven.repo.local=$work/m2"
t2=$(now)
"$work/venv/bin/manifold" stack up
t3=$(now)
"$work/venv/bin/manifold" stack down
t4=$(now)
"$work/venv/bin/manifold" stack up
t5=$(now)
"$work/venv/bin/manifold" stack down
cache_bytes=$(du -sb "$work/stack/cache" | cut -f1)

python3 - "$@" <<PY
import json, platform, os
r = {
  "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
  "venv_install_seconds_empty_pip_cache": round($t1 - $t0, 1),
  "venv_bytes": $venv_bytes,
  "torch_and_cuda_runtime_bytes": $torch_bytes,
  "stack_first_up_seconds_empty_maven_repo": round($t3 - $t2, 1),
  "stack_warm_up_seconds": round($t5 - $t4, 1),
  "stack_artifact_cache_bytes": $cache_bytes,
}
open("bench/results/stack_install.json", "w").write(json.dumps(r, indent=2) + "\n")
print(json.dumps(r, indent=2))
PY
