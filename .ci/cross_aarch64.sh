#!/usr/bin/env bash
# Cross-compile puffercore's native sources for aarch64 (Linux), so that code which only
# builds on x86 (intrinsics, function clones, x86 target attributes) fails CI at once.
#
#   apt-get install -y gcc-aarch64-linux-gnu g++-aarch64-linux-gnu
#   .ci/cross_aarch64.sh            # every .c/.cpp in native/ and every header, -Werror
#   .ci/cross_aarch64.sh --cython   # also every .pyx, cythonized here and compiled at -O3
#                                   # against this host's Python and NumPy headers (minutes)
#
# Covered: each native/**/*.c and *.cpp compiled (-O3 -Wall -Werror, with the flags
# CMakeLists.txt gives them), and each header of native/ and ocean/ compiled alone in a
# file of its own. Not covered: linking, running, and (without --cython) the C that
# Cython generates from the .pyx files; --cython compiles that C too (without its
# targets' extra options), the host's pyconfig.h standing in for aarch64's (both are
# LP64 Linux).
set -euo pipefail
cd "$(dirname "$0")/.."

CC=${CROSS_CC:-aarch64-linux-gnu-gcc}
CXX=${CROSS_CXX:-aarch64-linux-gnu-g++}
for compiler in "$CC" "$CXX"; do
  command -v "$compiler" >/dev/null || {
    echo "cross_aarch64: $compiler not found (apt-get install gcc-aarch64-linux-gnu g++-aarch64-linux-gnu)" >&2
    exit 2
  }
done
cython=0
case "${1:-}" in
  "") ;;
  --cython) cython=1 ;;
  *) echo "cross_aarch64: unknown argument ${1} (expected nothing or --cython)" >&2; exit 2 ;;
esac

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# CMakeLists.txt's flags: C11 and C++20 with GNU extensions, -O3 (GCC's vectorizer crashes at -O3
# where -O2 passes), the MLP kernels' own options.
c_flags=(-std=gnu11 -O3 -Wall -Werror -Wno-unused-function -fPIC -Inative/include)
cxx_flags=(-std=gnu++20 -O3 -Wall -Werror -Wno-unused-function -fPIC -Inative/include)
mlp_flags=(-ffp-contract=off -fno-trapping-math)

build() {  # build KIND SOURCE LOG: one compile, its status in LOG.rc
  local kind=$1 source=$2 log=$3 flags=("${c_flags[@]}") compiler=$CC language=c
  case $kind in
    c) case $source in */mlp.c) flags+=("${mlp_flags[@]}") ;; esac ;;
    cxx|header-cxx) compiler=$CXX language=c++ flags=("${cxx_flags[@]}") ;;
  esac
  case $kind in
    c|cxx) "$compiler" "${flags[@]}" -I"$(dirname "$source")" -c "$source" -o "$log.o" ;;
    header-*) printf '#include "%s"\n' "$PWD/$source" >"$log.src"
              "$compiler" -x $language "${flags[@]}" -I"$(dirname "$source")" -c "$log.src" -o "$log.o" ;;
    pyx) local module cplus=() standard=-std=gnu11  # SOURCE is MODULE:PYX:LANGUAGE
         IFS=: read -r module source language <<<"$source"
         if [ "$language" = c++ ]; then cplus=(--cplus) compiler=$CXX standard=-std=gnu++20; fi
         python -m cython -3 "${cplus[@]}" --fast-fail -I native/include -I puffercore --module-name "$module" \
           -o "$log.gen" "$source" &&
           "$compiler" -x $language $standard -O3 -w -fPIC -c -o "$log.o" -I"$python_include" -I"$numpy_include" \
             -Inative/include -I"$(dirname "$source")" -DNPY_NO_DEPRECATED_API=NPY_1_7_API_VERSION "$log.gen" ;;
  esac >"$log" 2>&1
  echo $? >"$log.rc"
}

parallel=$(nproc)
entries=()  # "KIND SOURCE LOG" of every compile started
start() {
  local log
  log="$work/$(echo "$2" | tr '/.:' '___')"
  while [ "$(jobs -rp | wc -l)" -ge "$parallel" ]; do wait -n || true; done
  build "$1" "$2" "$log" &
  entries+=("$1 $2 $log")
}

while IFS= read -r source; do start c "$source"; done < <(find native -name '*.c' | sort)
while IFS= read -r source; do start cxx "$source"; done < <(find native -name '*.cpp' | sort)
while IFS= read -r source; do start header-c "$source"; done < <(find native ocean -name '*.h' | sort)
while IFS= read -r source; do start header-cxx "$source"; done < <(find native ocean -name '*.hpp' | sort)
if [ $cython = 1 ]; then
  python_include=$(python -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
  numpy_include=$(python -c 'import numpy; print(numpy.get_include())')
  while IFS= read -r extension; do start pyx "$extension"; done < <(python .ci/cython_extensions.py)
fi
wait

failed=0
for entry in "${entries[@]}"; do
  read -r kind source log <<<"$entry"
  if [ "$(cat "$log.rc" 2>/dev/null)" = 0 ]; then
    echo "ok      $kind $source"
  else
    echo "FAILED  $kind $source"
    sed 's/^/    /' "$log"
    failed=$((failed + 1))
  fi
done
echo "cross_aarch64: ${#entries[@]} compiled for aarch64 with $CC / $CXX, $failed failed"
[ $failed = 0 ]
