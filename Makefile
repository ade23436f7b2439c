# cardshop — `make help` lists the targets.
SHELL := /bin/bash
GO ?= go
GOLANGCI_LINT := github.com/golangci/golangci-lint/v2/cmd/golangci-lint@v2.15.0

# Development secrets for `make run` only: the service refuses to start without secrets, and
# these are public, so the real adapters refuse them (`cardshop secrets` prints fresh ones).
DEV_ENV := CARDSHOP_ADMIN_TOKEN=dev-admin-token-change-me \
	CARDSHOP_PAYMENT_SECRET=dev-payment-secret-change-me \
	CARDSHOP_TOKEN_SECRET=dev-token-secret-change-me

.DEFAULT_GOAL := help

.PHONY: help
help: ## list the targets
	@grep -E '^[a-zA-Z_-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-12s %s\n", $$1, $$2}'

# The real adapters refuse published secrets: `make run-real` reads this machine's own, made by
# `cardshop secrets` on first use and kept (git-ignored, readable by you only), so that the codes
# it encrypted stay readable from one run to the next.
DEV_SECRETS := .dev-secrets.env

.PHONY: run
run: ## run the service on the in-memory adapters (http://127.0.0.1:8080) with demo products, dev secrets, the dev payment provider, a Mailpit inbox (http://127.0.0.1:8025); CARDSHOP_ACCESS_LOG=true logs each request
	@$(GO) build -o bin/cardshop ./cmd/cardshop
	@$(DEV_ENV) CARDSHOP_DEV_PAYMENTS=true CARDSHOP_DEMO=true GO=$(GO) scripts/with-mailpit.sh bin/cardshop serve

$(DEV_SECRETS):
	@umask 077 && $(GO) run ./cmd/cardshop secrets > $@.tmp && mv $@.tmp $@
	@echo "wrote $@: this machine's secrets for make run-real (set -a; . ./$@; set +a to use them in a shell)"

.PHONY: run-real
run-real: $(DEV_SECRETS) ## run the service on Redis + MariaDB (database test) + RabbitMQ, with this machine's secrets from .dev-secrets.env
	@if [ -x .ci/services.sh ] && [ -z "$$CARDSHOP_MYSQL_DSN" ]; then bash .ci/services.sh; fi
	set -a && . ./$(DEV_SECRETS) && set +a && CARDSHOP_ADAPTERS=real CARDSHOP_MIGRATE=true $(GO) run ./cmd/cardshop serve

.PHONY: migrate
migrate: ## apply the MySQL schema to CARDSHOP_MYSQL_DSN (default: root@127.0.0.1:3306/test)
	$(GO) run ./cmd/cardshop migrate

.PHONY: build
build: ## build bin/cardshop (the service) and bin/cardshopctl (the operators' command line)
	$(GO) build -o bin/cardshop ./cmd/cardshop
	$(GO) build -o bin/cardshopctl ./cmd/cardshopctl

# The release: static binaries (no cgo: they run on any Linux of the architecture, in an image
# FROM scratch too; the time zones built in, as such an image has none), trimmed paths, the
# version written into `cardshop version` and the
# cardshop_build_info metric, and their SHA-256 sums.
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
RELEASE_ARCHES ?= amd64 arm64
DIST ?= dist

.PHONY: release
release: ## static linux/amd64 and linux/arm64 binaries in dist/ with SHA256SUMS (VERSION=v1.2.3)
	rm -rf $(DIST) && mkdir -p $(DIST)
	for arch in $(RELEASE_ARCHES); do for cmd in cardshop cardshopctl; do \
		CGO_ENABLED=0 GOOS=linux GOARCH=$$arch $(GO) build -trimpath -tags timetzdata \
			-ldflags "-s -w -X cardshop/bootstrap.version=$(VERSION)" -o $(DIST)/$$cmd-linux-$$arch ./cmd/$$cmd || exit 1; \
	done; done
	cd $(DIST) && sha256sum cardshop-linux-* cardshopctl-linux-* > SHA256SUMS

