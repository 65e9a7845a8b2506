#!/usr/bin/env bash
# Rebuild bench/everyday_probe6/corpus/ from Debian 12 (bookworm) packages (see SOURCES.md).
# Needs: apt-get (with `apt-get update` done), dpkg-deb, man-db (man), col (bsdextrautils), gzip.
# Usage: bash bench/everyday_probe6/fetch_corpus.sh [OUTDIR]   (default: corpus/ next to this script)
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
OUT="${1:-$HERE/corpus}"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
export LC_ALL=C.UTF-8
PKGS=("fonts-sil-charis=6.101-1" "fonts-sil-andika=6.101-2" "fonts-sil-scheherazade=2.100-2.1"
      "fontforge-doc=1:20230101~dfsg-1.1~deb12u1" "fontconfig=2.14.1-4"
      "lifelines-doc=3.0.61-3" "gramps=5.1.5-1"
      "direwolf=1.6+dfsg-3" "fldigi=4.1.23-1" "xastir=2.1.8-1+b1"
      "brltty=6.5-7+deb12u1" "orca=43.1-1"
      "remind=04.02.03-4" "calcurse=4.7.1-1"
      "dcmtk=3.6.7-9~deb12u4" "dcmtk-doc=3.6.7-9~deb12u4"
      "samtools=1.16.1-1"
      "diction=1.11-1+b1" "gnu-standards=2022.03.23-0.1")
cd "$WORK"
for spec in "${PKGS[@]}"; do
  name="${spec%%=*}"
  if ! apt-get download -q "$spec" >/dev/null 2>&1; then
    echo "WARNING: $spec not in the archive; taking the current version of $name" >&2
    apt-get download -q "$name" >/dev/null
  fi
  dpkg-deb -x "$(ls "${name}"_*.deb | head -1)" x/
