#!/usr/bin/env bash
# Times the README's first command on a fresh Debian 12 system: a minimal bookworm chroot made
# with debootstrap (installed here if missing), a clone of this repository's HEAD inside it,
# and the command run there from nothing (apt, cold compiler cache, build, compare). Run as
# root; needs the Debian mirror. Usage: bash scripts/time-first-command.sh [chroot dir]
set -euo pipefail
cd "$(dirname "$0")/.."
root=${1:-/tmp/stratagem-fresh-bookworm}
if [ -e "$root" ]; then
  echo "scripts/time-first-command.sh: $root exists; give a new directory" >&2
  exit 2
fi
command -v debootstrap > /dev/null || {
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap
}
debootstrap --variant=minbase bookworm "$root" http://deb.debian.org/debian > "$root.debootstrap.log"
cp /etc/resolv.conf "$root/etc/"
mount -t proc proc "$root/proc"
mount --bind /dev "$root/dev"
trap 'umount "$root/dev" "$root/proc"' EXIT
git clone -q "$PWD" "$root/root/stratagem"
first=$(grep -m1 'compare default' README.md)
echo "running in $root: $first"
start=$(date +%s)
chroot "$root" /bin/bash -c "cd /root/stratagem && $first" > "$root.first-command.log" 2>&1
end=$(date +%s)
tail -n 12 "$root.first-command.log"
echo "first command: $((end - start)) s on $(nproc) cores (log: $root.first-command.log)"
