#!/usr/bin/env bash
# Rebuild bench/everyday_probe7/corpus/ from Debian 12 (bookworm) packages (see SOURCES.md).
# Needs: apt-get (with `apt-get update` done), dpkg-deb, man-db (man), col (bsdextrautils), gzip.
# Usage: bash bench/everyday_probe7/fetch_corpus.sh [OUTDIR]   (default: corpus/ next to this script)
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
OUT="${1:-$HERE/corpus}"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
export LC_ALL=C.UTF-8
PKGS=("libimage-exiftool-perl=12.57+dfsg-1" "jhead=1:3.06.0.1-6" "gphoto2=2.5.28-2"
      "cups-server-common=2.4.2-3+deb12u11" "cups-common=2.4.2-3+deb12u11"
      "restic=0.14.0-1+b5" "borgbackup-doc=1.2.4-1"
      "nftables=1.0.6-2+deb12u2" "ufw=0.36.2-1"
      "pgn-extract=19.04-1" "xboard=4.9.1-2+b1" "gnuchess=6.2.7-1+deb12u1" "texlive-games=2022.20230122-4"
      "openbabel=3.1.1+dfsg-9+b3" "rdkit-doc=202209.3-1" "rdkit-data=202209.3-1"
      "texlive-science-doc=2022.20230122-4"
      "r-cran-readxl=1.4.2-1" "gnumeric=1.12.55-1"
      "weather-util=2.4.4-2" "weather-util-data=2.4.4-2" "nco=5.1.4-1+deb12u1" "cdo=2.1.1-1+deb12u1")
cd "$WORK"
for spec in "${PKGS[@]}"; do
  name="${spec%%=*}"
  if ! apt-get download -q "$spec" >/dev/null 2>&1; then
    echo "WARNING: $spec not in the archive; taking the current version of $name" >&2
    apt-get download -q "$name" >/dev/null
  fi
  dpkg-deb -x "$(ls "${name}"_*.deb | head -1)" x/
