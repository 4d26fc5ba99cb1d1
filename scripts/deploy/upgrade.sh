#!/usr/bin/env bash
# A rolling upgrade of this machine's instances to the release this script belongs to
# (installed beside the running one, in a directory of its own):
#   1. apply the migrations with it (PostgreSQL), which also checks the settings against it;
#   2. point TRIBUTARY_HOME (default /opt/tributary/current), when it is a link, at it;
#   3. restart the units given, one at a time. After a serve unit, wait until it is ready
#      (READY_URL, {instance}: its port; at most READY_TIMEOUT seconds) and SETTLE_SECONDS
#      more for the balancer to see it, so that at most one instance is out at a time.
# A step that fails stops the upgrade before the next one.
#   scripts/deploy/upgrade.sh tributary-serve@8080 tributary-worker@1
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=env.sh
. "$(dirname "${BASH_SOURCE[0]}")/env.sh"

(($# > 0)) || die "usage: upgrade.sh UNIT..."
release=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd -P)
home=${TRIBUTARY_HOME:-/opt/tributary/current}
ready_url=${READY_URL:-'http://127.0.0.1:{instance}/readyz'}
ready_timeout=${READY_TIMEOUT:-120}
settle=${SETTLE_SECONDS:-5}

if [[ -n ${DATABASE_URL:-} ]]; then
  "$release/node_modules/.bin/node" "$release/bin/tributary.js" migrate
else
  echo "no DATABASE_URL (PGlite): the restart applies the migrations"
fi

if [[ -L $home ]]; then
  # A new link renamed over the old one: the units never see a missing path.
  ln -sfn "$release" "$home.new"
  mv -T "$home.new" "$home"
  echo "$home -> $release"
else
  echo "$home is not a link: the units run it as it is"
fi

for unit in "$@"; do
  echo "restarting $unit"
  systemctl restart "$unit"
  [[ $unit == tributary-serve@* ]] || continue
  instance=${unit#*@}
  url=${ready_url//\{instance\}/${instance%.service}}
  deadline=$((SECONDS + ready_timeout))
  until curl --silent --fail --output /dev/null --max-time 5 "$url"; do
    ((SECONDS < deadline)) || die "$unit is not ready after $ready_timeout s ($url): the upgrade stops here"
    sleep 1
  done
  echo "$unit is ready"
  sleep "$settle"
done
