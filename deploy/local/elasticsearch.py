"""Elasticsearch for the local stack: the jdk-less integ-test-zip from Maven Central.

Guarantees:
- `install()` fetches `org.elasticsearch.distribution.integ-test-zip:elasticsearch:zip:VERSION`
  once into `cache/elasticsearch/dist` and unpacks it once (file modes restored from the zip)
  into `cache/elasticsearch/elasticsearch-VERSION`; a marker written last makes a second call a
  no-op with no network work, and an interrupted unpack is redone from scratch.
- `prepare()` copies the distribution's config dir to `data/elasticsearch/config` only when it is
  missing, then (re)writes `elasticsearch.yml` and `jvm.options.d/manifold.options` from this
  object's settings; data, logs and tmp stay under `data/elasticsearch`. Nothing is written
  inside the cached distribution.
- The node is a single-node cluster bound to a loopback host only, with security off, disk
  watermarks off and a fixed heap (-Xms = -Xmx = heap_mb). The distribution ships no JDK;
  `java_home` runs it via ES_JAVA_HOME (Java 17 works for 8.19).
- `launch()` is the foreground `bin/elasticsearch` (no -d, no pidfile).
- Elasticsearch refuses to run as root: when this process is root, `prepare()` ensures a system
  user exists (see `accounts`), hands it `data/elasticsearch` and the right to traverse
  to the distribution, and `launch()` names it as `Launch.user`.
- `healthy()` / `version()` never raise.
"""

from __future__ import annotations

import json
import shutil
import urllib.request
import zipfile
from pathlib import Path
from typing import Any

from manifold.shared.loopback import is_loopback

from . import accounts, maven
from .service import Launch, StackPaths

VERSION = "8.19.21"
_COORD = f"org.elasticsearch.distribution.integ-test-zip:elasticsearch:zip:{VERSION}"


def _write_if_changed(path: Path, text: str) -> None:
    if not path.exists() or path.read_text() != text:
        path.write_text(text)


class Elasticsearch:
    """One single-node Elasticsearch on loopback (HTTP `port`, transport `port + 100`)."""

    name = "elasticsearch"

    def __init__(
        self,
        paths: StackPaths,
        host: str = "127.0.0.1",
        port: int = 19200,
        heap_mb: int = 768,
        java_home: str = "/usr/lib/jvm/java-17-openjdk-amd64",
    ) -> None:
        if not is_loopback(host):
            raise ValueError(f"elasticsearch must bind a loopback host, not {host!r}")
        self.paths = paths
        self.host = host
        self.port = port
        self.heap_mb = heap_mb
        self.java_home = java_home

    @property
    def home(self) -> Path:
        return self.paths.cache / "elasticsearch" / f"elasticsearch-{VERSION}"

    @property
    def conf_dir(self) -> Path:
        return self.paths.data(self.name) / "config"

    def install(self) -> None:
        marker = self.home / ".manifold-unpacked"
        if marker.exists():
            return
        root = self.paths.cache / "elasticsearch"
        dist = maven.fetch([_COORD], root / "dist", transitive=False)
        archive = dist / f"elasticsearch-{VERSION}.zip"
        staging = root / ".unpack"
        shutil.rmtree(staging, ignore_errors=True)
        shutil.rmtree(self.home, ignore_errors=True)
        with zipfile.ZipFile(archive) as zf:
            zf.extractall(staging)
            for info in zf.infolist():  # zipfile drops unix modes: restore bin/* exec bits etc.
                mode = (info.external_attr >> 16) & 0o777
                if mode:
                    (staging / info.filename).chmod(mode)
        (staging / f"elasticsearch-{VERSION}").rename(self.home)
        shutil.rmtree(staging)
        marker.write_text(_COORD + "\n")

    def prepare(self) -> None:
        if not (self.home / "config").is_dir():
            raise RuntimeError(f"elasticsearch is not installed at {self.home}; call install() first")
        data = self.paths.data(self.name)
        conf = self.conf_dir
        if not conf.exists():
            staging = data / ".config-staging"
            shutil.rmtree(staging, ignore_errors=True)
            data.mkdir(parents=True, exist_ok=True)
            shutil.copytree(self.home / "config", staging)
            staging.rename(conf)
        for sub in ("data", "logs", "tmp"):
            (data / sub).mkdir(parents=True, exist_ok=True)
        settings: dict[str, Any] = {
            "cluster.name": "manifold",
            "node.name": "manifold-es",
            "discovery.type": "single-node",
            "network.host": self.host,
            "http.port": self.port,
            "transport.port": self.port + 100,
            "path.data": str(data / "data"),
            "path.logs": str(data / "logs"),
            "xpack.security.enabled": False,  # the zip ships x-pack-security; also skips auto-TLS
            "cluster.routing.allocation.disk.threshold_enabled": False,
        }
        yml = "".join(f"{k}: {json.dumps(v)}\n" for k, v in settings.items())
        _write_if_changed(conf / "elasticsearch.yml", "# written by manifold.deploy.local.elasticsearch\n" + yml)
        (conf / "jvm.options.d").mkdir(exist_ok=True)
        # The server JVM runs with logs/ as its working directory, so the distribution's relative
        # gc.log, hs_err and heap-dump paths already land under path.logs; only the heap is ours.
        jvm = [f"-Xms{self.heap_mb}m", f"-Xmx{self.heap_mb}m"]
        _write_if_changed(conf / "jvm.options.d" / "manifold.options", "\n".join(jvm) + "\n")
        user = accounts.service_user()
        if user is not None:
            accounts.allow_traverse(self.home)
            accounts.hand_over(data, user)

    def launch(self) -> Launch:
        data = self.paths.data(self.name)
        return Launch(
            argv=[str(self.home / "bin" / "elasticsearch")],
            cwd=data,
            env={
                "ES_JAVA_HOME": self.java_home,
                "ES_PATH_CONF": str(self.conf_dir),
                "ES_TMPDIR": str(data / "tmp"),
            },
            user=accounts.service_user(),
        )

    def _get(self, path: str) -> Any:
        try:
            with urllib.request.urlopen(f"{self.address()}{path}", timeout=2) as resp:
                return json.loads(resp.read())
        except Exception:
            return None

    def healthy(self) -> bool:
        body = self._get("/_cluster/health")
        return isinstance(body, dict) and body.get("status") in ("green", "yellow")

    def version(self) -> str:
        # The integ-test-zip lacks the rest-root module, so `GET /` is 405; ask the node instead.
        body = self._get("/_nodes/_local?filter_path=nodes.*.version")
        try:
            return str(next(iter(body["nodes"].values()))["version"])
        except Exception:
            return "unknown"

    def address(self) -> str:
        return f"http://{self.host}:{self.port}"
