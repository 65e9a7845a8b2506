#!/usr/bin/env bash
# Rebuild bench/everyday_probe9/corpus/ from Debian 12 (bookworm) packages (see SOURCES.md).
# Needs: apt-get (with `apt-get update` done), dpkg-deb, man-db (man), col (bsdextrautils), gzip.
# Usage: bash bench/everyday_probe9/fetch_corpus.sh [OUTDIR]   (default: corpus/ next to this script)
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
OUT="${1:-$HERE/corpus}"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
export LC_ALL=C.UTF-8
PKGS=("aisleriot=1:3.22.23-1" "xskat=4.0-8"
      "sgt-puzzles=20230122.806ae71-2"
      "r-cran-ape=5.7-1" "r-bioc-biostrings=2.66.0-1" "r-cran-phangorn=2.11.1+dfsg-1" "clustalo=1.2.4-7"
      "r-cran-palmerpenguins=0.1.1-1"
      "fail2ban=1.0.2-2" "aide=0.18.3-1+deb12u5"
      "pass=1.7.4-6" "pwgen=2.08-2" "keepassxc=2.7.4+dfsg.1-2"
      "dosbox=0.74-3-4+b1"
      "taskwarrior=2.6.2+dfsg-1")
cd "$WORK"
for spec in "${PKGS[@]}"; do
  name="${spec%%=*}"
  if ! apt-get download -q "$spec" >/dev/null 2>&1; then
    echo "WARNING: $spec not in the archive; taking the current version of $name" >&2
    apt-get download -q "$name" >/dev/null
  fi
  dpkg-deb -x "$(ls "${name}"_*.deb | head -1)" x/
done
mkdir -p "$OUT"/{cardgames,puzzles,phylogenetics,zoology,hostsecurity,passwords,emulation,todo}
render() { MANWIDTH=80 man -l "$1" 2>/dev/null | col -bx > "$2"; }
M=x/usr/share/man
D=x/usr/share/doc
R=x/usr/lib/R/site-library
# cardgames: AisleRiot solitaire rules (DocBook XML help pages) and its man page, the XSkat man page
for f in klondike freecell spider golf scorpion definitions; do
  cp "x/usr/share/help/C/aisleriot/$f.xml" "$OUT/cardgames/aisleriot-$f.xml"; done
render "$M/man6/sol.6.gz" "$OUT/cardgames/sol.6.txt"
render "$M/man6/xskat.6.gz" "$OUT/cardgames/xskat.6.txt"
# puzzles: Simon Tatham's Portable Puzzle Collection (the full manual as text, Debian README, four man pages)
gzip -dc "$D/sgt-puzzles/puzzles.txt.gz" > "$OUT/puzzles/sgt-puzzles-puzzles.txt"
cp "$D/sgt-puzzles/README.Debian" "$OUT/puzzles/sgt-puzzles-README.Debian.txt"
for g in solo mines net bridges; do render "$M/man6/sgt-$g.6.gz" "$OUT/puzzles/sgt-$g.6.txt"; done
# phylogenetics: ape and Biostrings vignettes (PDF), phangorn vignette sources (R Markdown, as .md) and README,
# Clustal Omega man page and README
for f in MoranI DrawingPhylogenies RandomTopologies; do cp "$R/ape/doc/$f.pdf" "$OUT/phylogenetics/ape-$f.pdf"; done
for f in PairwiseAlignments MultipleAlignments; do
  cp "$R/Biostrings/doc/$f.pdf" "$OUT/phylogenetics/Biostrings-$f.pdf"; done
