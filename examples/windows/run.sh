#!/usr/bin/env bash
# Run the windows example end to end: an ordinary repository (src/ layout, PyYAML and dateutil
# from PyPI through a hashed lock) gated as a team would gate it. Each patch is committed over the
# base in a throwaway repository (patch_repo.py); `gate run --base` builds or finds the project
# image from the base's lock, then `gate accept --base` decides. No --seal/--card: gate.toml names them.
#
#   examples/windows/run.sh                       # the good patch
#   examples/windows/run.sh naive_windows         # one named patch
#   examples/windows/run.sh --all                 # every patch, then a table
#   examples/windows/run.sh --all --broker URL    # trials on gate-worker processes over Redis
#   examples/windows/run.sh paired/slips          # the paired suite (paired.toml) on one of its patches
#   examples/windows/run.sh --paired              # both of the paired suite's patches, then a table
#
# With --broker, results count only from workers enrolled in the registry $PROBEGATE_WORKERS names
# (`gate workers enrol`); without one, the run and accept are both told --allow-unenrolled-workers (a
# loopback broker on this machine), and the card records it.
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
top="$(cd "$here/../.." && pwd)"
cd "$top"

which="${1:-good}"
broker=()
told=()
if [ "${2:-}" = "--broker" ]; then
  broker=(--broker "${3:?--broker needs a redis:// URL}")
  # Each repository is a throwaway folder, so only a registry named in the environment can be found.
  if [ -z "${PROBEGATE_WORKERS:-}" ]; then broker+=(--allow-unenrolled-workers); told=(--allow-unenrolled-workers); fi
fi

if ! docker info >/dev/null 2>&1 || ! docker image inspect "$(cat sandbox_images/python/TAG)" >/dev/null 2>&1; then
  bash deploy/provision.sh --no-redis || exit $?
fi
if [ ! -x .venv/bin/gate ]; then
  python3 -m venv .venv && .venv/bin/pip install -q --disable-pip-version-check -e . || exit 69
fi
gate="$top/.venv/bin/gate"

run_one() {  # $1 = patch name (paired/NAME: run paired.toml, not gate.toml); sets last_rc, last_acc, last_kinds
  local tmp repo base suite=() card=.probegate/verdict-card.json
  case "$1" in paired/*) suite=(--suite paired.toml) card=.probegate/paired/verdict-card.json ;; esac
  tmp="$(mktemp -d /tmp/probegate-windows.XXXXXX)"
  repo="$tmp/repo"
  base="$(python3 "$here/patch_repo.py" "$repo" "$1")" || return 69
  (cd "$repo" && "$gate" --log-level warning run "${suite[@]}" --base "$base" --new-ledger "${broker[@]}")
  last_rc=$?
  (cd "$repo" && "$gate" accept "${suite[@]}" --base "$base" "${told[@]}" >/dev/null 2>&1)
  last_acc=$?
  mkdir -p "$top/artifacts/windows/$1"
  cp "$repo/$card" "$top/artifacts/windows/$1/" 2>/dev/null
  last_kinds="$(python3 -c 'import json,sys; c=json.load(open(sys.argv[1])); print(" ".join(sorted({r["kind"] for r in c["properties"]})), "oracle_edits:", ",".join(c.get("new_oracle_edits", [])) or "-")' "$repo/$card" 2>/dev/null)"
  rm -rf "$tmp"
}

case "$which" in
  --all | --paired)
    folder="$here/patches"
    [ "$which" = --paired ] && folder="$here/patches/paired"
    for diff in "$folder"/*.diff; do
      name="$(basename "$diff" .diff)"
      [ "$which" = --paired ] && name="paired/$name"
      run_one "$name" >/dev/null 2>&1
      printf '%-16s run exit %s  accept exit %s  kinds: %s\n' "$name" "$last_rc" "$last_acc" "$last_kinds"
    done
    ;;
  *) [ -f "$here/patches/$which.diff" ] || { echo "no patch named $which (have: $(cd "$here/patches" && ls *.diff | sed 's/\.diff$//' | tr '\n' ' '))" >&2; exit 64; }
     run_one "$which"
     echo "$which: gate run exit $last_rc, accept exit $last_acc ($last_kinds)" >&2 ;;
esac
