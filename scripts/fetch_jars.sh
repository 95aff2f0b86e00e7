#!/usr/bin/env bash
# Fetch the JVM jars of scripts/jars.tsv from Maven Central into .jars/ (git-ignored) and check
# each against its pinned SHA-256. A jar already present with the right checksum is not fetched
# again. Maven's own cache is project-local too (.cache/m2).
# Coordinates are group:artifact:version for a jar, or group:artifact:version:PACKAGING[:CLASSIFIER]
# for an archive (tar.gz or zip): the archive is checked, then unpacked into
# .jars/<artifact>-<version>[-<classifier>]/ with its SHA-256 in that folder's .sha256 (the
# archive itself stays only in Maven's cache).
#   bash scripts/fetch_jars.sh [SET ...]     default sets: spark metastore
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
log() { printf '[jars] %s\n' "$*" >&2; }

sets=("$@")
[ ${#sets[@]} -gt 0 ] || sets=(spark metastore)
dest=.jars
m2="${WORKBOOK_M2:-$ROOT/.cache/m2}"   # Maven's local repository (project-local by default)
mkdir -p "$dest" "$m2"
fetched=0
while IFS=$'\t' read -r set coords sha; do
  case "$set" in ''|'#'*) continue ;; esac
  wanted=0
  for s in "${sets[@]}"; do [ "$s" = "$set" ] && wanted=1; done
  [ "$wanted" = 1 ] || continue
  IFS=: read -r _group artifact version packaging classifier <<<"$coords"
  packaging="${packaging:-jar}"
  base="$artifact-$version${classifier:+-$classifier}"
  file="$dest/$base.$packaging"
  if [ "$packaging" = jar ]; then
    if [ -f "$file" ] && [ "$(sha256sum "$file" | cut -d' ' -f1)" = "$sha" ]; then
      continue
    fi
    outdir="$dest"
  else
    unpacked="$dest/$base"
    if [ -d "$unpacked" ] && [ "$(cat "$unpacked/.sha256" 2>/dev/null)" = "$sha" ]; then
      continue
    fi
    outdir="$dest/.download-$$"
    file="$outdir/$base.$packaging"
    mkdir -p "$outdir"
  fi
  command -v mvn >/dev/null 2>&1 || { log "Maven (mvn) is needed to fetch $coords: apt-get install maven"; exit 1; }
  log "fetching $coords from Maven Central"
  rm -f "$file"
  # shellcheck disable=SC2086 # WORKBOOK_MVN_FLAGS: extra Maven flags, e.g. -o (offline)
  if ! out=$(mvn -B -q ${WORKBOOK_MVN_FLAGS:-} -Dmaven.repo.local="$m2" dependency:copy \
        -Dartifact="$coords" -DoutputDirectory="$ROOT/$outdir" -Dmdep.overWriteReleases=true 2>&1); then
    log "Failed to fetch $coords with Maven:"
    printf '%s\n' "$out" | grep -E 'ERROR' | head -5 >&2
    [ "$packaging" = jar ] || rm -rf "$outdir"
    exit 1
  fi
  got="$(sha256sum "$file" | cut -d' ' -f1)"
  if [ "$got" != "$sha" ]; then
    rm -f "$file"
    [ "$packaging" = jar ] || rm -rf "$outdir"
    log "Failed to verify $coords: sha256 $got, expected $sha (scripts/jars.tsv); the file was removed"
    exit 1
  fi
  if [ "$packaging" != jar ]; then
    rm -rf "$unpacked.partial" "$unpacked"
    mkdir -p "$unpacked.partial"
    case "$packaging" in
      tar.gz|tgz) tar --no-same-owner -xzf "$file" -C "$unpacked.partial" ;;
      zip) unzip -q "$file" -d "$unpacked.partial" ;;
      *) log "Failed to unpack $coords: unknown packaging $packaging (use jar, tar.gz or zip)"; exit 1 ;;
    esac
    printf '%s\n' "$sha" > "$unpacked.partial/.sha256"
    mv "$unpacked.partial" "$unpacked"
    rm -rf "$outdir"
  fi
  fetched=$((fetched + 1))
done < scripts/jars.tsv
[ "$fetched" = 0 ] || log "fetched $fetched jar(s) or archive(s) into $dest/"
