#!/usr/bin/env bash
# Fetch the JVM jars of scripts/jars.tsv from Maven Central into .jars/ (git-ignored) and check
# each against its pinned SHA-256. A jar already present with the right checksum is not fetched
# again; the missing single artifacts are downloaded in one Maven run, then each is checked and
# placed. Maven's own cache is project-local too (.cache/m2). Three kinds of rows:
#   group:artifact:version                       one jar, .jars/<artifact>-<version>.jar
#   group:artifact:version:tar.gz:plugin         a Kafka Connect plugin archive, checked, then
#                                                unpacked into .jars/connect-plugins/<artifact>-<version>/
#   group:artifact:version:tar.gz|zip[:CLASSIFIER]  any other archive, checked, then unpacked into
#                                                .jars/<artifact>-<version>[-<classifier>]/ (a .sha256
#                                                stamp in the folder, written last)
#   tree:scripts/poms/<name>.xml                 a pom's whole runtime dependency tree, copied into
#                                                .jars/<name>/; the third column names the file of
#                                                pinned SHA-256s every copied jar must match
#   shade:scripts/poms/<name>.xml                a jar the set-up builds with Maven from Central
#                                                artifacts (a re-shade), .jars/<finalName>.jar; the
#                                                third column is its SHA-256 (the build is reproducible)
#   bash scripts/fetch_jars.sh [SET ...]     default sets: spark metastore trino
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
log() { printf '[jars] %s\n' "$*" >&2; }

