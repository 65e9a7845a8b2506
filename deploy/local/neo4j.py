"""Neo4j Community 5.26 LTS as a local stack service, assembled from Maven Central jars.

Guarantees:
- `install()` fetches `org.neo4j.assembly:neo4j-community-standalone` (the distribution's own
  dependency list: neo4j-server, bootcheck, driver and their runtime closure) into
  `cache/neo4j/lib` once; later calls do no network work.
- `prepare()` is idempotent. It lays out a NEO4J_HOME under `data/neo4j` (conf, data, logs,
  plugins, import, run, ...), (re)writes `conf/neo4j.conf` only when its content changes and then
  checks it with Neo4j's `server validate-config` (a rejected file is removed and an error raised,
  because a server started on a bad config never exits), and sets the initial password of user
  `neo4j` exactly once, before the first start, with Neo4j's own `AdminTool dbms
  set-initial-password` (no shell scripts). Changing `password` later does not touch a database
  that already exists.
- `launch()` runs `org.neo4j.server.CommunityEntryPoint` in the foreground, without the
  bootloader, with the JVM flags the bootloader would take from the stock `neo4j.conf`.
  Bolt and HTTP listen on `host` only; HTTPS and routing are off; auth is on.
- `healthy()` and `version()` use the stdlib only and never raise.
"""

from __future__ import annotations

import json
import os
import subprocess
import urllib.request
from pathlib import Path

from . import maven
from .service import Launch, StackPaths, port_open

VERSION = "5.26.30"
ENTRY_POINT = "org.neo4j.server.CommunityEntryPoint"
ADMIN_TOOL = "org.neo4j.cli.AdminTool"
ADMIN_BOOT = "org.neo4j.server.startup.Neo4jAdminBoot"  # hosts `server validate-config`
COORDS = [f"org.neo4j.assembly:neo4j-community-standalone:pom:{VERSION}"]

# What the stock neo4j.conf hands the bootloader (server.jvm.additional), minus profiling-only
# and -XX:+AlwaysPreTouch (it would make the whole heap resident at start), plus ExitOnOOM.
JVM_FLAGS = [
    "-XX:+UseG1GC",
    "-XX:-OmitStackTraceInFastThrow",
    "-XX:+DisableExplicitGC",
    "-XX:+ExitOnOutOfMemoryError",
    "-Djdk.nio.maxCachedBufferSize=1024",
    "-Dio.netty.tryReflectionSetAccessible=true",
    "-Djdk.tls.ephemeralDHKeySize=2048",
    "-Djdk.tls.rejectClientInitiatedRenegotiation=true",
    "--add-opens=java.base/java.nio=ALL-UNNAMED",
    "--add-opens=java.base/java.io=ALL-UNNAMED",
    "--add-opens=java.base/sun.nio.ch=ALL-UNNAMED",
    "--enable-native-access=ALL-UNNAMED",
    "-Dlog4j2.disable.jmx=true",
    "-Dlog4j.layout.jsonTemplate.maxStringLength=32768",
    "-Dfile.encoding=UTF-8",
]

_LAYOUT = ("conf", "data", "logs", "plugins", "import", "run", "licenses", "certificates")


