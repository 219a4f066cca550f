#!/usr/bin/env bash
# Bring a fresh Debian machine (as root) to the state probegate needs: a Docker engine that
# runs no bridge network, a loopback-only redis-server, the offline sandbox image, Debian's
# docker-registry binary (its system service left stopped and disabled), and Debian's Chromium
# with its chromedriver (the HTML report's browser test).
# Idempotent: every step checks before it acts, so running it twice costs a few seconds.
#
#   deploy/provision.sh            # engine + redis + image
#   deploy/provision.sh --no-redis # engine + image only
#   deploy/provision.sh --no-image # engine + redis: the image comes from the installed wheel's `gate setup`
#                                  # (.ci/run), which runs the same offline script, shipped in the package
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
want_redis=1
want_image=1
for arg in "$@"; do
  case "$arg" in
    --no-redis) want_redis=0 ;;
    --no-image) want_image=0 ;;
    *) echo "provision.sh: unknown argument $arg" >&2; exit 64 ;;
  esac
done

log() { printf 'provision: %s\n' "$*" >&2; }

need_pkgs=()
command -v dockerd >/dev/null 2>&1 || need_pkgs+=(docker.io)
command -v debootstrap >/dev/null 2>&1 || need_pkgs+=(debootstrap)
# For its binary only: the tests start private registries on loopback (run images by registry).
[ -x /usr/bin/docker-registry ] || need_pkgs+=(docker-registry)
# The browser test names these paths itself, so Selenium never downloads a browser or a driver.
[ -x /usr/bin/chromium ] || need_pkgs+=(chromium)
[ -x /usr/bin/chromedriver ] || need_pkgs+=(chromium-driver)
# The system Python's venv: CI installs the built wheel with it (.ci/wheel), as `pipx install` does here.
/usr/bin/python3 -c 'import ensurepip, venv' 2>/dev/null || need_pkgs+=(python3-venv)
if [ "$want_redis" = 1 ]; then
  command -v redis-server >/dev/null 2>&1 || need_pkgs+=(redis-server)
fi
if [ ${#need_pkgs[@]} -gt 0 ]; then
  if [ "$(id -u)" != 0 ]; then
    log "missing ${need_pkgs[*]} and not root: install them, then re-run"; exit 69
  fi
  log "installing ${need_pkgs[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need_pkgs[@]}" >/dev/null
  if [[ " ${need_pkgs[*]} " == *" docker-registry "* ]]; then
    # The package enables a system registry on :5000 of every interface: keep it stopped and off.
    if command -v systemctl >/dev/null 2>&1; then
      systemctl disable docker-registry >/dev/null 2>&1 || true
      if [ -d /run/systemd/system ]; then systemctl stop docker-registry >/dev/null 2>&1 || true; fi
    else
      update-rc.d docker-registry disable >/dev/null 2>&1 || true
    fi
    /etc/init.d/docker-registry stop >/dev/null 2>&1 || true
  fi
fi

# dockerd: no default bridge and no iptables rules; probe containers use network_mode="none".
if ! docker info >/dev/null 2>&1; then
  log "starting dockerd (--bridge=none --iptables=false)"
  setsid dockerd --bridge=none --iptables=false >/var/log/probegate-dockerd.log 2>&1 < /dev/null &
  for _ in $(seq 1 60); do
    docker info >/dev/null 2>&1 && break
    sleep 1
  done
  docker info >/dev/null 2>&1 || { log "dockerd did not come up; see /var/log/probegate-dockerd.log"; exit 69; }
fi

if [ "$want_redis" = 1 ] && ! redis-cli -h 127.0.0.1 -p 6379 ping >/dev/null 2>&1; then
  log "starting redis-server on 127.0.0.1:6379"
  redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save "" --appendonly no >/dev/null
fi

# The image's definition is package data (worker/host/sandbox_image); `gate setup` uses the same script.
if [ "$want_image" = 1 ]; then
  "$here/worker/host/sandbox_image/build-offline.sh"
fi
