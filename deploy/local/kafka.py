"""Apache Kafka in KRaft mode (one combined broker + controller) from Maven Central.

Guarantees: `install()` copies `org.apache.kafka:kafka_2.13` and its runtime dependencies once;
`prepare()` writes the config and formats the log directory only when it is not yet formatted,
so restarts keep topics and offsets; the broker listens on loopback only, topics are never
auto-created (the application creates what it uses), and the heap is bounded.
"""

from __future__ import annotations

import base64
import subprocess
import uuid
from pathlib import Path

from . import maven
from .service import Launch, StackPaths, port_open

VERSION = "4.1.1"
_ARTIFACTS = [
    f"org.apache.kafka:kafka_2.13:{VERSION}",
    # kafka_2.13 logs through slf4j 1.x and ships log4j2 without the bridge between them.
    "org.apache.logging.log4j:log4j-slf4j-impl:2.24.3",
]
_MAIN = "kafka.Kafka"
_STORAGE_TOOL = "kafka.tools.StorageTool"

_LOG4J2 = """status = warn
appender.console.type = Console
appender.console.name = STDOUT
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.stdout.ref = STDOUT
logger.kafka.name = kafka
logger.kafka.level = INFO
logger.controller.name = state.change.logger
logger.controller.level = WARN
"""



def new_cluster_id() -> str:
    """A random KRaft cluster id (a UUID in URL-safe base64, as Kafka writes them) that does not
    start with "-": the storage tool would read such an id as an option and refuse to format
    (Kafka's own `Uuid.randomUuid` redraws for the same reason)."""
    while True:
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        if not cluster_id.startswith("-"):
            return cluster_id

class Kafka:
    """One KRaft node serving PLAINTEXT clients on `host:port`, its controller on `port + 1`."""

    name = "kafka"

    def __init__(
        self,
        paths: StackPaths,
        host: str = "127.0.0.1",
        port: int = 19092,
        heap_mb: int = 512,
        java_home: str = "/usr/lib/jvm/java-17-openjdk-amd64",
        partitions: int = 3,
    ) -> None:
        self.paths = paths
        self.host = host
        self.port = port
        self.heap_mb = heap_mb
        self.java_home = java_home
        self.partitions = partitions
        self.lib = paths.cache / "kafka" / VERSION / "lib"
        self.home = paths.data("kafka")

    @property
    def _config(self) -> Path:
        return self.home / "server.properties"

    @property
    def _logs(self) -> Path:
        return self.home / "kraft-logs"

    def install(self) -> None:
        maven.fetch(_ARTIFACTS, self.lib, java_home=self.java_home)

    def _java(self, main: str, *args: str) -> list[str]:
        return [
            f"{self.java_home}/bin/java",
            f"-Xms{self.heap_mb}m",
            f"-Xmx{self.heap_mb}m",
            "-XX:+UseG1GC",
            "-Djava.awt.headless=true",
            f"-Dlog4j2.configurationFile={self.home / 'log4j2.properties'}",
            f"-Dkafka.logs.dir={self.home / 'app-logs'}",
            "-cp",
            f"{self.lib}/*",
            main,
            *args,
        ]

    def prepare(self) -> None:
        self.home.mkdir(parents=True, exist_ok=True)
        ctrl = self.port + 1
        props = {
            "process.roles": "broker,controller",
            "node.id": "1",
            "controller.quorum.voters": f"1@{self.host}:{ctrl}",
            "listeners": f"PLAINTEXT://{self.host}:{self.port},CONTROLLER://{self.host}:{ctrl}",
            "advertised.listeners": f"PLAINTEXT://{self.host}:{self.port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "log.dirs": str(self._logs),
            "num.partitions": str(self.partitions),
            "auto.create.topics.enable": "false",
            "offsets.topic.replication.factor": "1",
            "offsets.topic.num.partitions": "3",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "share.coordinator.state.topic.replication.factor": "1",
            "share.coordinator.state.topic.min.isr": "1",
            "group.initial.rebalance.delay.ms": "0",
            "log.retention.hours": "168",
        }
        self._config.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        (self.home / "log4j2.properties").write_text(_LOG4J2)
        if (self._logs / "meta.properties").exists():
            return
        cluster_id = new_cluster_id()
        proc = subprocess.run(
            self._java(_STORAGE_TOOL, "format", "-t", cluster_id, "-c", str(self._config)),
            capture_output=True,
            text=True,
        )
        if proc.returncode != 0:
            raise RuntimeError(f"kafka storage format failed:\n{proc.stdout}\n{proc.stderr}")

    def launch(self) -> Launch:
        return Launch(argv=self._java(_MAIN, str(self._config)), cwd=self.home)

    def healthy(self) -> bool:
        return port_open(self.host, self.port) and port_open(self.host, self.port + 1)

    def version(self) -> str:
        return VERSION if self.healthy() else "unknown"

    def address(self) -> str:
        return f"{self.host}:{self.port}"
