# Drover's tasks. `make help` lists them.
GO        ?= go
BIN       ?= bin
FUZZTIME  ?= 30s
FUZZMINTIME ?= 10s
PKGS      := ./...
STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2
DEADCODE    := golang.org/x/tools/cmd/deadcode@v0.52.0

.DEFAULT_GOAL := help

.PHONY: help
help: ## Show the targets and what they do
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  \033[36m%-10s\033[0m %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: build
build: ## Build controller, worker, demo-agent and fleetsim into bin/
	$(GO) build -o $(BIN)/ ./cmd/controller ./cmd/worker ./cmd/demo-agent ./cmd/fleetsim

.PHONY: chromium
chromium: ## Install Debian's chromium for the console's browser tests, if missing
	@./scripts/chromium.sh

.PHONY: test
test: chromium ## Run every test, unit and e2e, with the race detector (what CI runs)
	$(GO) test -race -count=1 -timeout 30m $(PKGS)

.PHONY: test-race
test-race: test ## Same as test: the race detector is always on

.PHONY: test-short
test-short: ## Run the unit tests only (no e2e), quickly
	$(GO) test -short -count=1 $(PKGS)

.PHONY: e2e
e2e: chromium ## Run the end-to-end tests verbosely, with the full chaos run (DROVER_CHAOS_SEED=N replays one)
	DROVER_CHAOS=full $(GO) test -count=1 -timeout 30m -v ./e2e/...

.PHONY: lint
lint: ## gofmt, go vet, staticcheck and deadcode (no function that nothing, not even a test, reaches)
	@out=$$(gofmt -l $$(git ls-files -co --exclude-standard '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)
	$(GO) run $(STATICCHECK) $(PKGS)
	@out=$$($(GO) run $(DEADCODE) -test $(PKGS)) || exit 1; if [ -n "$$out" ]; then echo "unreachable:"; echo "$$out"; exit 1; fi

.PHONY: fuzz
fuzz: ## Run every fuzz target for FUZZTIME each (default 30s)
	FUZZTIME=$(FUZZTIME) FUZZMINTIME=$(FUZZMINTIME) ./scripts/fuzz.sh

.PHONY: bench
bench: chromium ## Run every benchmark scenario several times and print median/min/max per figure (docs/benchmarks.md)
	GO=$(GO) ./scripts/bench.sh

.PHONY: bench-scale
bench-scale: ## The scale scenario as specified: a 10,000-task flow against a 1,000-task one, one run (~10 min)
	GO=$(GO) BENCH_ONLY=scale BENCH_SCALE_TASKS=10000 BENCH_COUNT_SCALE=1 BENCH_OUT=bin/bench-scale.txt ./scripts/bench.sh

.PHONY: bench-fleet
bench-fleet: build ## The fleet simulator at the issue's sizes: 1,000 workers × 4 slots, 1,000 to 100,000 tasks (docs/benchmarks.md; about 1.5 h here)
	BIN=$(BIN) ./scripts/bench-fleet.sh

.PHONY: screenshots
screenshots: chromium ## Take the console's screenshots for docs/console.md (a live flow in headless Chromium)
	DROVER_SCREENSHOTS=$(CURDIR)/docs/console $(GO) test -count=1 -run 'TestConsoleScreenshots' -v ./e2e/

.PHONY: demo
demo: build ## Run the demo flow: embedded NATS, controller, 2 workers, the demo agent, a throwaway repo
	BIN=$(BIN) ./scripts/demo.sh

.PHONY: clean
clean: ## Remove build output
	rm -rf $(BIN)
