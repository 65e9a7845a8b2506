#!/usr/bin/env bash
# Rebuild bench/everyday_probe3/corpus/ from Debian 12 (bookworm) packages (see SOURCES.md).
# Needs: apt-get (with `apt-get update` done), dpkg-deb, man-db (man), col (bsdextrautils), gzip.
# Usage: bash bench/everyday_probe3/fetch_corpus.sh [OUTDIR]   (default: corpus/ next to this script)
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
OUT="${1:-$HERE/corpus}"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
export LC_ALL=C.UTF-8
PKGS=("openssl=3.0.22-1~deb12u2" "postfix-doc=3.7.11-0+deb12u1" "nut-doc=2.8.0-7" "chrony=4.3-2+deb12u3"
      "sed=4.9-1+deb12u1" "grep=3.8-5" "tar=1.34+dfsg-1.2+deb12u1" "redis-server=5:7.0.15-1~deb12u10"
      "haproxy-doc=2.6.12-1+deb12u4")
cd "$WORK"
for spec in "${PKGS[@]}"; do
  name="${spec%%=*}"
  if ! apt-get download -q "$spec" >/dev/null 2>&1; then
    echo "WARNING: $spec not in the archive; taking the current version of $name" >&2
    apt-get download -q "$name" >/dev/null
  fi
  dpkg-deb -x "$(ls "${name}"_*.deb | head -1)" x/
done
mkdir -p "$OUT"/{tls,mail,ups,ntp,textutils,redis,haproxy}
render() { MANWIDTH=80 man -l "$1" 2>/dev/null | col -bx > "$2"; }
# tls: OpenSSL 3.0 command and configuration man pages, the keys HOWTO and the README (Markdown)
for p in man1/openssl-req.1ssl man1/openssl-x509.1ssl man1/openssl-genpkey.1ssl man1/openssl-s_client.1ssl \
         man1/openssl-verify.1ssl man1/openssl-ciphers.1ssl man1/openssl-pkcs12.1ssl man1/openssl-passwd.1ssl \
         man1/openssl-enc.1ssl man1/openssl-verification-options.1ssl man5/x509v3_config.5ssl; do
  render "x/usr/share/man/$p.gz" "$OUT/tls/$(basename "$p").txt"
done
cp x/usr/share/doc/openssl/HOWTO/keys.txt "$OUT/tls/keys.txt"
gzip -dc x/usr/share/doc/openssl/README.md.gz > "$OUT/tls/README.md"
# mail: Postfix HTML documentation (README guides and HTML man pages)
for f in BASIC_CONFIGURATION_README TUNING_README SASL_README TLS_README SMTPD_ACCESS_README POSTSCREEN_README \
         access.5 header_checks.5 postsuper.1 postqueue.1; do
  cp "x/usr/share/doc/postfix/html/$f.html" "$OUT/mail/"
done
# ups: Network UPS Tools manuals as PDF
cp x/usr/share/doc/nut-doc/pdf/FAQ.pdf x/usr/share/doc/nut-doc/pdf/user-manual.pdf "$OUT/ups/"
# ntp: chrony man pages, FAQ and README (plain text)
for p in man5/chrony.conf.5 man1/chronyc.1 man8/chronyd.8; do
  render "x/usr/share/man/$p.gz" "$OUT/ntp/$(basename "$p").txt"
done
gzip -dc x/usr/share/doc/chrony/FAQ.gz > "$OUT/ntp/FAQ.txt"
gzip -dc x/usr/share/doc/chrony/README.gz > "$OUT/ntp/README.txt"
# textutils: GNU sed, grep and tar man pages
for p in man1/sed.1 man1/grep.1 man1/tar.1; do
  render "x/usr/share/man/$p.gz" "$OUT/textutils/$(basename "$p").txt"
done
# redis: the commented default configuration file and the README (Markdown)
cp x/etc/redis/redis.conf "$OUT/redis/redis.conf.txt"
gzip -dc x/usr/share/doc/redis-server/README.md.gz > "$OUT/redis/README.md"
# haproxy: the starter guide and the management guide (HTML)
cp x/usr/share/doc/haproxy/html/intro.html x/usr/share/doc/haproxy/html/management.html "$OUT/haproxy/"
echo "corpus in $OUT: $(find "$OUT" -type f | wc -l) files"
