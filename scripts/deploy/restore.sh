#!/usr/bin/env bash
# Restores a file of backup.sh into an empty database (DATABASE_URL) or, for PGlite, an
# empty DATA_DIR. Stop every process of the installation first; start them afterwards.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=env.sh
. "$(dirname "${BASH_SOURCE[0]}")/env.sh"

file=${1:?usage: restore.sh FILE}
[[ -r $file ]] || die "cannot read $file"
magic=$(head -c 5 "$file")
if [[ -n ${DATABASE_URL:-} ]]; then
  [[ $magic == PGDMP ]] || die "$file is not a pg_dump archive (a PGlite backup? unset DATABASE_URL)"
  tables=$(psql --no-psqlrc --tuples-only --no-align --dbname="$DATABASE_URL" \
    --command="select count(*) from pg_tables where schemaname = 'public'")
  [[ $tables == 0 ]] || die "the database of DATABASE_URL has $tables tables: restore into a new, empty database"
  pg_restore --exit-on-error --single-transaction --no-owner --no-privileges --dbname="$DATABASE_URL" "$file"
else
  [[ $magic != PGDMP ]] || die "$file is a PostgreSQL dump: set DATABASE_URL"
  data=${DATA_DIR:-.tributary}
  [[ ! -e $data || -z $(ls -A "$data") ]] || die "DATA_DIR $data is not empty: restore into a new, empty directory"
  mkdir -p "$data"
  chmod 0700 "$data"
  tar -xzf "$file" -C "$data"
fi
echo "restored $file"
