"""Fetch server artifacts from Maven Central with the machine's `mvn`.

Guarantees: a fetch is cached behind a marker file named after the exact coordinates, so a
second call with the same coordinates does nothing; a failed fetch leaves no marker, so the
next call retries from scratch. Only Maven Central is used.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
from pathlib import Path
from xml.sax.saxutils import escape

_POM = """<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>manifold.stack</groupId>
  <artifactId>fetch</artifactId>
  <version>0</version>
  <packaging>pom</packaging>
  <dependencies>
{deps}
  </dependencies>
</project>
"""

_DEP = """    <dependency>
      <groupId>{g}</groupId><artifactId>{a}</artifactId><version>{v}</version>{extra}
    </dependency>"""


class MavenError(RuntimeError):
    """Maven could not resolve or copy the requested artifacts."""


def _dep_xml(coord: str) -> str:
    parts = coord.split(":")
    if len(parts) == 3:
        g, a, v = parts
        extra = ""
    elif len(parts) == 4:  # group:artifact:type:version
        g, a, t, v = parts
        extra = f"<type>{escape(t)}</type>"
    else:
        raise ValueError(f"bad Maven coordinate {coord!r}; want group:artifact[:type]:version")
    return _DEP.format(g=escape(g), a=escape(a), v=escape(v), extra=extra)


def fetch(coords: list[str], dest: Path, *, transitive: bool = True, java_home: str | None = None) -> Path:
    """Copy `coords` (and, if `transitive`, their runtime dependencies) into `dest`.

    Returns `dest`. Idempotent: guarded by `dest/.fetched-<digest>`.
    """
    digest = hashlib.sha256(("\n".join(coords) + f"|{transitive}").encode()).hexdigest()[:16]
    marker = dest / f".fetched-{digest}"
    if marker.exists():
        return dest
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    work = dest.parent / f".{dest.name}-pom"
    work.mkdir(parents=True, exist_ok=True)
    (work / "pom.xml").write_text(_POM.format(deps="\n".join(_dep_xml(c) for c in coords)))
    cmd = [
        "mvn", "-B", "-q", "-f", str(work / "pom.xml"),
        "org.apache.maven.plugins:maven-dependency-plugin:3.8.1:copy-dependencies",
        f"-DoutputDirectory={dest}",
        "-DincludeScope=runtime",
        f"-DexcludeTransitive={'false' if transitive else 'true'}",
    ]
    env = None
    if java_home:
        import os

        env = {**os.environ, "JAVA_HOME": java_home}
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        raise MavenError(
            f"mvn failed ({proc.returncode}) fetching {coords}:\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
        )
    marker.write_text("\n".join(coords) + "\n")
    return dest
