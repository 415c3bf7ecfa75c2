#!/usr/bin/env bash
# The Battle for Wesnoth's German campaign catalogues (EN-DE sentence pairs, ../shared/DATA.md):
# downloads the 16 campaign packages (~132 MB of .deb) without installing the game, keeps their
# German .mo files (a few MB) in $CTGRAD_DATA/wesnoth/de (CTGRAD_DATA: /var/cache/ctgrad), and
# removes the packages. Idempotent: does nothing when the catalogues are there.
set -euo pipefail
dest=${CTGRAD_DATA:-/var/cache/ctgrad}/wesnoth/de
campaigns=(did dm dw ei httt l low nr sof sota sotbe thot trow tsg ttb utbs)
if [ -d "$dest" ] && [ "$(ls "$dest"/*.mo 2>/dev/null | wc -l)" -ge ${#campaigns[@]} ]; then
  echo "setup_wesnoth: $(ls "$dest"/*.mo | wc -l) catalogues in $dest, nothing to do"
  exit 0
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
packages=()
for c in "${campaigns[@]}"; do packages+=("wesnoth-1.16-$c"); done
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
download() { apt-get download "${packages[@]}" 2>&1 | grep -v "^W: Download is performed unsandboxed" || true; }
download
if [ "$(ls ./*.deb 2>/dev/null | wc -l)" -ne ${#campaigns[@]} ]; then  # stale package lists: refresh once
  $sudo apt-get update -qq
  download
fi
[ "$(ls ./*.deb 2>/dev/null | wc -l)" -eq ${#campaigns[@]} ] || { echo "setup_wesnoth: apt-get download of ${packages[*]} failed" >&2; exit 1; }
for d in ./*.deb; do dpkg-deb --fsys-tarfile "$d" | tar -x --wildcards '*/de/LC_MESSAGES/*.mo'; done
$sudo mkdir -p "$(dirname "$dest")"
$sudo chown "$(id -u)" "$(dirname "$dest")"
mkdir -p "$dest.tmp"
find . -path '*/de/LC_MESSAGES/*.mo' -exec cp {} "$dest.tmp/" \;
rm -rf "$dest" && mv "$dest.tmp" "$dest"
echo "setup_wesnoth: $(ls "$dest"/*.mo | wc -l) catalogues in $dest"
