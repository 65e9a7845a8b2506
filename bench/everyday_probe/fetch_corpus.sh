#!/usr/bin/env bash
# Rebuild bench/everyday_probe/corpus/ from Debian 12 (bookworm) packages (see SOURCES.md).
# Needs: apt-get (with `apt-get update` done), dpkg-deb, man-db (man), col (bsdextrautils).
# Usage: bash bench/everyday_probe/fetch_corpus.sh [OUTDIR]   (default: corpus/ next to this script)
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
OUT="${1:-$HERE/corpus}"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
export LC_ALL=C.UTF-8
PKGS=("openssh-client=1:9.2p1-2+deb12u10" "systemd=252.39-1~deb12u2" "sqlite3-doc=3.40.1-2+deb12u2"
      "rsync=3.5.0+ds1-0+deb12u1")
cd "$WORK"
for spec in "${PKGS[@]}"; do
  name="${spec%%=*}"
  if ! apt-get download -q "$spec" >/dev/null 2>&1; then
    echo "WARNING: $spec not in the archive; taking the current version of $name" >&2
    apt-get download -q "$name" >/dev/null
  fi
  dpkg-deb -x "$(ls "${name}"_*.deb | head -1)" x/
done
mkdir -p "$OUT"/{ssh,systemd,sqlite,rsync}
render() { MANWIDTH=80 man -l "$1" 2>/dev/null | col -bx > "$2"; }
for p in man5/ssh_config.5 man1/ssh.1 man1/scp.1 man1/ssh-keygen.1 man1/ssh-agent.1; do
  render "x/usr/share/man/$p.gz" "$OUT/ssh/$(basename "$p").txt"
done
for p in man5/systemd.service.5 man5/systemd.timer.5 man5/systemd.exec.5 man5/journald.conf.5 man1/systemctl.1 \
         man5/systemd.unit.5 man5/logind.conf.5 man5/systemd.kill.5 man5/systemd.resource-control.5; do
  render "x/usr/share/man/$p.gz" "$OUT/systemd/$(basename "$p").txt"
done
for p in man1/rsync.1 man5/rsyncd.conf.5; do
  render "x/usr/share/man/$p.gz" "$OUT/rsync/$(basename "$p").txt"
done
for f in limits lang_createtable pragma datatype3 lang_datefunc json1 fts5 lockingv3 wal autoinc lang_upsert foreignkeys; do
  cp "x/usr/share/doc/sqlite3/$f.html" "$OUT/sqlite/"
done
echo "corpus in $OUT: $(find "$OUT" -type f | wc -l) files"
