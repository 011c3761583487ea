#!/usr/bin/env bash
# The one script a lent GPU machine runs (an H100 or H200 with 16 cores and no network),
# in at most 9 minutes: build puffercore from source with nvcc, the `gpu` tests, then
# bench/bench_gpu.py; every log lands under $OUT (at most 8 files come back).
#
# The machine's image has torch, numpy, cloudpickle, cython, scikit-build-core and
# opencv but not gymnasium or ale-py: they travel as wheels in .whl/ (ignored by git).
# Once, in the checkout's root, on a machine with pip's network:
#   echo /.whl/ >> .git/info/exclude
#   python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
#     --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
#     -d .whl gymnasium==1.4.0 farama-notifications==0.0.4 ale-py==0.12.1
# Then the device tool's run: command "bash .ci/device_check.sh", carry [".whl"], timeout_s 590.
# bench_gpu.py --quick instead of the full tables: DEVICE_BENCH_ARGS=--quick.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/device_check}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 CMAKE_BUILD_PARALLEL_LEVEL=$(nproc)
BUDGET=530  # seconds for everything, inside the device call's limit
left() { echo $((BUDGET - SECONDS)); }
status=0

{
  date -u
  nvidia-smi -L
  nproc
  python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, torch.cuda.get_device_name())"
} > "$OUT/machine.txt" 2>&1

# Dependencies the image lacks, then puffercore itself (nvcc builds the CUDA kernels).
{
  if ls .whl/*.whl > /dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl
  else
    echo "no .whl/ carried: gymnasium and ale-py must already be installed (see the header of $0)"
  fi
  # Editable, as in development: the source folder is the package, the extensions come from build/.
  PYTHONPATH=/tmp/site timeout "$(left)" python3 -m pip install --no-index --no-deps --no-build-isolation \
    -v -e . 2>&1 | grep -E "puffercore:|rror|Successfully" || true
} > "$OUT/build.log" 2>&1
export PYTHONPATH=/tmp/site
if ! python3 -c "import puffercore._engine, puffercore.vector" >> "$OUT/build.log" 2>&1; then
  echo "device_check: the build failed (build.log)"
  exit 1
fi
python3 -c "from puffercore import advantage; advantage._cuda_library(); print('CUDA advantage kernel loaded')" \
  >> "$OUT/build.log" 2>&1 || status=1
echo "build done at ${SECONDS}s"

# The CUDA paths' tests; files whose imports need packages the image lacks are reported, not fatal.
timeout "$(left)" python3 -m pytest -m gpu -q -p no:cacheprovider --continue-on-collection-errors tests \
  > "$OUT/gpu_tests.log" 2>&1 || status=1
tail -n 3 "$OUT/gpu_tests.log"
echo "gpu tests done at ${SECONDS}s"

timeout "$(left)" python3 bench/bench_gpu.py ${DEVICE_BENCH_ARGS:-} --json "$OUT/bench_gpu.json" \
  > "$OUT/bench_gpu.log" 2>&1 || status=1
cat "$OUT/bench_gpu.log"
echo "bench_gpu done at ${SECONDS}s; exit $status"
exit $status
