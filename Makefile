# gotpu — `make` prints this help. Everything runs on a fresh machine with only the Go toolchain
# (cgo via gcc for the XLA path); nothing is downloaded at run time.

GO        ?= go
PKGS      ?= ./...
BENCHTIME ?= 1x
OUT       ?= out

.DEFAULT_GOAL := help

.PHONY: help
help:
	@echo "gotpu make targets:"
	@echo "  make demo       the main job: train a small GPT-2 on Go's own sources on the embedded pure-Go backend"
	@echo "  make test       everything CI checks: gofmt, go vet (all build tags), go test, go test -race, noxla build"
	@echo "  make test-race  go test -race ./..."
	@echo "  make bench      benchmarks: gotpu CPU backend vs simplego vs PyTorch, training steps, stock vs gotpu gradients, heap, replicas, fsdp vs data parallel, gradient checkpointing's memory, loader overlap, checkpoint save vs disk, tokenizer vs HF, start cost (compile, cache load) per backend"
	@echo "  make bench-pytorch  only the first: tokens/s of gotpu's CPU backend, simplego and PyTorch on the benchmark GPT-2, and the ratios"
	@echo "  make bench-jax  GPT-2 124M steps on XLA's CPU plugin through gotpu vs JAX on XLA CPU vs gotpu's backend (scripts/setup-jax-bench.sh first)"
	@echo "  make bench-124m only the second: GPT-2 124M steps, gotpu float32/bf16 vs PyTorch float32/bf16 autocast: ms/step, tokens/s, peak RSS, FMA peak (~15 min)"
	@echo "  make lint       gofmt, go vet and staticcheck (pinned in go.mod, config in staticcheck.conf)"
	@echo "  make install-xla-cpu  XLA's CPU PJRT plugin (pinned wheel) where --device cpu finds it; the PJRT tests run on it"
	@echo "  make build      go build ./... with and without the noxla tag"
	@echo "  make golden     rewrite testdata/golden (StableHLO of the 8-replica and FSDP GPT-2 train steps) after an intended change"

.PHONY: build
build:
	$(GO) build $(PKGS)
	$(GO) build -tags noxla $(PKGS)
	$(GO) build -o bin/gotpu ./cmd/gotpu

.PHONY: lint
lint:
	@unformatted=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$unformatted" ]; then echo "gofmt needed:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet $(PKGS)
	$(GO) vet -tags noxla $(PKGS)
	# The HF Rust tokenizer adapter needs a Rust static library that is not built here: type-check it.
	$(GO) vet -tags hftokenizers ./data/...
	$(GO) tool staticcheck $(PKGS)
	$(GO) tool staticcheck -tags noxla $(PKGS)

# The -race pass builds with go-xla's race_mu tag: go-xla's per-P arena pool excludes other
# goroutines by pinning to a P, which the race detector cannot see, so without the tag it reports
# races between a PJRT call and the buffer cleanups Go 1.26 runs on other goroutines; race_mu adds
# the mutex that shows the detector that ordering (go-xla internal/pool/race.go).
#
# Tests named *OnXLACPU execute programs on XLA's CPU PJRT plugin (install-xla-cpu): they run in
# the first pass and are left out of the -race pass, where the race detector cannot see into the
# plugin's C++ and would only double their time; the runtime's own PJRT tests run in both.
# The first pass runs verbose into $(OUT)/test.log and prints the package lines, every skipped or
# failed test and every *OnXLACPU test that passed, so that CI's log shows the PJRT tests running;
# on a failure, the failing tests' output follows.
.PHONY: test
test: lint build
	@mkdir -p $(OUT)
	@$(GO) test -count=1 -v $(PKGS) > $(OUT)/test.log 2>&1; status=$$?; \
	grep -E '^(ok|FAIL|panic:|--- (FAIL|SKIP)|--- PASS: [A-Za-z0-9_]*(OnXLACPU|CPUPlugin[A-Za-z0-9_]*))' $(OUT)/test.log; \
	if [ $$status -ne 0 ]; then grep -B2 -A40 -E '^[[:space:]]*--- FAIL' $(OUT)/test.log | head -600; fi; \
	echo "go test (verbose log in $(OUT)/test.log): exit $$status"; exit $$status
	$(GO) test -count=1 -tags noxla ./xla/... ./cmd/...
	$(GO) test -count=1 -race -tags race_mu -skip OnXLACPU $(PKGS)

# The golden StableHLO of the replicated train step: rewritten from the program traced now (no
# device or plugin needed), then checked again; review the diff before committing it.
.PHONY: golden
golden:
	$(GO) test -count=1 -run 'ReplicatedStepGolden|FSDPStepGolden' ./trainer/step -update
	$(GO) test -count=1 -run 'ReplicatedStep|FSDPStep' ./trainer/step

# XLA's own CPU PJRT plugin (the pinned xla-cpu-pjrt wheel) into ~/.local/lib/go-xla, where
# `gotpu --device cpu` finds it; idempotent. CI runs it before `make test`.
.PHONY: install-xla-cpu
install-xla-cpu:
	bash scripts/install-xla-cpu.sh

.PHONY: test-race
test-race:
	$(GO) test -count=1 -race -tags race_mu -skip OnXLACPU $(PKGS)

