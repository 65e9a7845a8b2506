#!/usr/bin/env bash
# Rebuild bench/everyday_probe8/corpus/ from Debian 12 (bookworm) packages (see SOURCES.md).
# Needs: apt-get (with `apt-get update` done), dpkg-deb, man-db (man), col (bsdextrautils), gzip.
# Usage: bash bench/everyday_probe8/fetch_corpus.sh [OUTDIR]   (default: corpus/ next to this script)
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
OUT="${1:-$HERE/corpus}"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
export LC_ALL=C.UTF-8
PKGS=("ffmpeg-doc=7:5.1.9-0+deb12u1" "mkvtoolnix=74.0.0-1+deb12u1"
      "smartmontools=7.3-1+b1" "mdadm=4.2-5"
      "nmap=7.93+dfsg1-1" "nmap-common=7.93+dfsg1-1" "tcpdump=4.99.3-1" "iperf3=3.12-1+deb12u2" "ieee-data=20220827.1"
      "mosquitto=2.0.11-1.2+deb12u2" "mosquitto-clients=2.0.11-1.2+deb12u2"
      "r-cran-vegan=2.6-4+dfsg-1"
      "r-cran-epir=2.0.57+dfsg-1" "r-cran-survival=3.5-3-1"
      "aspell-doc=0.60.8-4" "espeak-ng=1.51+dfsg-10+deb12u2" "hunspell=1.7.1-1"
      "bibtool=2.68+ds-1" "biber=2.18-1")
cd "$WORK"
for spec in "${PKGS[@]}"; do
  name="${spec%%=*}"
  if ! apt-get download -q "$spec" >/dev/null 2>&1; then
    echo "WARNING: $spec not in the archive; taking the current version of $name" >&2
    apt-get download -q "$name" >/dev/null
  fi
  dpkg-deb -x "$(ls "${name}"_*.deb | head -1)" x/
done
mkdir -p "$OUT"/{video,storage,netdiag,mqtt,ecology,epidemiology,linguistics,bibliography}
render() { MANWIDTH=80 man -l "$1" 2>/dev/null | col -bx > "$2"; }
M=x/usr/share/man
D=x/usr/share/doc
# video: FFmpeg manual pages (HTML: FAQ, ffmpeg tool, ffprobe, the general page with format/codec tables),
# MKVToolNix (mkvmerge and mkvextract man pages, README)
F="$D/ffmpeg/manual"
cp "$F/faq.html" "$OUT/video/ffmpeg-faq.html"
cp "$F/ffmpeg.html" "$OUT/video/ffmpeg.html"
cp "$F/ffprobe.html" "$OUT/video/ffprobe.html"
cp "$F/general.html" "$OUT/video/ffmpeg-general.html"
render "$M/man1/mkvmerge.1.gz" "$OUT/video/mkvmerge.1.txt"
render "$M/man1/mkvextract.1.gz" "$OUT/video/mkvextract.1.txt"
gzip -dc "$D/mkvtoolnix/README.md.gz" > "$OUT/video/mkvtoolnix-README.md"
# storage: smartmontools (smartctl and smartd.conf man pages, the bad block HOWTO, the drive database),
# mdadm (FAQ, md(4) and mdadm.conf(5) man pages, README.recipes)
render "$M/man8/smartctl.8.gz" "$OUT/storage/smartctl.8.txt"
render "$M/man5/smartd.conf.5.gz" "$OUT/storage/smartd.conf.5.txt"
cp "$D/smartmontools/badblockhowto.html" "$OUT/storage/smartmontools-badblockhowto.html"
cp x/usr/share/smartmontools/drivedb.h "$OUT/storage/smartmontools-drivedb.h.txt"
gzip -dc "$D/mdadm/FAQ.gz" > "$OUT/storage/mdadm-FAQ.txt"
render "$M/man4/md.4.gz" "$OUT/storage/md.4.txt"
render "$M/man5/mdadm.conf.5.gz" "$OUT/storage/mdadm.conf.5.txt"
gzip -dc "$D/mdadm/README.recipes.gz" > "$OUT/storage/mdadm-README.recipes.txt"
# netdiag: nmap, tcpdump and iperf3 man pages, iperf3 README, Nmap's protocol-number and RPC-number tables,
# the IEEE IAB (MAC address block) registry as CSV
render "$M/man1/nmap.1.gz" "$OUT/netdiag/nmap.1.txt"
render "$M/man8/tcpdump.8.gz" "$OUT/netdiag/tcpdump.8.txt"
render "$M/man1/iperf3.1.gz" "$OUT/netdiag/iperf3.1.txt"
gzip -dc "$D/iperf3/README.md.gz" > "$OUT/netdiag/iperf3-README.md"
cp x/usr/share/nmap/nmap-protocols "$OUT/netdiag/nmap-protocols.txt"
cp x/usr/share/nmap/nmap-rpc "$OUT/netdiag/nmap-rpc.txt"
cp x/usr/share/ieee-data/iab.csv "$OUT/netdiag/ieee-iab.csv"
# mqtt: Mosquitto broker and client man pages, the Let's Encrypt README, the example ACL file
render "$M/man5/mosquitto.conf.5.gz" "$OUT/mqtt/mosquitto.conf.5.txt"
render "$M/man1/mosquitto_passwd.1.gz" "$OUT/mqtt/mosquitto_passwd.1.txt"
render "$M/man7/mosquitto-tls.7.gz" "$OUT/mqtt/mosquitto-tls.7.txt"
render "$M/man7/mqtt.7.gz" "$OUT/mqtt/mqtt.7.txt"
render "$M/man1/mosquitto_pub.1.gz" "$OUT/mqtt/mosquitto_pub.1.txt"
render "$M/man1/mosquitto_sub.1.gz" "$OUT/mqtt/mosquitto_sub.1.txt"
cp "$D/mosquitto/README-letsencrypt.md" "$OUT/mqtt/mosquitto-README-letsencrypt.md"
cp "$D/mosquitto/examples/aclfile.example" "$OUT/mqtt/mosquitto-aclfile.example.txt"
# ecology: vegan (community ecology) vignettes (PDF), its FAQ (R Markdown, as .md) and NEWS (Markdown)
V=x/usr/lib/R/site-library/vegan
for f in intro-vegan diversity-vegan decision-vegan; do cp "$V/doc/$f.pdf" "$OUT/ecology/"; done
cp "$V/doc/FAQ-vegan.Rmd" "$OUT/ecology/vegan-FAQ.md"
cp "$V/NEWS.md" "$OUT/ecology/vegan-NEWS.md"
# epidemiology: epiR vignettes (R Markdown, as .md) and NEWS, two survival-package vignettes (PDF)
P=x/usr/lib/R/site-library/epiR
for f in epiR_descriptive epiR_measures_of_association epiR_sample_size epiR_surveillance; do
  cp "$P/doc/$f.Rmd" "$OUT/epidemiology/$f.md"; done