done
mkdir -p "$OUT"/{typography,genealogy,hamradio,accessibility,calendar,dicom,bioinformatics,writing}
render() { MANWIDTH=80 man -l "$1" 2>/dev/null | col -bx > "$2"; }
M=x/usr/share/man
D=x/usr/share/doc
# typography: SIL font documentation (Charis: feature list PDF and version history Markdown; Andika: design
# page HTML; Scheherazade: feature document ODT), three FontForge manual pages (HTML), the fontconfig user guide
gzip -dc "$D/fonts-sil-charis/documentation/pdf/features.pdf.gz" > "$OUT/typography/CharisSIL-features.pdf"
gzip -dc "$D/fonts-sil-charis/documentation/source/history.md.gz" > "$OUT/typography/CharisSIL-history.md"
cp "$D/fonts-sil-andika/documentation/design.html" "$OUT/typography/Andika-design.html"
cp "$D/fonts-sil-scheherazade/documentation/Scheherazade-features.odt" "$OUT/typography/"
F="$D/fontforge"
cp "$F/glossary.html" "$OUT/typography/fontforge-glossary.html"
cp "$F/techref/pcf-format.html" "$OUT/typography/fontforge-pcf-format.html"
cp "$F/ui/dialogs/generate.html" "$OUT/typography/fontforge-generate.html"
cp "$D/fontconfig/fontconfig-user.html" "$OUT/typography/"
# genealogy: LifeLines user guide (PDF) and report programming manual (HTML); Gramps man page, FAQ,
# README and example GEDCOM file
gzip -dc "$D/lifelines-doc/ll-userguide.pdf.gz" > "$OUT/genealogy/ll-userguide.pdf"
cp "$D/lifelines-doc/ll-reportmanual.html" "$OUT/genealogy/"
render "$M/man1/gramps.1.gz" "$OUT/genealogy/gramps.1.txt"
gzip -dc "$D/gramps/FAQ.gz" > "$OUT/genealogy/gramps-FAQ.txt"
gzip -dc "$D/gramps/README.md.gz" > "$OUT/genealogy/gramps-README.md"
cp "$D/gramps/example/gedcom/sample.ged" "$OUT/genealogy/gramps-sample.ged"
# hamradio: Dire Wolf (README, sample config, APRS tocall list), fldigi (README, NAVTEX station list and
# ship-report statistics, both CSV), Xastir (contributing guide, FAQ)
gzip -dc "$D/direwolf/README.md.gz" > "$OUT/hamradio/direwolf-README.md"
gzip -dc "$D/direwolf/conf/direwolf.conf.gz" > "$OUT/hamradio/direwolf.conf.txt"
cp x/usr/share/direwolf/tocalls.txt "$OUT/hamradio/direwolf-tocalls.txt"
cp "$D/fldigi/README" "$OUT/hamradio/fldigi-README.txt"
cp x/usr/share/fldigi/NAVTEX_Stations.csv "$OUT/hamradio/fldigi-NAVTEX_Stations.csv"
cp x/usr/share/fldigi/ToR-Stats-SHIP.csv "$OUT/hamradio/fldigi-ToR-Stats-SHIP.csv"
gzip -dc "$D/xastir/CONTRIBUTING.md.gz" > "$OUT/hamradio/xastir-CONTRIBUTING.md"
gzip -dc "$D/xastir/FAQ.gz" > "$OUT/hamradio/xastir-FAQ.txt"
# accessibility: BRLTTY (man page, README, three chapters of the HTML manual, the sample brltty.conf),
# Orca (man page)
render "$M/man1/brltty.1.gz" "$OUT/accessibility/brltty.1.txt"
gzip -dc "$D/brltty/README.gz" > "$OUT/accessibility/brltty-README.txt"
for n in 4 10 14; do cp "$D/brltty/English/BRLTTY-$n.html" "$OUT/accessibility/"; done
cp x/etc/brltty.conf "$OUT/accessibility/brltty.conf.txt"
render "$M/man1/orca.1.gz" "$OUT/accessibility/orca.1.txt"
# calendar: Remind (man page), calcurse (man page, manual, patch submission guide)
render "$M/man1/remind.1.gz" "$OUT/calendar/remind.1.txt"
render "$M/man1/calcurse.1.gz" "$OUT/calendar/calcurse.1.txt"
gzip -dc "$D/calcurse/manual.txt.gz" > "$OUT/calendar/calcurse-manual.txt"
gzip -dc "$D/calcurse/submitting-patches.txt.gz" > "$OUT/calendar/calcurse-submitting-patches.txt"
# dicom: DCMTK medical imaging toolkit (two man pages, the sample dcmqrscp.cfg, three HTML doc pages)
render "$M/man1/storescp.1.gz" "$OUT/dicom/storescp.1.txt"
render "$M/man1/dcmqrscp.1.gz" "$OUT/dicom/dcmqrscp.1.txt"
cp x/etc/dcmtk/dcmqrscp.cfg "$OUT/dicom/dcmqrscp.cfg.txt"
H="$D/dcmtk/dcmtk/html"
for f in dcmqrcnf envvars datadict; do cp "$H/file_$f.html" "$OUT/dicom/dcmtk-$f.html"; done
# bioinformatics: samtools man pages and the README of its examples
for m in samtools samtools-view samtools-markdup samtools-flags samtools-depth; do
  render "$M/man1/$m.1.gz" "$OUT/bioinformatics/$m.1.txt"
done
cp "$D/samtools/examples/00README.txt" "$OUT/bioinformatics/samtools-examples-README.txt"
# writing: GNU diction and style (man pages, README), the GNU Coding Standards (text) and
# Information for Maintainers of GNU Software (PDF)
render "$M/man1/diction.1.gz" "$OUT/writing/diction.1.txt"
render "$M/man1/style.1.gz" "$OUT/writing/style.1.txt"
cp "$D/diction/README" "$OUT/writing/diction-README.txt"
gzip -dc "$D/gnu-standards/standards.text.gz" > "$OUT/writing/gnu-standards.txt"
gzip -dc "$D/gnu-standards/maintain.pdf.gz" > "$OUT/writing/gnu-maintain.pdf"
echo "corpus in $OUT: $(find "$OUT" -type f | wc -l) files"
