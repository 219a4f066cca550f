#!/usr/bin/env bash
# Build the sandbox image with no registry: debootstrap Debian trixie from the mirror this
# machine's apt already uses, add the faketime preload, and `docker import` the tree under TAG.
# Same content as the Dockerfile beside this script. Skips the build when TAG already exists
# (--force rebuilds; --tag NAME builds under another tag). `gate setup` runs this script from the
# installed package where no registry is reachable; deploy/provision.sh runs it from a checkout.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
tag="$(cat "$here/TAG")"
force=0
while [ $# -gt 0 ]; do
  case "$1" in
    --force) force=1 ;;
    --tag) tag="${2:?--tag needs a name}"; shift ;;
    *) echo "build-offline.sh: unknown argument $1" >&2; exit 64 ;;
  esac
  shift
done

log() { printf 'sandbox-image: %s\n' "$*" >&2; }

if [ "$force" = 0 ] && docker image inspect "$tag" >/dev/null 2>&1; then
  log "$tag present ($(docker image inspect -f '{{.Id}}' "$tag"))"
  exit 0
fi
command -v debootstrap >/dev/null 2>&1 || { log "debootstrap is not installed (apt-get install debootstrap)"; exit 69; }

mirror=""
if [ -f /etc/apt/sources.list.d/debian.sources ]; then
  mirror="$(awk '/^URIs:/{print $2; exit}' /etc/apt/sources.list.d/debian.sources)"
fi
if [ -z "$mirror" ] && [ -f /etc/apt/sources.list ]; then
  mirror="$(awk '$1=="deb"{for(i=2;i<=NF;i++) if ($i ~ /^[a-z]+:\/\//) {print $i; exit}}' /etc/apt/sources.list)"
fi
[ -n "$mirror" ] || { log "no Debian mirror found in the apt sources"; exit 69; }

rootfs="$(mktemp -d /var/tmp/probegate-rootfs.XXXXXX)"
trap 'rm -rf "$rootfs"' EXIT
log "debootstrap trixie into $rootfs (about 30-60 s)"
debootstrap --variant=minbase --include=python3,libfaketime trixie "$rootfs" "$mirror" >"$rootfs.log" 2>&1 \
  || { log "debootstrap failed; last lines:"; tail -n 20 "$rootfs.log" >&2; exit 69; }
rm -f "$rootfs.log"

preload="$(cd "$rootfs" && find usr/lib -name libfaketime.so.1 -path '*faketime*' | head -n 1)"
[ -n "$preload" ] || { log "libfaketime.so.1 missing from the rootfs"; exit 69; }
echo "/$preload" > "$rootfs/etc/ld.so.preload"
rm -rf "$rootfs"/var/cache/apt/* "$rootfs"/var/lib/apt/lists/* "$rootfs"/usr/share/doc/* \
       "$rootfs"/usr/share/man/* "$rootfs"/var/log/*

tar --numeric-owner -C "$rootfs" -c . | docker import \
  --change 'ENV FAKETIME_DONT_FAKE_MONOTONIC=1' \
  --change 'ENV PYTHONDONTWRITEBYTECODE=1' \
  --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  --change 'USER 65534:65534' \
  --change 'CMD ["python3"]' \
  - "$tag" >/dev/null
log "built $tag offline from $mirror ($(docker image inspect -f '{{.Id}}' "$tag"))"