cp "$P/NEWS" "$OUT/epidemiology/epiR-NEWS.txt"
S=x/usr/lib/R/library/survival/doc
cp "$S/timedep.pdf" "$OUT/epidemiology/survival-timedep.pdf"
cp "$S/tiedtimes.pdf" "$OUT/epidemiology/survival-tiedtimes.pdf"
# linguistics: GNU Aspell manual pages (HTML), eSpeak NG docs (Markdown) and man page, hunspell man page
A="$D/aspell-doc/aspell.html"
for f in The-Options Notes-on-the-Different-Suggestion-Modes Format-of-the-Personal-and-Replacement-Dictionaries \
         Using-Multi-Dictionaries; do cp "$A/$f.html" "$OUT/linguistics/aspell-$f.html"; done
render "$M/man1/espeak-ng.1.gz" "$OUT/linguistics/espeak-ng.1.txt"
G="$D/espeak-ng/docs"
cp "$G/markup.md" "$OUT/linguistics/espeak-ng-markup.md"
gzip -dc "$G/voices.md.gz" > "$OUT/linguistics/espeak-ng-voices.md"
gzip -dc "$G/dictionary.md.gz" > "$OUT/linguistics/espeak-ng-dictionary.md"
gzip -dc "$G/phonemes/kirshenbaum.md.gz" > "$OUT/linguistics/espeak-ng-kirshenbaum.md"
render "$M/man1/hunspell.1.gz" "$OUT/linguistics/hunspell.1.txt"
# bibliography: BibTool (manual and reference card PDFs, README, man page), Biber (manual PDF, man page, README)
cp "$D/bibtool/bibtool.pdf" "$OUT/bibliography/bibtool.pdf"
cp "$D/bibtool/ref_card.pdf" "$OUT/bibliography/bibtool-ref_card.pdf"
gzip -dc "$D/bibtool/README.md.gz" > "$OUT/bibliography/bibtool-README.md"
render "$M/man1/bibtool.1.gz" "$OUT/bibliography/bibtool.1.txt"
cp x/usr/share/texmf/doc/bibtex/biber/biber.pdf "$OUT/bibliography/biber.pdf"
render "$M/man1/biber.1p.gz" "$OUT/bibliography/biber.1p.txt"
cp "$D/biber/README.md" "$OUT/bibliography/biber-README.md"
echo "corpus in $OUT: $(find "$OUT" -type f | wc -l) files"
