#!/usr/bin/env bash
# Rebuild bench/everyday/corpus/ from Debian 12 (bookworm) packages.
# Needs: apt-get (with `apt-get update` done), dpkg-deb, man-db (man), groff, col (bsdextrautils), gzip.
# Usage: bash bench/everyday/fetch_corpus.sh [OUTDIR]   (default: bench/everyday/corpus next to this script)
# Each package is fetched at the version recorded in SOURCES.md; if the archive no longer has that
# version the current one is taken and a warning is printed (the facts asked about may then differ).
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
OUT="${1:-$HERE/corpus}"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
export LC_ALL=C.UTF-8

PKGS=(
  "debian-policy=4.6.2.0"
  "debian-faq=11.1"
  "maint-guide=1.2.53"
  "debian-refcard=12.0"
  "manpages=6.03-2"
  "git-doc=1:2.39.5-0+deb12u3"
  "postgresql-doc-15=15.20-0+deb12u1"
  "base-files=12.4+deb12u15"
  "distro-info-data=0.58+deb12u7"
  "tzdata=2026f-0+deb12u1"
  "iso-codes=4.15.0-1"
  "nodejs-doc=18.20.4+dfsg-1~deb12u3"
  "asymptote-doc=2.85+ds-1"
)
cd "$WORK"
for spec in "${PKGS[@]}"; do
  name="${spec%%=*}"
  if ! apt-get download -q "$spec" >/dev/null 2>&1; then
    echo "WARNING: $spec not in the archive; taking the current version of $name" >&2
    apt-get download -q "$name" >/dev/null
  fi
  deb="$(ls "${name}"_*.deb | head -1)"
  mkdir -p "x/$name"
  dpkg-deb -x "$deb" "x/$name"
done

rm -rf "$OUT"
mkdir -p "$OUT"/{debian,manpages,git,postgresql,legal,data,nodejs,asymptote}

# --- debian: Debian Policy Manual chapters (HTML), FHS 3.0, FAQ / New Maintainers' Guide / refcard (PDF)
D=x/debian-policy/usr/share/doc/debian-policy
for f in ch-archive ch-binary ch-controlfields ch-customized-programs ch-docs ch-files \
         ch-maintainerscripts ch-opersys ch-relationships ch-scope ch-sharedlibs ch-source \
         ap-pkg-conffiles ap-pkg-alternatives ap-pkg-diversions ap-process; do
  cp "$D/policy.html/$f.html" "$OUT/debian/policy-$f.html"
done
cp "$D/copyright-format-1.0.html" "$OUT/debian/copyright-format-1.0.html"
cp "$D/autopkgtest.html" "$OUT/debian/autopkgtest.html"
zcat "$D/fhs/fhs-3.0.pdf.gz" > "$OUT/debian/fhs-3.0.pdf"
zcat x/debian-faq/usr/share/doc/debian/FAQ/debian-faq.en.pdf.gz > "$OUT/debian/debian-faq.pdf"
cp x/maint-guide/usr/share/doc/maint-guide/maint-guide.en.pdf "$OUT/debian/maint-guide.pdf"
zcat x/debian-refcard/usr/share/doc/debian-refcard/refcard-en-a4.pdf.gz > "$OUT/debian/refcard-en-a4.pdf"

# --- manpages: Linux man-pages rendered to plain text (man-db, 80 columns, overstrike removed)
M=x/manpages/usr/share/man
MANS="man1/getent.1 man1/ldd.1 man1/locale.1 man1/iconv.1
man4/null.4 man4/random.4 man4/loop.4 man4/tty.4
man5/group.5 man5/host.conf.5 man5/hosts.5 man5/nsswitch.conf.5 man5/resolv.conf.5 man5/services.5
man5/protocols.5 man5/shells.5 man5/securetty.5 man5/motd.5 man5/filesystems.5 man5/nologin.5
man5/tmpfs.5 man5/core.5 man5/tzfile.5 man5/utmp.5 man5/gai.conf.5 man5/dir_colors.5
man7/signal.7 man7/environ.7 man7/hier.7 man7/regex.7 man7/glob.7 man7/ascii.7 man7/utf-8.7
man7/credentials.7 man7/time.7 man7/locale.7 man7/udp.7 man7/unix.7 man7/pipe.7 man7/fifo.7
man7/epoll.7 man7/inotify.7 man7/path_resolution.7 man7/boot.7 man7/standards.7
man7/feature_test_macros.7 man7/operator.7 man7/hostname.7 man7/keyrings.7 man7/symlink.7
man7/suffixes.7 man7/units.7 man7/mailaddr.7 man7/pty.7 man7/xattr.7 man7/tcp.7"
# These few are rendered straight by groff with hyphenation on (words broken at line ends, as
# man pages often are when copied from a terminal).
HYPH="man7/tcp.7 man7/hier.7 man5/resolv.conf.5 man7/signal.7 man5/core.5"
for m in $MANS; do
  base="$(basename "$m")"
  src="$M/$m.gz"
  if [[ " $(echo $HYPH) " == *" $m "* ]]; then
    zcat "$src" | groff -t -man -Tutf8 -rLL=80n -P-c 2>/dev/null | col -bx > "$OUT/manpages/$base.txt"
  else
    MANWIDTH=80 MAN_KEEP_FORMATTING= man -l "$src" 2>/dev/null | col -bx > "$OUT/manpages/$base.txt"
  fi