done
mkdir -p "$OUT"/{photography,printing,backups,firewall,chess,chemistry,spreadsheets,weather}
render() { MANWIDTH=80 man -l "$1" 2>/dev/null | col -bx > "$2"; }
M=x/usr/share/man
D=x/usr/share/doc
# photography: ExifTool (FAQ, geotagging and GPS tag pages, the MIE format specification PDF, README),
# jhead (usage page and man page), gphoto2 (man page)
E="$D/libimage-exiftool-perl"
cp "$E/html/faq.html" "$OUT/photography/exiftool-faq.html"
cp "$E/html/geotag.html" "$OUT/photography/exiftool-geotag.html"
cp "$E/html/TagNames/GPS.html" "$OUT/photography/exiftool-TagNames-GPS.html"
cp "$E/html/MIE1.1-20070121.pdf" "$OUT/photography/"
gzip -dc "$E/README.gz" > "$OUT/photography/exiftool-README.txt"
cp "$D/jhead/usage.html" "$OUT/photography/jhead-usage.html"
render "$M/man1/jhead.1.gz" "$OUT/photography/jhead.1.txt"
render "$M/man1/gphoto2.1.gz" "$OUT/photography/gphoto2.1.txt"
# printing: CUPS help pages (HTML) and the PPD compiler's media size definitions
C=x/usr/share/cups/doc-root/help
for f in man-cupsd.conf man-lp man-lpadmin encryption firewalls; do cp "$C/$f.html" "$OUT/printing/cups-$f.html"; done
cp x/usr/share/cups/ppdc/media.defs "$OUT/printing/cups-media.defs.txt"
# backups: restic manual pages (HTML), Borg quickstart and FAQ (HTML)
R="$D/restic/html"
for f in 040_backup 060_forget 070_encryption faq; do cp "$R/$f.html" "$OUT/backups/restic-$f.html"; done
B="$D/borgbackup/html"
cp "$B/quickstart.html" "$OUT/backups/borg-quickstart.html"
cp "$B/faq.html" "$OUT/backups/borg-faq.html"
# firewall: nftables (man page, an example ruleset, README.Debian), ufw (two man pages, README, before.rules)
render "$M/man8/nft.8.gz" "$OUT/firewall/nft.8.txt"
cp "$D/nftables/examples/sets_and_maps.nft" "$OUT/firewall/nftables-sets_and_maps.nft.txt"
cp "$D/nftables/README.Debian" "$OUT/firewall/nftables-README.Debian.txt"
render "$M/man8/ufw.8.gz" "$OUT/firewall/ufw.8.txt"
render "$M/man8/ufw-framework.8.gz" "$OUT/firewall/ufw-framework.8.txt"
gzip -dc "$D/ufw/README.gz" > "$OUT/firewall/ufw-README.txt"
cp x/usr/share/ufw/iptables/before.rules "$OUT/firewall/ufw-before.rules.txt"
# chess: pgn-extract help (HTML), XBoard FAQ and engine protocol (HTML), GNU Chess man page,
# LaTeX chess packages (chess-problem-diagrams and schwalbe-chess PDFs, chessboard README)
cp "$D/pgn-extract/help.html" "$OUT/chess/pgn-extract-help.html"
cp "$D/xboard/FAQ.html" "$OUT/chess/xboard-FAQ.html"
cp "$D/xboard/engine-intf.html" "$OUT/chess/xboard-engine-intf.html"
render "$M/man1/gnuchess.1.gz" "$OUT/chess/gnuchess.1.txt"
T="$D/texlive-doc/latex"
cp "$T/chess-problem-diagrams/diagram.pdf" "$OUT/chess/chess-problem-diagrams.pdf"
cp "$T/schwalbe-chess/schwalbe.pdf" "$OUT/chess/schwalbe-chess.pdf"
cp "$T/chessboard/README.md" "$OUT/chess/chessboard-README.md"
# chemistry: Open Babel (obabel man page, FAQ), RDKit (overview, install notes and backwards-incompatible
# changes as Markdown, the PostgreSQL cartridge page), two RDKit data tables (CSV), the mhchem manual (PDF)
render "$M/man1/obabel.1.gz" "$OUT/chemistry/obabel.1.txt"
cp "$D/openbabel/FAQ.html" "$OUT/chemistry/openbabel-FAQ.html"
K="$D/rdkit/html"
for f in Overview Install BackwardsIncompatibleChanges; do cp "$K/_sources/$f.md.txt" "$OUT/chemistry/rdkit-$f.md"; done
cp "$K/Cartridge.html" "$OUT/chemistry/rdkit-Cartridge.html"
cp x/usr/share/RDKit/Data/FragmentDescriptors.csv "$OUT/chemistry/rdkit-FragmentDescriptors.csv"
cp x/usr/share/RDKit/Data/Pains/wehi_pains.csv "$OUT/chemistry/rdkit-wehi_pains.csv"
cp "$D/texlive-doc/latex/mhchem/mhchem.pdf" "$OUT/chemistry/mhchem.pdf"
# spreadsheets: readxl example workbooks (XLSX), its sheet-geometry vignette (HTML) and NEWS (Markdown),
# the Gnumeric ssconvert man page
X=x/usr/lib/R/site-library/readxl
cp "$X/extdata/datasets.xlsx" "$OUT/spreadsheets/readxl-datasets.xlsx"
cp "$X/extdata/deaths.xlsx" "$OUT/spreadsheets/readxl-deaths.xlsx"
cp "$X/doc/sheet-geometry.html" "$OUT/spreadsheets/readxl-sheet-geometry.html"
cp "$X/NEWS.md" "$OUT/spreadsheets/readxl-NEWS.md"
render "$M/man1/ssconvert.1.gz" "$OUT/spreadsheets/ssconvert.1.txt"
# weather: weather-util (man pages, FAQ, README, airport list), NCO (ncks man page),
# CDO (operator list)
render "$M/man1/weather.1.gz" "$OUT/weather/weather.1.txt"
render "$M/man5/weatherrc.5.gz" "$OUT/weather/weatherrc.5.txt"
cp "$D/weather-util/FAQ" "$OUT/weather/weather-util-FAQ.txt"
cp "$D/weather-util/README" "$OUT/weather/weather-util-README.txt"
gzip -dc x/usr/share/weather-util/airports.gz > "$OUT/weather/weather-util-airports.txt"
render "$M/man1/ncks.1.gz" "$OUT/weather/ncks.1.txt"
gzip -dc "$D/cdo/OPERATORS.gz" > "$OUT/weather/cdo-OPERATORS.txt"
echo "corpus in $OUT: $(find "$OUT" -type f | wc -l) files"
