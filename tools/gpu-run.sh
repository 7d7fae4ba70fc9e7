#!/bin/bash
# The GPU checks in one go, for a machine with an NVIDIA GPU and no build of
# its own (docs/Performance.md, "Running on a GPU"):
#
#   tools/gpu-run.sh pack [BUILD]  here: builds what the GPU machine runs
#                                  in BUILD (default build-gpu, configured
#                                  with -DKVQ_HOST_CPU=x86-64-v3 where it is
#                                  new) and copies it into .gpu/ (about 30
#                                  MB), with the GPU model of the
#                                  benchmark's four shapes, computed here on
#                                  the PTX interpreter (15 minutes: the
#                                  quantized attend programs' cells are
#                                  slow to interpret)
#   tools/gpu-run.sh run [LOGS]    there, in the repository's root, .gpu/
#                                  carried: the CUDA tests, then kvq-bench
#                                  --device cuda at the four shapes with the
#                                  model's time beside each measured cell;
#                                  logs into LOGS (default $OUT, else
#                                  /tmp/gpu-run). About 4 minutes.
#
# The binaries look for their artifacts and the runtime library under the
# absolute path of BUILD: `run` links that path to .gpu/build where it does
# not exist. Artifacts hold host code for the build's host CPU, which the
# runtime refuses on another: hence x86-64-v3 (AVX2), which any GPU host
# runs.
set -euo pipefail

PACK=.gpu
SHAPES=(--contexts "4096,32768" --batches "1,8")
BENCH_SPECS=(fp16-gqa kivi-2bit-gqa innerq-base-gqa)
# The quantized specs' attend kernels built as programs, beside the emitted
# ones (`<cache>@programs` in the tables).
PROGRAM_SPECS=(kivi-2bit-gqa innerq-base-gqa)

bench_artifacts() {
  local build=$1
  for spec in "${BENCH_SPECS[@]}"; do
    echo "$build/tools/kvq-bench/kvq_bench_$spec.kvq"
  done
  for spec in "${PROGRAM_SPECS[@]}"; do
    echo "$build/tools/kvq-bench/programs/kvq_bench_$spec.kvq"
  done
}

pack() {
  local build=${1:-build-gpu}
  if [ ! -f "$build/build.ninja" ]; then
    local python=python3
    [ -x build/venv/bin/python ] && python=$PWD/build/venv/bin/python
    cmake -G Ninja -S . -B "$build" -DCMAKE_BUILD_TYPE=Release \
      -DKVQ_HOST_CPU=x86-64-v3 -DPython_EXECUTABLE="$python" >/dev/null
  fi
  ninja -C "$build" kvq-bench EndToEndTests EngineApiTests PTXInterpTests
  build=$(realpath "$build")
  rm -rf "$PACK"
  mkdir -p "$PACK/build"
  echo "$build" >"$PACK/build-dir"
  (
    cd "$build"
    cp -a --parents bin/kvq-bench runtime/libkvq_runtime.so* \
      test/unittests/EndToEnd/EndToEndTests \
      test/unittests/EndToEnd/EngineApiTests \
      test/unittests/EndToEnd/*.kvq \
      test/unittests/PTXInterp/PTXInterpTests \
      tools/kvq-bench/*.kvq tools/kvq-bench/programs "$OLDPWD/$PACK/build/"
  )
  echo "gpu-run: modelling the four shapes on the PTX interpreter" >&2
  local artifacts
  mapfile -t artifacts < <(bench_artifacts "$build")
  "$build/bin/kvq-bench" --gpu-model "${SHAPES[@]}" "${artifacts[@]}" \
    >"$PACK/model.txt"
  du -sh "$PACK"
}

# The decode-attention rows of a CUDA run with the model's time of the same
# call beside each: "model 180.8 us".
join_model() {
  awk 'FNR == NR {
         if ($3 == "call") {
           split($2, shape, "/")
           model[$1 " " shape[1] " " shape[2]] = $14
         }
         next
       }
       /^decode attention/ { decode = 1 }
       /^append/ { decode = 0 }
       { key = $1 " " $2 " " $3
         if (decode && key in model)
           print $0 "   model " model[key] " us"
         else
           print }' "$PACK/model.txt" -
}

run() {
  local logs=${1:-${OUT:-/tmp/gpu-run}} build
  build=$(cat "$PACK/build-dir")
  if [ ! -e "$build" ]; then
    mkdir -p "$(dirname "$build")"
    ln -s "$PWD/$PACK/build" "$build"
  fi
  mkdir -p "$logs"
  nvidia-smi >"$logs/gpu.txt" 2>&1 || true
  local status=0
  for test in EndToEnd/EndToEndTests EndToEnd/EngineApiTests \
    PTXInterp/PTXInterpTests; do
    timeout 300 "$build/test/unittests/$test" --gtest_filter='*Cuda*' \
      --gtest_brief=1 >>"$logs/tests.txt" 2>&1 || status=1
  done
  tail -n 3 "$logs/tests.txt"
  cp "$PACK/model.txt" "$logs/model.txt"
  local artifacts
  mapfile -t artifacts < <(bench_artifacts "$build")
  timeout 300 "$build/bin/kvq-bench" --device cuda --steps 0 "${SHAPES[@]}" \
    "${artifacts[@]}" 2>&1 | join_model | tee "$logs/bench.txt" || status=1
  return $status
}

case "${1:-}" in
pack) pack "${2:-}" ;;
run) run "${2:-}" ;;
*)
  sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'
  exit 2
  ;;
esac
