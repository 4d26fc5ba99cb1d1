# shellcheck shell=bash
# Sourced by the scripts beside it. Exports the settings of /etc/tributary/tributary.env
# (TRIBUTARY_ENV_FILE: another file), the file the systemd units read, except those the
# environment already sets: `DATABASE_URL=... scripts/deploy/restore.sh FILE` restores
# into another database than the file names.

die() {
  echo "${0##*/}: $*" >&2
  exit 1
}

load_tributary_env() {
  local file=${TRIBUTARY_ENV_FILE:-/etc/tributary/tributary.env} line key value
  [[ -e $file ]] || return 0
  [[ -r $file ]] || die "cannot read $file (run as root?)"
  while IFS= read -r line || [[ -n $line ]]; do
    [[ $line =~ ^[[:space:]]*([A-Za-z_][A-Za-z0-9_]*)=(.*)$ ]] || continue
    key=${BASH_REMATCH[1]}
    value=${BASH_REMATCH[2]}
    # systemd takes one pair of quotes around a value off.
    if [[ $value =~ ^\"(.*)\"$ || $value =~ ^\'(.*)\'$ ]]; then value=${BASH_REMATCH[1]}; fi
    [[ -v $key ]] || export "$key=$value"
  done <"$file"
}

load_tributary_env
