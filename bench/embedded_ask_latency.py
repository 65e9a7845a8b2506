"""Wall time of `manifold ask --profile embedded` as a user runs it: one command per question.

On a data directory the quickstart already filled (`MANIFOLD_EMBEDDED__DIR`, default .manifold),
in one run:

1. the reference, the in-process cold path: `manifold ask --in-process` (imports PyTorch, starts
   PostgreSQL when nothing answers on its port, loads the model, trains the router from its cached
   vectors, answers, stops PostgreSQL again), `--reference-runs` times;
2. the embedded query server: the directory's server is stopped first (`manifold embedded stop`),
   then `--n` + 1 `manifold ask` commands: the first starts the server (its time includes the
   start), the next `--n` reuse it.

Every command is a subprocess timed by wall clock around it (interpreter start and exit
included). Each reply (`--json`) is compared with the in-process reference's after dropping the
fields that differ by construction (`request_id`, elapsed times, `retrieved_at`): `same_reply` must be true. The
server is stopped again at the end (unless `--keep`).

Writes bench/results/embedded_ask_latency.json: the reference's times, the first and repeated
times, their medians, the server's own answer times from its log, the machine and its load average.

Usage: MANIFOLD_EMBEDDED__DIR=/tmp/emb .venv/bin/manifold quickstart --quiet   # once
       MANIFOLD_EMBEDDED__DIR=/tmp/emb .venv/bin/python bench/embedded_ask_latency.py [--n 5]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from metrics_eval import commit, machine, rounded  # noqa: E402 - after bench/ joins sys.path

REPO = Path(__file__).resolve().parents[1]
_SCRIPT = Path(sys.executable).parent / "manifold"
MANIFOLD = [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-m", "manifold.deploy.cli"]
"""The `manifold` command of this interpreter's environment, as a user runs it."""
QUESTION = "Which suppliers supply PRD-482?"
TENANT = "northstar"
VOLATILE = {"request_id", "elapsed_ms", "store_ms", "retrieved_at"}


def _run(argv: list[str], env: dict[str, str]) -> tuple[float, subprocess.CompletedProcess[str]]:
    t0 = time.perf_counter()
    proc = subprocess.run(MANIFOLD + argv, env=env, capture_output=True, text=True, cwd=REPO, timeout=900)
    return time.perf_counter() - t0, proc


def _stable(value: Any) -> Any:
    """The reply without what differs between two asks of the same question by construction."""
    if isinstance(value, dict):
        return {k: _stable(v) for k, v in value.items() if k not in VOLATILE}
    if isinstance(value, list):
        return [_stable(v) for v in value]
    return value


def _ask(env: dict[str, str], *extra: str) -> tuple[float, dict[str, Any], str]:
    took, proc = _run(["ask", QUESTION, "--tenant", TENANT, "--profile", "embedded", "--json", *extra], env)
    if proc.returncode != 0:
        raise SystemExit(f"manifold ask failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return took, json.loads(proc.stdout), proc.stderr


def _server_answer_ms(log: Path, since: int) -> list[float]:
    """The server's own answer times (its log lines written after byte `since`)."""
    try:
        text = log.read_bytes()[since:].decode(errors="replace")
    except OSError:
        return []
    return [float(m) for m in re.findall(r"answered for \S+: \S+ in (\d+) ms", text)]


def _loadavg() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=5, help="repeated asks after the first (default 5)")
    parser.add_argument("--reference-runs", type=int, default=2, help="in-process cold asks (default 2)")
    parser.add_argument("--keep", action="store_true", help="leave the embedded query server running")
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "results" / "embedded_ask_latency.json")
    args = parser.parse_args()

    env = {**os.environ, "MANIFOLD_PROFILE": "embedded"}
    data_dir = Path(env.get("MANIFOLD_EMBEDDED__DIR", ".manifold"))
    data_dir = data_dir if data_dir.is_absolute() else REPO / data_dir
    env["MANIFOLD_EMBEDDED__DIR"] = str(data_dir)
    if not (data_dir / "data" / "postgres").is_dir():
        raise SystemExit(f"{data_dir} holds no embedded PostgreSQL: run `manifold quickstart` with "
                         f"MANIFOLD_EMBEDDED__DIR={data_dir} first")
    load_before = _loadavg()
    _run(["embedded", "stop"], env)  # a cold start, and the reference without a server beside it

    reference: list[float] = []
    expected: Any = None
    for _ in range(args.reference_runs):
        took, reply, _ = _ask(env, "--in-process")
        reference.append(took)
        expected = _stable(reply)
        print(f"in-process cold: {took:.2f} s", flush=True)

    log = data_dir / "logs" / "ask-server.log"
    since = log.stat().st_size if log.exists() else 0
    times: list[float] = []
    same = True
    restarts = 0
    for i in range(args.n + 1):
        took, reply, err = _ask(env)
        times.append(took)
        same = same and _stable(reply) == expected
        restarts += i > 0 and "starting the embedded query server" in err
        print(f"{'first' if i == 0 else 'repeat'}: {took:.2f} s{'' if same else '  (reply differs!)'}", flush=True)
    served_ms = _server_answer_ms(log, since)
    if not args.keep:
        _run(["embedded", "stop"], env)

    repeated = times[1:]
    result = {
        "measured_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "commit": commit(REPO),
        "machine": machine(),
        "load_average_before": load_before,
        "load_average_after": _loadavg(),
        "question": QUESTION,
        "tenant": TENANT,
        "in_process_cold_s": reference,
        "in_process_cold_median_s": statistics.median(reference) if reference else None,
        "server_first_s": times[0],
        "server_repeated_s": repeated,
        "server_repeated_median_s": statistics.median(repeated) if repeated else None,
        "server_repeated_max_s": max(repeated) if repeated else None,
        "server_answer_ms": served_ms,
        "restarts_during_repeats": restarts,
        "same_reply": same,
        "target_repeated_s": 2.0,
        "target_met": bool(repeated) and max(repeated) <= 2.0,
        "notes": "wall time of one `manifold ask` subprocess each (interpreter start and exit included); "
                 "same_reply compares every repeated reply with the in-process reference without "
                 "request_id, elapsed times and retrieved_at",
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(rounded(result, 3), indent=2) + "\n")
    print(json.dumps(rounded({k: result[k] for k in ("in_process_cold_median_s", "server_first_s",
                                                      "server_repeated_median_s", "same_reply")}, 3)))
    print(f"wrote {args.out}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