class Neo4j:
    """A single Neo4j Community server on loopback (Bolt + HTTP)."""

    name = "neo4j"

    def __init__(
        self,
        paths: StackPaths,
        host: str = "127.0.0.1",
        bolt_port: int = 17687,
        http_port: int = 17474,
        heap_mb: int = 768,
        pagecache_mb: int = 256,
        java_home: str = "/usr/lib/jvm/java-17-openjdk-amd64",
        password: str = "manifold-local",
    ) -> None:
        self.paths = paths
        self.host = host
        self.bolt_port = bolt_port
        self.http_port = http_port
        self.heap_mb = heap_mb
        self.pagecache_mb = pagecache_mb
        self.java_home = java_home
        self.password = password

    @property
    def lib(self) -> Path:
        return self.paths.cache / "neo4j" / "lib"

    @property
    def home(self) -> Path:
        return self.paths.data(self.name)

    @property
    def conf_dir(self) -> Path:
        return self.home / "conf"

    def _java(self) -> str:
        return str(Path(self.java_home) / "bin" / "java")

    def _classpath(self) -> str:
        return os.pathsep.join([str(self.lib / "*"), str(self.home / "plugins" / "*")])

    def _env(self) -> dict[str, str]:
        return {
            "JAVA_HOME": self.java_home,
            "NEO4J_HOME": str(self.home),
            "NEO4J_CONF": str(self.conf_dir),
        }

    def install(self) -> None:
        maven.fetch(COORDS, self.lib, transitive=True, java_home=self.java_home)

    def _conf(self) -> str:
        h = self.home
        settings = {
            "server.directories.lib": self.lib,
            "server.directories.data": h / "data",
            "server.directories.logs": h / "logs",
            "server.directories.plugins": h / "plugins",
            "server.directories.import": h / "import",
            "server.directories.run": h / "run",
            "server.directories.licenses": h / "licenses",
            "server.default_listen_address": self.host,
            "server.default_advertised_address": self.host,
            "server.bolt.enabled": "true",
            "server.bolt.listen_address": f"{self.host}:{self.bolt_port}",
            "server.bolt.advertised_address": f"{self.host}:{self.bolt_port}",
            "server.bolt.tls_level": "DISABLED",
            "server.http.enabled": "true",
            "server.http.listen_address": f"{self.host}:{self.http_port}",
            "server.http.advertised_address": f"{self.host}:{self.http_port}",
            "server.https.enabled": "false",
            "dbms.routing.enabled": "false",
            "server.memory.heap.initial_size": f"{self.heap_mb}m",
            "server.memory.heap.max_size": f"{self.heap_mb}m",
            "server.memory.pagecache.size": f"{self.pagecache_mb}m",
            "dbms.security.auth_enabled": "true",
            "dbms.usage_report.enabled": "false",
            # Bolt's two Netty event loops each idle 5 s on shutdown; 0 brings SIGTERM to < 1 s.
            "internal.dbms.bolt.netty_server_shutdown_quiet_period": "0",
        }
        return "".join(f"{k}={v}\n" for k, v in settings.items())

    def _admin(self, main_class: str, *args: str) -> subprocess.CompletedProcess[str]:
        cmd = [self._java(), "-cp", self._classpath(), *JVM_FLAGS, main_class, *args]
        return subprocess.run(cmd, cwd=self.home, env={**os.environ, **self._env()},
                              capture_output=True, text=True)

    def prepare(self) -> None:
        for sub in _LAYOUT:
            (self.home / sub).mkdir(parents=True, exist_ok=True)
        conf = self.conf_dir / "neo4j.conf"
        text = self._conf()
        if not conf.exists() or conf.read_text() != text:
            conf.write_text(text)
            # A server given a bad config logs the error but its JVM never exits: fail here.
            proc = self._admin(ADMIN_BOOT, "server", "validate-config")
            if proc.returncode != 0:
                conf.unlink()
                raise RuntimeError(f"neo4j.conf rejected ({proc.returncode}):\n{proc.stdout[-2000:]}"
                                   f"\n{proc.stderr[-2000:]}")
        data = self.home / "data"
        if (data / "dbms" / "auth.ini").exists() or (data / "databases" / "system").exists():
            return  # password already staged, or the system database already holds the user
        proc = self._admin(ADMIN_TOOL, "dbms", "set-initial-password", self.password)
        if proc.returncode != 0:
            raise RuntimeError(f"neo4j set-initial-password failed ({proc.returncode}):\n"
                               f"{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")

    def launch(self) -> Launch:
        argv = [
            self._java(),
            f"-Xms{self.heap_mb}m",
            f"-Xmx{self.heap_mb}m",
            "-cp",
            self._classpath(),
            *JVM_FLAGS,
            ENTRY_POINT,
            f"--home-dir={self.home}",
            f"--config-dir={self.conf_dir}",
            "--console-mode",
        ]
        return Launch(argv=argv, cwd=self.home, env=self._env())

    def _discovery(self) -> dict[str, object] | None:
        url = f"http://{self.host}:{self.http_port}/"
        try:
            req = urllib.request.Request(url, headers={"Accept": "application/json"})
            with urllib.request.urlopen(req, timeout=2) as resp:
                if resp.status != 200:
                    return None
                body = json.loads(resp.read().decode())
                return body if isinstance(body, dict) else None
        except Exception:
            return None

    def healthy(self) -> bool:
        try:
            return port_open(self.host, self.bolt_port) and self._discovery() is not None
        except Exception:
            return False

    def version(self) -> str:
        try:
            info = self._discovery() if port_open(self.host, self.bolt_port) else None
            value = info.get("neo4j_version") if info else None
            return str(value) if value else "unknown"
        except Exception:
            return "unknown"

    def address(self) -> str:
        return f"bolt://{self.host}:{self.bolt_port}"