# The container image (scripts/deploy/Containerfile, FROM scratch) built from the release folder:
# the binaries and this machine's CA bundle, so no base image and no registry are needed.
# podman writes the Docker format, the one that keeps the HEALTHCHECK (OCI has none).
CONTAINER ?= podman
IMAGE ?= cardshop:$(VERSION)
IMAGE_ARCH ?= $(shell $(GO) env GOARCH)
CA_BUNDLE ?= /etc/ssl/certs/ca-certificates.crt
IMAGE_BUILD_FLAGS ?= $(if $(findstring podman,$(CONTAINER)),--format docker)

.PHONY: image
image: release image-only ## make release, then the container image cardshop:VERSION (CONTAINER=podman or docker)

.PHONY: image-only
image-only: ## the container image from what dist/ holds already (IMAGE_ARCH=amd64 or arm64)
	cp $(CA_BUNDLE) $(DIST)/ca-certificates.crt
	$(CONTAINER) build $(IMAGE_BUILD_FLAGS) -f scripts/deploy/Containerfile --build-arg ARCH=$(IMAGE_ARCH) -t $(IMAGE) $(DIST)

.PHONY: services
services: ## (re)start MariaDB, Redis, RabbitMQ and a 3-node Redis Cluster if they are down
	@bash .ci/services.sh

.PHONY: test
test: services ## every test with -race, integration suites included; -v output + a pass/fail/skip count
	@set -o pipefail; $(GO) test -race -count=1 -v ./... 2>&1 | bash .ci/test-summary.sh

.PHONY: test-quick
test-quick: ## unit tests only against memory (no services, integration suites skip)
	TEST_MYSQL_DSN='root@tcp(127.0.0.1:1)/' TEST_REDIS_ADDR=127.0.0.1:1 TEST_REDIS_CLUSTER=127.0.0.1:1 \
	TEST_AMQP_URL=amqp://guest:guest@127.0.0.1:1/ CI= $(GO) test -race -count=1 ./...

.PHONY: storefront-screenshots
storefront-screenshots: ## write docs/storefront/*.png: every page of the shop in both languages, phone and desktop, in headless Chromium
	SHOP_SCREENSHOTS=docs/storefront $(GO) test -count=1 -run '^(TestShopInABrowser|TestVariantsInABrowser|TestShopRefusalsInABrowser)$$' ./bootstrap/

.PHONY: console-screenshots
console-screenshots: services ## write docs/console/*.png: every console screen in both languages in headless Chromium (payment channels on the real adapters)
	CONSOLE_SCREENSHOTS=docs/console $(GO) test -count=1 -run '^(TestConsoleInABrowser|TestDashboardInABrowser)$$/^memory$$' ./bootstrap/
	CONSOLE_SCREENSHOTS=docs/console $(GO) test -count=1 -run '^(TestDashboardMoneyInABrowser|TestSupportScreensInABrowser|TestAlertChannelsInABrowser|TestPaymentChannelsInABrowser|TestCouponsInABrowser)$$' ./bootstrap/

.PHONY: check
check: fmt-check vet lint ## gofmt, go vet and golangci-lint

.PHONY: fmt-check
fmt-check: ## fail if gofmt would change a file
	@out=$$(gofmt -l $$(git ls-files -co --exclude-standard '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

.PHONY: vet
vet: ## go vet
	$(GO) vet ./...

.PHONY: lint
lint: ## golangci-lint with .golangci.yml: staticcheck, errcheck, gosec, … (fetched through the module proxy on first use)
	GOFLAGS= $(GO) run $(GOLANGCI_LINT) run ./...

# `make soak DURATION=1h`: DURATION is a Go duration in s, m or h; the go test timeout leaves
# room for the checkpoints and the settling at the end.
DURATION ?= 10m

.PHONY: soak
soak: services ## the concurrent history test on memory and on Redis+MariaDB+RabbitMQ for DURATION (default 10m); HISTORY_SEED=… replays
	@d='$(DURATION)'; n=$${d%[smh]}; \
	case "$$d" in *[0-9]s) s=$$n;; *[0-9]m) s=$$((n*60));; *[0-9]h) s=$$((n*3600));; *) echo "DURATION=$$d: want a whole number of s, m or h, e.g. 10m"; exit 2;; esac; \
	HISTORY_DURATION=$$d $(GO) test -race -count=1 -v -run '^TestConcurrentHistory' -timeout $$((2*s+600))s ./application/ ./bootstrap/

