#!/usr/bin/env bash
# Installs the client package from the working tree into a venv and runs its
# tests against the real server (ctest's python_client_package).
#
#   client/python/tests/run_tests.sh --python VENV/bin/python
#       [--server-binary build/server/docsparse-server] [--model-repository models]
#       [UNITTEST_ARGS...]     e.g. test_client.ClientTest.test_overflow
#
# The venv ($DOCSPARSE_CACHE/client-venv, made by scripts/setup) holds
# grpcio-tools and the runtime dependencies; the package itself is rebuilt and
# reinstalled on every run (--no-deps --no-build-isolation: a second or two),
# from a copy of client/python made without its build outputs, so that what is
# tested is the current source and the working tree gets no build/ or
# *.egg-info. The tests run from outside the source tree, so `import
# docsparse` is the installed package.
set -euo pipefail

package_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source_dir="$(cd "$package_dir/../.." && pwd)"
python=""
server_binary="$source_dir/build/server/docsparse-server"
model_repository="$source_dir/models"
while (($# > 0)); do
  case "$1" in
    --python) python="$2"; shift 2 ;;
    --server-binary) server_binary="$2"; shift 2 ;;
    --model-repository) model_repository="$2"; shift 2 ;;
    *) break ;;
  esac
done
[[ -n $python ]] || { echo "run_tests.sh: --python is required" >&2; exit 2; }
[[ -x $python ]] || { echo "run_tests.sh: $python missing; run scripts/setup" >&2; exit 2; }
# Absolute, as the tests run from elsewhere; without resolving links (a
# venv's python is one).
python="$(realpath --no-symlinks "$python")"
server_binary="$(realpath --no-symlinks "$server_binary")"
model_repository="$(realpath --no-symlinks "$model_repository")"

work="$(mktemp -d "${TMPDIR:-/tmp}/docsparse-client-test.XXXXXX")"
trap 'rm -rf "$work"' EXIT
mkdir "$work/src"
tar -C "$package_dir" --exclude=./build --exclude=./dist --exclude='*.egg-info' \
  --exclude=./docsparse/_proto --exclude=__pycache__ -cf - . | tar -C "$work/src" -xf -

echo "run_tests.sh: installing client/python into $("$python" -c 'import sys; print(sys.prefix)')"
DOCSPARSE_PROTO_DIR="$source_dir/proto" "$python" -m pip install --quiet --no-input \
  --disable-pip-version-check --no-deps --no-build-isolation --force-reinstall "$work/src"

cd "$work"
"$python" -c 'import docsparse; print("run_tests.sh: testing docsparse", docsparse.__version__, "at", docsparse.__file__)'
export DOCSPARSE_SOURCE_DIR="$source_dir"
export DOCSPARSE_SERVER_BINARY="$server_binary"
export DOCSPARSE_MODEL_REPOSITORY="$model_repository"
tests_dir="$package_dir/tests"
if (($# > 0)); then
  PYTHONPATH="$tests_dir" "$python" -m unittest -v "$@"
else
  PYTHONPATH="$tests_dir" "$python" -m unittest discover -v -s "$tests_dir" -t "$tests_dir"
fi