sets=("$@")
[ ${#sets[@]} -gt 0 ] || sets=(spark metastore trino)
dest=.jars
m2="${WORKBOOK_M2:-$ROOT/.cache/m2}"   # Maven's local repository (project-local by default)
mkdir -p "$dest" "$m2"
fetched=0
need_mvn() {
  command -v mvn >/dev/null 2>&1 || { log "Maven (mvn) is needed to fetch $1: apt-get install maven"; exit 1; }
}
mvn_run() {  # mvn_run WHAT ARGS...: Maven with the project-local repository; on failure its errors
  local what="$1" out
  shift
  # shellcheck disable=SC2086 # WORKBOOK_MVN_FLAGS: extra Maven flags, e.g. -o (offline)
  if ! out=$(mvn -B -q ${WORKBOOK_MVN_FLAGS:-} -Dmaven.repo.local="$m2" "$@" 2>&1); then
    log "Failed to fetch $what with Maven:"
    printf '%s\n' "$out" | grep -E 'ERROR' | head -5 >&2
    exit 1
  fi
}
tree_ok() {  # tree_ok DIR SUMS: every pinned jar present with its checksum, and no other jar
  local dir="$1" sums="$2"
  [ -d "$dir" ] || return 1
  (cd "$dir" && sha256sum --quiet -c "$ROOT/$sums" >/dev/null 2>&1) || return 1
  [ "$(find "$dir" -maxdepth 1 -name '*.jar' | wc -l)" = "$(grep -c . "$sums")" ]
}
fetch_tree() {  # fetch_tree POM SUMS
  local pom="$1" sums="$2" name dir
  name="$(basename "$pom" .xml)"
  dir="$dest/$name"
  tree_ok "$dir" "$sums" && return 0
  need_mvn "the $name tree ($pom)"
  log "fetching the dependency tree of $pom from Maven Central"
  rm -rf "$dir"
  # -C: Central's own checksums too (a tree's jars all have them; single artifacts are checked
  # against their pinned SHA-256 only, since some archives, e.g. the Apicurio converter's, have none)
  mvn_run "$pom" -C -f "$ROOT/$pom" dependency:copy-dependencies -DincludeScope=runtime \
    -DoutputDirectory="$ROOT/$dir"
  if ! tree_ok "$dir" "$sums"; then
    log "Failed to verify the $name tree against $sums (a jar differs, is missing or is extra):"
    (cd "$dir" && sha256sum -c "$ROOT/$sums" 2>&1 | grep -v ': OK$' | head -5) >&2 || true
    rm -rf "$dir"
    exit 1
  fi
  fetched=$((fetched + 1))
}
shade_jar() {  # shade_jar POM SHA: build the pom's jar in a scratch copy, check it, place it
  local pom="$1" sha="$2" name work jar
  name="$(sed -n 's:.*<finalName>\(.*\)</finalName>.*:\1:p' "$pom" | head -1)"
  jar="$dest/$name.jar"
  [ -f "$jar" ] && [ "$(sha256sum "$jar" | cut -d' ' -f1)" = "$sha" ] && return 0
  need_mvn "$pom"
  log "building $name.jar from $pom with Maven"
  work="$dest/.shade-$$"
  rm -rf "$work" && mkdir -p "$work" && cp "$pom" "$work/pom.xml"
  mvn_run "$pom" -f "$ROOT/$work/pom.xml" package
  got="$(sha256sum "$work/target/$name.jar" | cut -d' ' -f1)"
  if [ "$got" != "$sha" ]; then
    rm -rf "$work"
    log "Failed to verify $name.jar built from $pom: sha256 $got, expected $sha (scripts/jars.tsv)"
    exit 1
  fi
  mv "$work/target/$name.jar" "$jar"
  rm -rf "$work"
  fetched=$((fetched + 1))
}
unpacked_dir() {  # unpacked_dir COORDS: where an archive row is unpacked
  local group artifact version type classifier
  IFS=: read -r group artifact version type classifier <<<"$1"
  if [ "$classifier" = plugin ]; then
    printf '%s' "$dest/connect-plugins/$artifact-$version"
  else
    printf '%s' "$dest/$artifact-$version${classifier:+-$classifier}"
  fi
}
present() {  # present COORDS SHA: the jar, or the unpacked archive, is in place and checked
  local coords="$1" sha="$2" group artifact version type classifier jar
  IFS=: read -r group artifact version type classifier <<<"$coords"
  if [ "${type:-jar}" = jar ]; then
    jar="$dest/$artifact-$version${classifier:+-$classifier}.jar"
    [ -f "$jar" ] && [ "$(sha256sum "$jar" | cut -d' ' -f1)" = "$sha" ]
  else
    [ "$(cat "$(unpacked_dir "$coords")/.sha256" 2>/dev/null || true)" = "$sha" ]
  fi
}
batch="$dest/.batch-$$"  # what prefetch downloaded in one Maven run, moved into place by fetch_artifact
trap 'rm -rf "$batch"' EXIT
prefetch() {  # prefetch COORDS...: the missing single artifacts in one Maven run (one JVM start
  # and one resolution instead of one per artifact; transitive dependencies excluded, as
  # dependency:copy does); each file is then checked and placed by fetch_artifact
  local coords group artifact version type classifier deps=""
  [ $# -gt 1 ] || return 0  # one artifact: dependency:copy is as quick
  need_mvn "$*"
  for coords in "$@"; do
    IFS=: read -r group artifact version type classifier <<<"$coords"
    deps+="<dependency><groupId>$group</groupId><artifactId>$artifact</artifactId><version>$version</version>"
    deps+="<type>${type:-jar}</type>${classifier:+<classifier>$classifier</classifier>}"
    deps+="<exclusions><exclusion><groupId>*</groupId><artifactId>*</artifactId></exclusion></exclusions></dependency>"
  done
  rm -rf "$batch" && mkdir -p "$batch"
  printf '%s' "<project xmlns=\"http://maven.apache.org/POM/4.0.0\"><modelVersion>4.0.0</modelVersion>
<groupId>local.workbook</groupId><artifactId>jar-batch</artifactId><version>0</version><packaging>pom</packaging>
<dependencies>$deps</dependencies></project>" > "$batch/pom.xml"
  log "fetching $# artifacts from Maven Central in one run"
  mvn_run "$# artifacts" -f "$ROOT/$batch/pom.xml" dependency:copy-dependencies \
    -DoutputDirectory="$ROOT/$batch/files" -Dmdep.overWriteReleases=true
}
fetch_artifact() {  # fetch_artifact COORDS SHA
  local coords="$1" sha="$2" group artifact version type classifier base file got into outdir
  present "$coords" "$sha" && return 0
  IFS=: read -r group artifact version type classifier <<<"$coords"
  type="${type:-jar}"
  base="$artifact-$version${classifier:+-$classifier}"
  if [ "$type" = jar ]; then
    file="$dest/$base.jar"
    outdir="$dest"
  else  # an archive: present once unpacked with its stamp; the download itself is temporary
    into="$(unpacked_dir "$coords")"
    outdir="$dest/.download-$$"
    file="$outdir/$base.$type"
    rm -rf "$outdir" && mkdir -p "$outdir"
  fi
  rm -f "$file"
  if [ -f "$batch/files/$base.$type" ]; then
    mv "$batch/files/$base.$type" "$file"
  else
    need_mvn "$coords"
    log "fetching $coords from Maven Central"
    mvn_run "$coords" dependency:copy -Dartifact="$coords" -DoutputDirectory="$ROOT/$outdir" \
      -Dmdep.overWriteReleases=true
  fi
  got="$(sha256sum "$file" | cut -d' ' -f1)"
  if [ "$got" != "$sha" ]; then
    rm -f "$file"
    [ "$type" = jar ] || rm -rf "$outdir"
    log "Failed to verify $coords: sha256 $got, expected $sha (scripts/jars.tsv); the file was removed"
    exit 1
  fi
  fetched=$((fetched + 1))
  [ "$type" = jar ] && return 0
  rm -rf "$into" "$into.partial" && mkdir -p "$into.partial"
  case "$type" in
    tar.gz|tgz) tar --no-same-owner -xzf "$file" -C "$into.partial" ;;
    zip) unzip -q "$file" -d "$into.partial" ;;
    *) rm -rf "$outdir"; log "Failed to unpack $coords: unknown packaging $type (use jar, tar.gz or zip)"; exit 1 ;;
  esac
  echo "$sha" > "$into.partial/.sha256"  # the stamp last: a half-unpacked folder is never used
  mv "$into.partial" "$into"
  rm -rf "$outdir"
  log "unpacked $coords into $into/"
}
rows=()  # the wanted rows of scripts/jars.tsv, as "coords<TAB>sha"
while IFS=$'\t' read -r set coords sha; do
  case "$set" in ''|'#'*) continue ;; esac
  for s in "${sets[@]}"; do [ "$s" = "$set" ] && rows+=("$coords"$'\t'"$sha") && break; done
done < scripts/jars.tsv
missing=()
for row in "${rows[@]}"; do
  IFS=$'\t' read -r coords sha <<<"$row"
  case "$coords" in tree:*|shade:*) ;; *) present "$coords" "$sha" || missing+=("$coords") ;; esac
done
prefetch "${missing[@]}"
for row in "${rows[@]}"; do
  IFS=$'\t' read -r coords sha <<<"$row"
  case "$coords" in
    tree:*) fetch_tree "${coords#tree:}" "$sha" ;;
    shade:*) shade_jar "${coords#shade:}" "$sha" ;;
    *) fetch_artifact "$coords" "$sha" ;;
  esac
done
[ "$fetched" = 0 ] || log "fetched $fetched item(s) into $dest/"
