#!/usr/bin/env bash
# Rebuild bench/everyday_probe4/corpus/ from Debian 12 (bookworm) packages (see SOURCES.md).
# Needs: apt-get (with `apt-get update` done), dpkg-deb, man-db (man), col (bsdextrautils), gzip.
# Usage: bash bench/everyday_probe4/fetch_corpus.sh [OUTDIR]   (default: corpus/ next to this script)
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
OUT="${1:-$HERE/corpus}"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
export LC_ALL=C.UTF-8
PKGS=("gnucash-docs=4.13-1" "ledger=3.3.0-3" "r-doc-pdf=4.2.2.20221110-2" "python3-sklearn=1.2.1+dfsg-1"
      "python3-statsmodels=0.13.5+dfsg-7" "units=2.22-2" "lua5.2-doc=5.2.4-3" "nethack-common=3.6.6-3+b2"
      "openttd=13.0-2" "doc-debian=11.3+nmu1")
cd "$WORK"
for spec in "${PKGS[@]}"; do
  name="${spec%%=*}"
  if ! apt-get download -q "$spec" >/dev/null 2>&1; then
    echo "WARNING: $spec not in the archive; taking the current version of $name" >&2
    apt-get download -q "$name" >/dev/null
  fi
  dpkg-deb -x "$(ls "${name}"_*.deb | head -1)" x/
done
mkdir -p "$OUT"/{accounting,statistics,datasets,units,lua,games,governance}
render() { MANWIDTH=80 man -l "$1" 2>/dev/null | col -bx > "$2"; }
# accounting: pages of the GnuCash Tutorial and Concepts Guide (HTML), the Ledger 3 manual (PDF) and man page
G=x/usr/share/doc/gnucash-docs/gnucash-guide-en
for f in basics-accounting1 basics-backup1 dep_concepts1 loans_calcs1 bus_ar bus_payroll currency_trading_accts \
         invest-stockprice1 importing-from-files budget_concepts1 gnc-gloss; do
  cp "$G/$f.html" "$OUT/accounting/"
done
cp x/usr/share/doc/ledger/ledger3.pdf "$OUT/accounting/"
render x/usr/share/man/man1/ledger.1.gz "$OUT/accounting/ledger.1.txt"
# statistics: R manuals as PDF
cp x/usr/share/R/doc/manual/R-intro.pdf x/usr/share/R/doc/manual/R-data.pdf "$OUT/statistics/"
# datasets: CSV data sets and their descriptions (reStructuredText) shipped with scikit-learn and statsmodels
S=x/usr/lib/python3/dist-packages/sklearn/datasets
cp "$S/data/iris.csv" "$S/data/wine_data.csv" "$S/data/linnerud_exercise.csv" "$OUT/datasets/"
cp "$S/descr/iris.rst" "$S/descr/wine_data.rst" "$S/descr/linnerud.rst" "$S/descr/breast_cancer.rst" "$OUT/datasets/"
M=x/usr/lib/python3/dist-packages/statsmodels/datasets
cp "$M/longley/longley.csv" "$M/stackloss/stackloss.csv" "$M/nile/nile.csv" "$M/statecrime/statecrime.csv" "$OUT/datasets/"
# units: the GNU units man page and its unit definitions database (plain text)
render x/usr/share/man/man1/units.1.gz "$OUT/units/units.1.txt"
cp x/usr/share/units/definitions.units "$OUT/units/definitions.units.txt"
cp x/var/lib/units/currency.units "$OUT/units/currency.units.txt"
# lua: the Lua 5.2 reference manual and readme (HTML)
cp x/usr/share/doc/lua5.2/manual.html x/usr/share/doc/lua5.2/readme.html "$OUT/lua/"
# games: the NetHack Guidebook and man page, OpenTTD's README, multiplayer guide (Markdown) and known bugs
gzip -dc x/usr/share/doc/nethack-common/Guidebook.txt.gz > "$OUT/games/nethack-Guidebook.txt"
render x/usr/share/man/man6/nethack.6.gz "$OUT/games/nethack.6.txt"
gzip -dc x/usr/share/doc/openttd/README.md.gz > "$OUT/games/openttd-README.md"
gzip -dc x/usr/share/doc/openttd/multiplayer.md.gz > "$OUT/games/openttd-multiplayer.md"
gzip -dc x/usr/share/doc/openttd/known-bugs.txt.gz > "$OUT/games/openttd-known-bugs.txt"
# governance: the Debian Constitution, Social Contract and Manifesto (plain text)
D=x/usr/share/doc/debian
gzip -dc "$D/constitution.txt.gz" > "$OUT/governance/constitution.txt"
gzip -dc "$D/social-contract.txt.gz" > "$OUT/governance/social-contract.txt"
gzip -dc "$D/debian-manifesto.gz" > "$OUT/governance/debian-manifesto.txt"
echo "corpus in $OUT: $(find "$OUT" -type f | wc -l) files"
