# hookgate — `make help` lists the targets.

GO       ?= go
BIN      := .local/bin
.DEFAULT_GOAL := help

.PHONY: help
help: ## list the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z\/_-]+:.*## / {printf "  %-12s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: build
build: ## build ingest, worker and the local dev tool into .local/bin
	$(GO) build -o $(BIN)/ ./cmd/ingest ./cmd/worker ./cmd/devtool

.PHONY: run
run: build ## run the whole system locally (a throwaway Postgres in .local/pg when DATABASE_URL is unset)
	@exec $(BIN)/devtool run --config hookgate.example.yaml --bin $(BIN)

.PHONY: send-demo
send-demo: ## send one signed demo event twice to the local ingest
	@$(GO) build -o $(BIN)/ ./cmd/devtool
	@$(BIN)/devtool send --times 2

.PHONY: test
test: ## vet, then the whole suite under the race detector, against a real Postgres (started if none runs)
	$(GO) vet ./...
	$(GO) test -count=1 -race -timeout 15m ./...

.PHONY: test/race
test/race: test ## the same as test: every package already runs under the race detector

STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2

.PHONY: lint
lint: ## gofmt, go vet and staticcheck
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); exit 1; }
	$(GO) vet ./...
	$(GO) run $(STATICCHECK) ./...

.PHONY: fuzz
fuzz: ## run each fuzz target for FUZZTIME (default 30s)
	@for f in $$($(GO) test -list '^Fuzz' ./internal/verify | grep ^Fuzz); do \
		$(GO) test ./internal/verify -run '^$$' -fuzz "^$$f$$" -fuzztime $${FUZZTIME:-30s} || exit 1; \
	done

.PHONY: bench
bench: ## ingest and worker benchmarks with same-run baselines (docs/benchmarks.md; BENCH_* sizes)
	$(GO) test -run '^$$' -bench . -benchtime 1x -timeout 30m ./internal/bench/...

.PHONY: clean
clean: ## remove built binaries and the local Postgres
	rm -rf .local
