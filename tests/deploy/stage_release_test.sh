#!/usr/bin/env bash
# scripts/stage-release, the Dockerfile builder's last step, run on CI's own
# build tree (--no-build), checked independently of how it works: the staged
# server starts, and every library the staged binaries load is a file of one
# of the packages runtime-packages.txt lists (dpkg -L), or was staged, so the
# runtime stage's `apt-get install` of that list gives the binaries all they
# need. No Docker engine runs here; this is the part of the image build that
# can run without one.
#
#   stage_release_test.sh BUILD_DIR
set -euo pipefail
build_dir="$1"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0
fail() {
  echo "stage_release_test: FAIL: $*" >&2
  failures=$((failures + 1))
}

DOCSPARSE_BUILD_DIR="$build_dir" "$root/scripts/stage-release" --no-build "$work/out"
out="$work/out"

for program in docsparse-server docsparse; do
  [[ -x $out/bin/$program ]] || fail "$program not staged"
done
"$out/bin/docsparse-server" --version >/dev/null || fail "staged docsparse-server does not start"

# The libraries the build is about, by the packages that must carry them.
# A build on the PyPI wheel's LibTorch (scripts/build --cuda) ships LibTorch,
# and the BLAS inside it, staged under root/ instead of Debian's libtorch and
# OpenBLAS.
patterns=('^libgrpc\+\+1\.' '^libprotobuf[0-9]' '^libabsl[0-9]' '^libcpp-httplib')
torch_dir=$(sed -n 's/^Torch_DIR:PATH=//p' "$build_dir/CMakeCache.txt")
if [[ $torch_dir == /usr/* ]]; then
  patterns+=('^libtorch[0-9]' '^libopenblas0-openmp$')
else
  [[ -n $(find "$out/root" -name 'libtorch_cpu.so*' -print -quit 2>/dev/null) ]] ||
    fail "LibTorch from $torch_dir is not staged under root/"
fi
for pattern in "${patterns[@]}"; do
  grep -Eq "$pattern" "$out/runtime-packages.txt" ||
    fail "runtime-packages.txt has no package matching $pattern"
done
if grep -E -- '-dev(:|$)' "$out/runtime-packages.txt"; then
  fail "development packages in the runtime list"
fi

# Every resolved library, as a file some listed package installs.
mapfile -t packages <"$out/runtime-packages.txt"
dpkg -L "${packages[@]}" 2>/dev/null | sort -u >"$work/files.txt"
libraries=0
for binary in "$out"/bin/*; do
  ldd "$binary" | awk '$2 == "=>" && $3 ~ /^\// {print $3}'
done | sort -u >"$work/libraries.txt"
while read -r library; do
  libraries=$((libraries + 1))
  real=$(readlink -f "$library")
  found=0
  for candidate in "$library" "$real" "${library#/usr}" "${real#/usr}" "/usr$library" "/usr$real"; do
    if grep -qxF "$candidate" "$work/files.txt" || [[ -e $out/root$candidate ]]; then
      found=1
      break
    fi
  done
  ((found)) || fail "$library ($real) is in no listed package and was not staged"
done <"$work/libraries.txt"

((libraries > 20)) || fail "only $libraries libraries resolved; ldd output not parsed?"
if ((failures)); then
  echo "stage_release_test: $failures failed"
  exit 1
fi
echo "stage_release_test: $libraries libraries, each in one of the ${#packages[@]} listed" \
  "packages or staged; the staged server starts"
