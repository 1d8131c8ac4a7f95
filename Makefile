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
	@echo "  make demo       the main job: build gotpu, list devices, run training steps on the embedded pure-Go backend"
	@echo "  make test       everything CI checks: gofmt, go vet (all build tags), go test, go test -race, noxla build"
	@echo "  make test-race  go test -race ./..."
	@echo "  make bench      benchmarks (training-step throughput, stock vs gotpu gradients, heap)"
	@echo "  make lint       gofmt and go vet only"
	@echo "  make build      go build ./... with and without the noxla tag"

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

.PHONY: test
test: lint build
	$(GO) test -count=1 $(PKGS)
	$(GO) test -count=1 -tags noxla ./xla/... ./cmd/...
	$(GO) test -count=1 -race $(PKGS)

.PHONY: test-race
test-race:
	$(GO) test -count=1 -race $(PKGS)

.PHONY: bench
bench:
	$(GO) test -run '^$$' -bench . -benchtime $(BENCHTIME) -timeout 60m ./xla/...

.PHONY: demo
demo: build
	./bin/gotpu devices
	$(GO) test -run '^$$' -bench 'TrainStep/gpt2-bench/gotpu' -benchtime 5x -timeout 30m ./xla/...
