# hookgate — `make help` lists the targets.

GO       ?= go
BIN      := .local/bin
.DEFAULT_GOAL := help

.PHONY: help
help: ## list the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z0-9\/_-]+:.*## / {printf "  %-12s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

# LOCAL_DATABASE_URL is the Postgres `make run` starts in .local/pg (PGPort
# in internal/devlocal/local.go).
LOCAL_DATABASE_URL := postgres://postgres@127.0.0.1:54329/postgres?sslmode=disable

.PHONY: build
build: ## build ingest, worker and the local dev tool into .local/bin
	@echo "building ingest, worker and devtool into $(BIN) (the first build compiles every dependency: a minute or so)"
	$(GO) build -o $(BIN)/ ./cmd/ingest ./cmd/worker ./cmd/devtool

.PHONY: run
run: build ## run the whole system locally on 127.0.0.1 (HOOKGATE_RUN_HOST=0.0.0.0 for every interface), with its own Postgres in .local/pg when DATABASE_URL is unset
	@exec $(BIN)/devtool run --config hookgate.example.yaml --bin $(BIN)

.PHONY: claims
claims: ## worker claims $(ARGS) on the local system's database, e.g. make claims ARGS='list --status failed'
	@$(GO) build -o $(BIN)/ ./cmd/worker
	@DATABASE_URL='$(or $(DATABASE_URL),$(LOCAL_DATABASE_URL))' $(BIN)/worker --config hookgate.example.yaml claims $(or $(ARGS),--help)

.PHONY: send-demo
send-demo: ## send one signed demo event twice to the local ingest (ARGS='--fail 3': make the demo receiver fail for a while first, and send 3)
	@$(GO) build -o $(BIN)/ ./cmd/devtool
	@$(BIN)/devtool send --times 2 $(ARGS)

.PHONY: n8n-check
n8n-check: build ## check docs/n8n.md against a real n8n (installs n8n into .local/n8n: ~1.8 GB; not part of make test)
	@$(BIN)/devtool n8n-check --bin $(BIN)

.PHONY: lab
lab: build ## the Webhook Retry Lab: five designs (hookgate the fifth) against copies, a lost ack and crashes; writes .local/lab/report.html (docs/lab.md)
	@$(BIN)/devtool lab --bin $(BIN) $(ARGS)

# The deploy checks (kustomize, Prometheus rules) run no goroutines of ours,
# and their ~200 dependency packages (Kubernetes, kustomize, PromQL) are
# compiled once, for vet, rather than a second time under the race detector.
DEPLOY_PKGS := ./deploy/...

.PHONY: test
test: ## vet, then the whole suite under the race detector (deploy checks without it), against a real Postgres (started if none runs)
	$(GO) vet ./...
	$(GO) test -count=1 -timeout 5m $(DEPLOY_PKGS)
	$(GO) test -count=1 -race -timeout 15m $$($(GO) list ./... | grep -v '/deploy/')

.PHONY: test/race
test/race: test ## the same as test: every package of ours that runs goroutines already runs under the race detector

.PHONY: soak
soak: ## a soak with faults for SOAK_DURATION (default 10m; a fault every SOAK_FAULT_INTERVAL, default 1m), not part of test
	SOAK_DURATION=$${SOAK_DURATION:-10m} $(GO) test -tags soak -run '^TestSoak$$' -count=1 -v -timeout 0 ./internal/e2e

STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2

.PHONY: lint
lint: ## gofmt, go vet and staticcheck
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); exit 1; }
	$(GO) vet ./...
	$(GO) run $(STATICCHECK) ./...

.PHONY: fuzz
fuzz: ## run each fuzz target for FUZZTIME (default 30s); make test runs their seed corpora
	@for p in ./internal/verify ./internal/ingest; do \
		for f in $$($(GO) test -list '^Fuzz' $$p | grep ^Fuzz); do \
			$(GO) test $$p -run '^$$' -fuzz "^$$f$$" -fuzztime $${FUZZTIME:-30s} || exit 1; \
		done; \
	done

.PHONY: bench
bench: ## benchmarks with same-run baselines, the system's ratios last (docs/benchmarks.md; BENCH_* sizes)
	$(GO) test -run '^$$' -bench 'Verify' -benchtime 1x -timeout 10m ./internal/verify/
	$(GO) test -run '^$$' -bench . -skip System -benchtime 1x -timeout 60m ./internal/bench/...
	$(GO) test -run '^$$' -bench 'System' -benchtime 1x -timeout 30m ./internal/bench/...

.PHONY: clean
clean: ## stop the local Postgres if it still runs, then remove it and the built binaries
	@if [ -d .local/pg ]; then $(GO) run ./cmd/devtool stop; fi
	rm -rf .local