for f in Trees Ancestral; do cp "$R/phangorn/doc/$f.Rmd" "$OUT/phylogenetics/phangorn-$f.md"; done
cp "$D/r-cran-phangorn/README.md" "$OUT/phylogenetics/phangorn-README.md"
render "$M/man1/clustalo.1.gz" "$OUT/phylogenetics/clustalo.1.txt"
gzip -dc "$D/clustalo/README.gz" > "$OUT/phylogenetics/clustalo-README.txt"
# zoology: the Palmer penguins data (CSV)
cp "$R/palmerpenguins/extdata/penguins.csv" "$OUT/zoology/penguins.csv"
cp "$R/palmerpenguins/extdata/penguins_raw.csv" "$OUT/zoology/penguins_raw.csv"
# hostsecurity: fail2ban (man pages, README, filter guide, rootless notes, Debian README), AIDE (man pages,
# security notes, Debian news)
render "$M/man5/jail.conf.5.gz" "$OUT/hostsecurity/jail.conf.5.txt"
render "$M/man1/fail2ban-client.1.gz" "$OUT/hostsecurity/fail2ban-client.1.txt"
render "$M/man1/fail2ban-regex.1.gz" "$OUT/hostsecurity/fail2ban-regex.1.txt"
gzip -dc "$D/fail2ban/README.md.gz" > "$OUT/hostsecurity/fail2ban-README.md"
gzip -dc "$D/fail2ban/FILTERS.gz" > "$OUT/hostsecurity/fail2ban-FILTERS.txt"
cp "$D/fail2ban/run-rootless.txt" "$OUT/hostsecurity/fail2ban-run-rootless.txt"
gzip -dc "$D/fail2ban/README.Debian.gz" > "$OUT/hostsecurity/fail2ban-README.Debian.txt"
render "$M/man5/aide.conf.5.gz" "$OUT/hostsecurity/aide.conf.5.txt"
render "$M/man1/aide.1.gz" "$OUT/hostsecurity/aide.1.txt"
gzip -dc "$D/aide/SECURITY.md.gz" > "$OUT/hostsecurity/aide-SECURITY.md"
gzip -dc "$D/aide/NEWS.Debian.gz" > "$OUT/hostsecurity/aide-NEWS.Debian.txt"
# passwords: pass, pwgen and KeePassXC man pages, KeePassXC keyboard shortcuts (HTML), the passmenu README
render "$M/man1/pass.1.gz" "$OUT/passwords/pass.1.txt"
render "$M/man1/pwgen.1.gz" "$OUT/passwords/pwgen.1.txt"
render "$M/man1/keepassxc.1.gz" "$OUT/passwords/keepassxc.1.txt"
render "$M/man1/keepassxc-cli.1.gz" "$OUT/passwords/keepassxc-cli.1.txt"
cp x/usr/share/keepassxc/docs/KeePassXC_KeyboardShortcuts.html "$OUT/passwords/"
cp "$D/pass/examples/dmenu/README.md" "$OUT/passwords/pass-dmenu-README.md"
# emulation: DOSBox (man page, README, NEWS, Debian README)
render "$M/man1/dosbox.1.gz" "$OUT/emulation/dosbox.1.txt"
gzip -dc "$D/dosbox/README.gz" > "$OUT/emulation/dosbox-README.txt"
gzip -dc "$D/dosbox/NEWS.gz" > "$OUT/emulation/dosbox-NEWS.txt"
cp "$D/dosbox/README.Debian" "$OUT/emulation/dosbox-README.Debian.txt"
# todo: Taskwarrior (man pages, README, NEWS, the hooks README)
for p in man1/task.1 man5/taskrc.5 man5/task-color.5 man5/task-sync.5; do
  render "$M/$p.gz" "$OUT/todo/$(basename "$p").txt"; done
gzip -dc "$D/taskwarrior/README.md.gz" > "$OUT/todo/taskwarrior-README.md"
gzip -dc "$D/taskwarrior/NEWS.gz" > "$OUT/todo/taskwarrior-NEWS.txt"
cp "$D/taskwarrior/examples/hooks/README" "$OUT/todo/taskwarrior-hooks-README.txt"
echo "corpus in $OUT: $(find "$OUT" -type f | wc -l) files"
