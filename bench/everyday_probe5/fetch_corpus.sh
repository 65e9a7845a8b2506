#!/usr/bin/env bash
# Rebuild bench/everyday_probe5/corpus/ from Debian 12 (bookworm) packages (see SOURCES.md).
# Needs: apt-get (with `apt-get update` done), dpkg-deb, man-db (man), col (bsdextrautils), gzip.
# Usage: bash bench/everyday_probe5/fetch_corpus.sh [OUTDIR]   (default: corpus/ next to this script)
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
OUT="${1:-$HERE/corpus}"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
export LC_ALL=C.UTF-8
PKGS=("abcmidi=20230208+ds1-1" "abcm2ps=8.14.14-1" "sox=14.4.2+git20190427-3.5"
      "imagemagick-6-doc=8:6.9.11.60+dfsg-1.6+deb12u16" "xplanet=1.3.1-3+b1" "stellarium=0.22.2-1"
      "avrdude=7.1+dfsg-3" "avrdude-doc=7.1+dfsg-3" "kicad-doc-en=6.0.11+dfsg-1" "maxima-doc=5.46.0-11"
      "bc=1.07.1-3+b1" "gpsbabel-doc=1.8.0+ds-5" "proj-bin=9.1.1-1+b1" "gdal-data=3.6.2+dfsg-1"
      "gnugo=3.8-11" "xboard=4.9.1-2+b1" "texlive-games=2022.20230122-4" "miscfiles=1.5+dfsg-4"
      "python3-vega-datasets=0.9+dfsg-1")
cd "$WORK"
for spec in "${PKGS[@]}"; do
  name="${spec%%=*}"
  if ! apt-get download -q "$spec" >/dev/null 2>&1; then
    echo "WARNING: $spec not in the archive; taking the current version of $name" >&2
    apt-get download -q "$name" >/dev/null
  fi
  dpkg-deb -x "$(ls "${name}"_*.deb | head -1)" x/
done
mkdir -p "$OUT"/{music,images,astronomy,electronics,maths,gis,boardgames,reference}
render() { MANWIDTH=80 man -l "$1" 2>/dev/null | col -bx > "$2"; }
M=x/usr/share/man
# music: abc notation (abcMIDI guide and man pages, abcm2ps man page and README) and SoX (man pages)
gzip -dc x/usr/share/doc/abcmidi/abcguide.txt.gz > "$OUT/music/abcguide.txt"
render "$M/man1/abc2midi.1.gz" "$OUT/music/abc2midi.1.txt"
render "$M/man1/midi2abc.1.gz" "$OUT/music/midi2abc.1.txt"
render "$M/man1/abcm2ps.1.gz" "$OUT/music/abcm2ps.1.txt"
cp x/usr/share/doc/abcm2ps/README.md "$OUT/music/abcm2ps-README.md"
render "$M/man1/sox.1.gz" "$OUT/music/sox.1.txt"
render "$M/man7/soxformat.7.gz" "$OUT/music/soxformat.7.txt"
# images: pages of the ImageMagick 6 web documentation (HTML)
I=x/usr/share/doc/imagemagick-6-common/html/www
cp "$I/security-policy.html" "$I/resources.html" "$I/cipher.html" "$I/color.html" "$OUT/images/"
# astronomy: xplanet man page, README files and bright-star marker file; Stellarium man page and README
render "$M/man1/xplanet.1.gz" "$OUT/astronomy/xplanet.1.txt"
gzip -dc x/usr/share/doc/xplanet/README.gz > "$OUT/astronomy/xplanet-README.txt"
cp x/usr/share/xplanet/config/README "$OUT/astronomy/xplanet-config-README.txt"
cp x/usr/share/xplanet/markers/README "$OUT/astronomy/xplanet-markers-README.txt"
cp x/usr/share/xplanet/markers/brightStars "$OUT/astronomy/xplanet-brightStars.txt"
render "$M/man1/stellarium.1.gz" "$OUT/astronomy/stellarium.1.txt"
cp x/usr/share/doc/stellarium/README.md "$OUT/astronomy/stellarium-README.md"
# electronics: the AVRDUDE manual (PDF) and man page; two chapters of the KiCad 6 manual (HTML)
gzip -dc x/usr/share/doc/avrdude/avrdude.pdf.gz > "$OUT/electronics/avrdude.pdf"
render "$M/man1/avrdude.1.gz" "$OUT/electronics/avrdude.1.txt"
K=x/usr/share/doc/kicad/help/en
cp "$K/pcb_calculator.html" "$OUT/electronics/kicad-pcb_calculator.html"
cp "$K/gerbview.html" "$OUT/electronics/kicad-gerbview.html"
# maths: four pages of the Maxima 5.46 manual (HTML) and the bc man page
X=x/usr/share/doc/maxima-doc/html
cp "$X/maxima_65.html" "$X/maxima_98.html" "$X/maxima_140.html" "$X/maxima_149.html" "$OUT/maths/"
render "$M/man1/bc.1.gz" "$OUT/maths/bc.1.txt"
# gis: GPSBabel filter and format pages (HTML), the PROJ cs2cs man page, GDAL's datum/zone tables (CSV)
B=x/usr/share/doc/gpsbabel/html
for f in filter_radius filter_simplify filter_track fmt_gpx; do cp "$B/$f.html" "$OUT/gis/gpsbabel-$f.html"; done
render "$M/man1/cs2cs.1.gz" "$OUT/gis/cs2cs.1.txt"
cp x/usr/share/gdal/ozi_ellips.csv x/usr/share/gdal/stateplane.csv "$OUT/gis/"
# boardgames: GNU Go man page and "Using GNU Go" chapter (HTML), the XBoard FAQ (HTML),
# the psgo (Go diagrams) and skak (chess) LaTeX package manuals (PDF)
render "$M/man6/gnugo.6.gz" "$OUT/boardgames/gnugo.6.txt"
cp x/usr/share/doc/gnugo/html/gnugo_3.html "$OUT/boardgames/gnugo_3.html"
cp x/usr/share/doc/xboard/FAQ.html "$OUT/boardgames/xboard-FAQ.html"
T=x/usr/share/doc/texlive-doc/latex
cp "$T/psgo/psgomanual.pdf" "$T/skak/skakdoc.pdf" "$OUT/boardgames/"
# reference: miscfiles tables (plain text) and Vega example data sets (CSV, JSON)
for f in airport inter.phone birthtoken; do gzip -dc "x/usr/share/misc/$f.gz" > "$OUT/reference/$f.txt"; done
V=x/usr/lib/python3/dist-packages/vega_datasets/_data
cp "$V/seattle-weather.csv" "$V/iowa-electricity.csv" "$V/cars.json" "$OUT/reference/"
echo "corpus in $OUT: $(find "$OUT" -type f | wc -l) files"
