#!/usr/bin/env bash
# Rebuild bench/everyday_probe2/corpus/ from Debian 12 (bookworm) packages (see SOURCES.md).
# Needs: apt-get (with `apt-get update` done), dpkg-deb, man-db (man), col (bsdextrautils).
# Usage: bash bench/everyday_probe2/fetch_corpus.sh [OUTDIR]   (default: corpus/ next to this script)
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
OUT="${1:-$HERE/corpus}"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
export LC_ALL=C.UTF-8
PKGS=("apache2-doc=2.4.71-1~deb12u1" "curl=7.88.1-10+deb12u15" "libcurl4-doc=7.88.1-10+deb12u15"
      "python3.11-doc=3.11.2-6+deb12u9" "sudo=1.9.13p3-1+deb12u4" "cron=3.0pl1-162" "logrotate=3.21.0-1"
      "tmux=3.3a-3" "bash-doc=5.2.15-2")
cd "$WORK"
for spec in "${PKGS[@]}"; do
  name="${spec%%=*}"
  if ! apt-get download -q "$spec" >/dev/null 2>&1; then
    echo "WARNING: $spec not in the archive; taking the current version of $name" >&2
    apt-get download -q "$name" >/dev/null
  fi
  dpkg-deb -x "$(ls "${name}"_*.deb | head -1)" x/
done
mkdir -p "$OUT"/{apache,curl,python,unixadmin}
render() { MANWIDTH=80 man -l "$1" 2>/dev/null | col -bx > "$2"; }
A=x/usr/share/doc/apache2-doc/manual/en
for p in mod/mpm_common mod/event mod/mod_headers mod/mod_log_config mod/mod_deflate mod/mod_alias mod/mod_dir \
         mod/mod_remoteip mod/mod_expires programs/htpasswd programs/ab; do
  cp "$A/$p.html" "$OUT/apache/"
done
for p in man1/curl.1 man3/libcurl-errors.3 man3/libcurl-env.3 man3/CURLOPT_TIMEOUT.3 man3/CURLOPT_CONNECTTIMEOUT.3 \
         man3/CURLOPT_MAXREDIRS.3 man3/CURLOPT_SSL_VERIFYHOST.3 man3/CURLOPT_BUFFERSIZE.3 man3/CURLOPT_NETRC.3; do
  render "x/usr/share/man/$p.gz" "$OUT/curl/$(basename "$p").txt"
done
for f in logging logging.handlers subprocess json hashlib secrets functools pathlib datetime tempfile; do
  cp "x/usr/share/doc/python3.11/html/library/$f.html" "$OUT/python/"
done
for p in man5/sudoers.5 man8/sudo.8 man8/visudo.8 man5/sudoers_timestamp.5 man5/crontab.5 man1/crontab.1 \
         man8/cron.8 man8/logrotate.8 man1/tmux.1; do
  render "x/usr/share/man/$p.gz" "$OUT/unixadmin/$(basename "$p").txt"
done
cp x/usr/share/doc/bash/bash.pdf "$OUT/unixadmin/bash.pdf"
echo "corpus in $OUT: $(find "$OUT" -type f | wc -l) files"
