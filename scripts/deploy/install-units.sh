#!/usr/bin/env bash
# Installs the systemd units of deploy/systemd and, when there is none yet,
# /etc/tributary/tributary.env from deploy/tributary.env.example with a new random admin
# token. The units run TRIBUTARY_HOME (default /opt/tributary/current); when it does not
# exist it is made a link to this release. DESTDIR: put the units and the env file under
# another root (a package, a test); nothing is reloaded then.
set -euo pipefail
release=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd -P)
home=${TRIBUTARY_HOME:-/opt/tributary/current}
dest=${DESTDIR:-}

if [[ ! -e $home ]]; then
  mkdir -p "$(dirname "$home")"
  ln -s "$release" "$home"
  echo "linked $home to $release"
fi

install -d -m 0755 "$dest/etc/systemd/system" "$dest/etc/tributary"
for unit in tributary-serve@.service tributary-worker@.service; do
  target=$dest/etc/systemd/system/$unit
  sed "s#/opt/tributary/current#$home#g" "$release/deploy/systemd/$unit" >"$target.new"
  chmod 0644 "$target.new"
  mv "$target.new" "$target"
  echo "installed $target"
done

env_file=$dest/etc/tributary/tributary.env
if [[ -e $env_file ]]; then
  echo "kept $env_file"
else
  token=tbadm_$(head -c 32 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=\n')
  (
    umask 077
    sed "s#@ADMIN_TOKEN@#$token#" "$release/deploy/tributary.env.example" >"$env_file.new"
    mv "$env_file.new" "$env_file"
  )
  echo "wrote $env_file with a new admin token: set DATABASE_URL and REDIS_URL in it, then give every machine this same file"
fi

if [[ -z $dest ]]; then
  if ! id tributary >/dev/null 2>&1; then
    useradd --system --user-group --home-dir /var/lib/tributary --no-create-home --shell /usr/sbin/nologin tributary
    echo "created the system user tributary"
  fi
  systemctl daemon-reload
fi