# The backup drill (docs/PRODUCTION.md, "What to back up"): an online dump during a sale,
# restored into a fresh database with an empty Redis; it runs in `make test` too. CI=true: a
# missing service or tool fails it rather than skipping it.
.PHONY: backup-drill
backup-drill: services ## dump the ledger during a sale, restore it with an empty Redis, check every paid order and print dump, restore and first-order times (~15 s)
	CI=true $(GO) test -race -count=1 -v -run '^TestBackupDrill$$' ./bootstrap/

# A duration -fuzztime can end in a bare "context deadline exceeded" with no failing input: a
# race in Go 1.26's fuzz coordinator (golang/go#75804, fixed in Go 1.27). Only that case is run
# a second time; a failing input, a panic or any other failure fails at once.
.PHONY: fuzz
fuzz: ## run every fuzz target for FUZZTIME each (default 30s)
	@for pkg in $$($(GO) list ./...); do \
	  for f in $$($(GO) test -list '^Fuzz' $$pkg 2>/dev/null | grep '^Fuzz'); do \
	    echo "== $$pkg $$f"; \
	    for try in 1 2; do \
	      out=$$($(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $${FUZZTIME:-30s} $$pkg 2>&1); rc=$$?; echo "$$out"; \
	      [ $$rc -eq 0 ] && break; \
	      if [ $$try -eq 1 ] && echo "$$out" | grep -q 'context deadline exceeded' && \
	         ! echo "$$out" | grep -qE 'Failing input written|panic:' ; then \
	        echo "   (no failing input: the fuzz coordinator's deadline race, golang/go#75804; running $$f again)"; continue; \
	      fi; \
	      exit 1; \
	    done; \
	  done; \
	done

.PHONY: fuzz-short
fuzz-short: ## every fuzz target for 3 s (what CI runs)
	@$(MAKE) --no-print-directory fuzz FUZZTIME=3s

.PHONY: bench
bench: ## Go benchmarks of the use cases on the memory adapters
	$(GO) test -run '^$$' -bench . -benchmem ./application/

.PHONY: loadcheck
loadcheck: services ## the load proof: 11 scenarios (1-10, 20) on the real adapters, ceilings, every invariant, charts into CHARTS (default docs/charts) (~13 min)
	$(GO) run ./cmd/loadcheck -charts $(or $(CHARTS),docs/charts)

.PHONY: loadcheck-ab
loadcheck-ab: services ## A/B of group commit: scenarios 2 and 1, ROUNDS (default 3) rounds with batching off and on alternately (~20 min)
	$(GO) run ./cmd/loadcheck -ab $(or $(ROUNDS),3)

.PHONY: chaos
chaos: services ## faults under load: its own Redis, MariaDB and RabbitMQ killed, failed over, slowed, stalled and cut mid-sale, two instances behind a retrying load balancer, every invariant after, charts into CHARTS (default docs/charts) (~13 min)
	$(GO) run ./cmd/loadcheck -chaos -charts $(or $(CHARTS),docs/charts)

.PHONY: chaos-short
chaos-short: services ## the chaos mode in CI form: 6 s per scenario, 2 s faults, charts into a temporary folder (~8 min)
	$(GO) run ./cmd/loadcheck -chaos -short

.PHONY: loadcheck-short
loadcheck-short: services ## the load proof in CI form: a few seconds per scenario, same invariants, charts into a temporary folder
	$(GO) run ./cmd/loadcheck -short
