# Shared bits for scripts/*: sourced, not run.
# shellcheck shell=bash

DOCSPARSE_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# Downloads, the test venv and ccache live outside the repo so that a fresh
# clone (as CI makes) reuses them.
DOCSPARSE_CACHE="${DOCSPARSE_CACHE:-$HOME/.cache/docsparse}"
DOCSPARSE_TEST_VENV="$DOCSPARSE_CACHE/test-venv"
# KServe's own SDK pins a protobuf that grpcio-tools in the test venv cannot
# share: it gets a venv of its own.
DOCSPARSE_KSERVE_VENV="$DOCSPARSE_CACHE/kserve-venv"
export DOCSPARSE_ROOT DOCSPARSE_CACHE DOCSPARSE_TEST_VENV DOCSPARSE_KSERVE_VENV

# log TAG MESSAGE...: one line on stdout, e.g. "setup: model: up to date".
log() {
  local tag="$1"
  shift
  printf '%s: %s\n' "$tag" "$*"
}

die() {
  log "$@" >&2
  exit 1
}

# Seconds since the epoch; for the "done in Ns" lines.
now_s() { date +%s; }

# Runs a command as root: directly when we are root, else through sudo.
as_root() {
  if [[ $(id -u) -eq 0 ]]; then
    "$@"
  else
    sudo "$@"
  fi
}

# A python3 with pip, preferring Debian's (python3-pip) over one on PATH.
pip_python() {
  local candidate
  for candidate in /usr/bin/python3 python3; do
    if "$candidate" -m pip --version >/dev/null 2>&1; then
      printf '%s\n' "$candidate"
      return 0
    fi
  done
  return 1
}