# Benchmarks report ratios against baselines measured in the same run (gotpu's CPU backend vs
# simplego vs PyTorch, stock vs gotpu gradients, 1 vs 8 replicas, fsdp vs data parallel on 8,
# prefetch vs none, Go vs HF's Rust tokenizer). The full set takes ~25 minutes; `make bench-pytorch`
# runs only the first (~3).
.PHONY: bench
bench: bench-pytorch bench-124m bench-jax
	$(GO) test -run '^$$' -bench 'TrainStep|DotGradientSpeedup|HeapGrowth' -benchtime 3x -timeout 60m ./trainer/step
	$(GO) test -run '^$$' -bench RSSFlat -benchtime 1x -timeout 30m ./trainer/step
	$(GO) test -run '^$$' -bench Replicas -benchtime 5x -timeout 30m ./trainer/step
	$(GO) test -run '^$$' -bench FSDPvsDataParallel -benchtime 1x -timeout 30m ./trainer/step
	$(GO) test -run '^$$' -bench GradientCheckpointing -benchtime 1x -timeout 60m ./trainer/step
	$(GO) test -run '^$$' -bench LoaderOverlap -benchtime 100x ./data
	$(GO) test -run '^$$' -bench StreamParquet3GB -benchtime 1x -timeout 30m ./data
	$(GO) test -run '^$$' -bench PipelineOverlap -benchtime 1x ./trainer
	$(GO) test -run '^$$' -bench BenchmarkSave -benchtime 1x ./checkpoint
	$(GO) test -run '^$$' -bench BenchmarkCheckpointBlocking -benchtime 1x ./trainer
	$(GO) test -run '^$$' -bench LoRAvsFull -benchtime 1x -timeout 30m ./trainer
	$(GO) test -run '^$$' -bench StartCost -benchtime 1x -timeout 30m ./trainer/step
	data/tokenizer/bench/compare.sh

# Issue #37's comparison against the same compiler: GPT-2 124M float32 (bench-124m's model, step and
# batch) trained by gotpu on XLA's CPU PJRT plugin (1 device), by JAX on its CPU backend
# (trainer/step/testdata/jax/bench_jax_gpt2.py, jax 0.8.1 in the venv of scripts/setup-jax-bench.sh)
# and by gotpu's pure-Go backend, each its own process, on one fixed batch: medians of BENCH_ROUNDS
# rounds of ms/step, tokens/s, CPU s/step, first-step/compile s, peak RSS, the ratios (goal
# gotpu-xla/jax-xla >= 0.95) and the loss trajectories. Skips without the plugin or the venv.
.PHONY: plan-fit
# Issue #40: gotpu plan's memory model against XLA's compiled figures for Llama-3.1-8B cut to 1, 2
# and 4 layers on 8 XLA CPU devices (compile only; about 15 minutes). GOTPU_PLAN_FIT_OUT=FILE
# records the figures (testdata/plan/fit/fit.py refits the coefficients from them).
plan-fit:
	$(GO) test -run '^$$' -bench 'PlanFitLlama8BCuts' -benchtime 1x -timeout 120m -v ./trainer

.PHONY: bench-jax
bench-jax:
	GOTPU_BENCH_ROUNDS=$(BENCH_ROUNDS) $(GO) test -run '^$$' -bench 'XLACPUVsJAX' -benchtime 1x -timeout 120m ./trainer/step

# Issue #22's comparison at real model size: GPT-2 124M (trainer/step/testdata/gpt2_124m_config.json,
# HF init, dropout 0, batch 2 x seq 512, AdamW, clipping 1.0), each run its own process: gotpu's CPU
# backend in float32 and bf16 mixed precision, PyTorch (bench_124m.py) in float32 and bf16 autocast;
# medians of BENCH_ROUNDS rounds of ms/step, tokens/s and peak RSS, gotpu's GFLOP/s against the FMA
# peak measured in the same run, the same-run ratios, and the bf16 loss after 20 steps vs float32's.
BENCH_ROUNDS ?= 3
.PHONY: bench-124m
bench-124m:
	GOTPU_BENCH_ROUNDS=$(BENCH_ROUNDS) $(GO) test -run '^$$' -bench 'GPT2Small' -benchtime 1x -timeout 120m ./trainer/step

# Issue #7's comparison: the benchmark GPT-2 (vocab 8192, d 256, 4 layers, 4 heads, batch 8 x seq
# 128, AdamW, f32) trained on gotpu's CPU backend, on simplego and, when Debian's python3-torch is
# installed, in PyTorch (trainer/step/testdata/pytorch/bench_train.py), in one run: tokens/s of each
# and the ratios gotpu/simplego and gotpu/PyTorch.
.PHONY: bench-pytorch
bench-pytorch:
	$(GO) test -run '^$$' -bench 'VsPyTorch' -benchtime 1x -timeout 30m ./trainer/step

# The main job: train a small GPT-2 from scratch on the Go standard library's sources on the
# embedded pure-Go backend (a few minutes on 2 cores), report held-out perplexity, generate code.
DEMO_STEPS ?= 200
# It builds only the two binaries it runs, in one go build (make build would compile every
# package twice, with and without noxla, before the demo starts).
.PHONY: demo
demo:
	$(GO) build -o bin/ ./cmd/gotpu ./examples/gpt2-go-code
	./bin/gotpu devices
	./bin/gpt2-go-code -max_steps $(DEMO_STEPS) -output_dir $(OUT)/gpt2-go-code