done

# --- git: Git reference manual pages (HTML, asciidoc output)
G=x/git-doc/usr/share/doc/git-doc
for f in git git-credential-cache git-credential-store gitcredentials git-clone git-commit git-stash \
         git-bisect git-tag git-gc git-worktree git-remote git-fetch git-merge git-cherry-pick \
         git-revert git-reset git-restore git-switch git-blame git-clean git-archive githooks \
         gitignore gitattributes git-sparse-checkout git-maintenance gitrevisions giteveryday \
         git-describe git-notes; do
  cp "$G/$f.html" "$OUT/git/$f.html"
done

# --- postgresql: PostgreSQL 15 manual pages (HTML)
P=x/postgresql-doc-15/usr/share/doc/postgresql-doc-15/html
for f in runtime-config-connection runtime-config-resource runtime-config-wal runtime-config-replication \
         runtime-config-query runtime-config-logging runtime-config-autovacuum runtime-config-client \
         runtime-config-locks runtime-config-file-locations auth-pg-hba-conf auth-password libpq-envars \
         libpq-pgpass datatype-numeric limits app-pgdump routine-vacuuming sql-createindex storage-toast; do
  cp "$P/$f.html" "$OUT/postgresql/$f.html"
done

# --- legal: licence texts from base-files (/usr/share/common-licenses)
L=x/base-files/usr/share/common-licenses
for f in Apache-2.0 GPL-2 GPL-3 LGPL-2.1 MPL-2.0 Artistic BSD CC0-1.0; do
  cp "$L/$f" "$OUT/legal/$f.txt"
done

# --- data: CSV (distro-info-data), TSV (tzdata .tab files), JSON (iso-codes)
cp x/distro-info-data/usr/share/distro-info/debian.csv "$OUT/data/debian.csv"
cp x/distro-info-data/usr/share/distro-info/ubuntu.csv "$OUT/data/ubuntu.csv"
Z=x/tzdata/usr/share/zoneinfo
cp "$Z/iso3166.tab" "$OUT/data/iso3166.tsv"
cp "$Z/zone1970.tab" "$OUT/data/zone1970.tsv"
cp "$Z/zone.tab" "$OUT/data/zone.tsv"
for f in iso_3166-1 iso_4217 iso_639-2 iso_15924 iso_3166-3; do
  cp "x/iso-codes/usr/share/iso-codes/json/$f.json" "$OUT/data/$f.json"
done
zcat x/iso-codes/usr/share/doc/iso-codes/README.md.gz > "$OUT/data/iso-codes-README.md"

# --- nodejs: Node.js 18 API documentation (Markdown)
N=x/nodejs-doc/usr/share/doc/nodejs/api
for f in cli environment_variables_missing buffer child_process cluster dns errors fs_missing \
         http_missing os path process_missing readline timers url util_missing worker_threads \
         crypto_missing assert events zlib; do
  [ -e "$N/$f.md.gz" ] && zcat "$N/$f.md.gz" > "$OUT/nodejs/$f.md"
done

# --- asymptote: Asymptote vector graphics language documentation (PDF)
A=x/asymptote-doc/usr/share/doc/asymptote
for f in asyRefCard asy-latex TeXShopAndAsymptote CAD; do
  cp "$A/$f.pdf" "$OUT/asymptote/$f.pdf"
done

echo "corpus rebuilt in $OUT: $(find "$OUT" -type f | wc -l) files"
