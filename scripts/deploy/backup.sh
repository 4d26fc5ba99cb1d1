#!/usr/bin/env bash
# A backup into DIR (default: the current directory); prints the file's path.
# PostgreSQL (DATABASE_URL set): pg_dump's custom format, taken while the service runs.
# PGlite (no DATABASE_URL): an archive of DATA_DIR, whose process must be stopped.
# The file holds the installation's keys (table instance_secrets): guard it like them.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=env.sh
. "$(dirname "${BASH_SOURCE[0]}")/env.sh"

dir=${1:-.}
umask 077
mkdir -p "$dir"
stamp=$(date -u +%Y%m%dT%H%M%SZ)
file=
trap '[[ -z $file ]] || rm -f -- "$file.part"' EXIT
if [[ -n ${DATABASE_URL:-} ]]; then
  file=$dir/tributary-$stamp.dump
  pg_dump --format=custom --file="$file.part" --dbname="$DATABASE_URL"
else
  data=${DATA_DIR:-.tributary}
  [[ -d $data/pgdata ]] || die "no PGlite database in DATA_DIR $data"
  # The lock file (src/db/data-dir-lock.ts) names the process that has the directory open.
  if [[ -e $data/lock ]]; then
    pid=$(sed -n 's/.*"pid":\([0-9]*\).*/\1/p' "$data/lock")
    host=$(sed -n 's/.*"host":"\([^"]*\)".*/\1/p' "$data/lock")
    if [[ $host != "$(uname -n)" || -d /proc/${pid:-0} ]]; then
      die "DATA_DIR $data is in use by process ${pid:-?} on ${host:-?}: stop it first"
    fi
  fi
  file=$dir/tributary-$stamp.tar.gz
  tar -czf "$file.part" -C "$data" --exclude=./lock .
fi
mv "$file.part" "$file"
echo "$file"
