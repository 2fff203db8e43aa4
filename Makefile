# Fairway's two contracts: `make demo` (a Fairway-enabled cluster doing real work)
# and `make test` (every test). Both install what they need first.
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
CARGO ?= cargo

PLUGINS := priority_fairway job_submit_fairway site_factor_fairway preempt_fairway gpu_nvml
# Keyed by the installed Slurm version: a plugin built for one version never reaches another.
# Another release's headers (SLURM_INCLUDE_DIR) and target dir (CARGO_TARGET_DIR) build
# plugins and packages for that release, as docker/cluster.sh and test-packages do.
SLURM_HEADERS = $(or $(SLURM_INCLUDE_DIR),/usr/include)
TARGET = $(or $(CARGO_TARGET_DIR),target)
SLURM_VERSION = $(shell v=$$(sed -n 's/^\#define SLURM_VERSION_NUMBER *0x\([0-9a-fA-F]*\).*/\1/p' $(SLURM_HEADERS)/slurm/slurm_version.h 2>/dev/null); \
	[ -n "$$v" ] && printf '%d.%02d.%d' $$((16#$${v:0:2})) $$((16#$${v:2:2})) $$((16#$${v:4:2})))
PLUGIN_ROOT = target/plugins/$(SLURM_VERSION)
export SLURM_SRC_DIR ?= $(CURDIR)/.cache/slurm-src/$(SLURM_VERSION)/tree

.PHONY: print-slurm-version build-deps cli-release install install-slurmctld install-slurmd install-cli uninstall deb test-packages cluster-up cluster-down e2e e2e-prepare test-e2e test-beside demo-host setup plugins plugins-release lint test test-unit test-cli-standalone test-slurm demo bench-priority bench-submit fuzz fuzz-short fuzz-long fuzz-coverage memcheck clean

## build-deps: what building needs and nothing more (Slurm headers, libclang, the configured
## Slurm source tree): no daemon, no user; safe on a production controller
build-deps:
	bash scripts/build-deps.sh

## setup: a test machine: the daemons the tests start, test users, and build-deps (idempotent)
setup:
	bash scripts/setup.sh

## plugins: test builds (with the fault-injection hook) under their Slurm names
plugins: setup
	$(CARGO) build $(addprefix -p ,$(PLUGINS)) --features "$(foreach p,$(PLUGINS),$(p)/fault-injection)"
	mkdir -p $(PLUGIN_ROOT)/test
	for p in $(PLUGINS); do install -m 0755 target/debug/lib$$p.so $(PLUGIN_ROOT)/test/$$p.so; done

## plugins-release: what a site installs (no test hooks)
plugins-release: build-deps
	$(CARGO) build --release $(addprefix -p ,$(PLUGINS))
	mkdir -p $(PLUGIN_ROOT)/release
	for p in $(PLUGINS); do install -m 0755 $(TARGET)/release/lib$$p.so $(PLUGIN_ROOT)/release/$$p.so; done

## cli-release: the fairway command (needs no Slurm)
cli-release:
	$(CARGO) build --release -p fairway-cli

## install: everything below, into $(DESTDIR)$(PREFIX) (PREFIX=/usr/local by default;
## packages use /usr). Plugins go to a directory named for the Slurm release they were
## built for, which slurm.conf's PluginDir then names: an upgrade of Slurm without them
## shows in slurm.conf and in `fairway check-config`.
PREFIX ?= /usr/local
DESTDIR ?=
PLUGINDIR = $(PREFIX)/lib/fairway/slurm-$(SLURM_VERSION)
CTLD_PLUGINS := priority_fairway job_submit_fairway site_factor_fairway preempt_fairway
SLURMD_PLUGINS := gpu_nvml
install: install-slurmctld install-slurmd install-cli

## install-slurmctld: the controller's plugins (priority, job_submit, site_factor, preempt)
install-slurmctld: plugins-release
	for p in $(CTLD_PLUGINS); do install -D -m 0755 $(PLUGIN_ROOT)/release/$$p.so $(DESTDIR)$(PLUGINDIR)/$$p.so; done

## install-slurmd: the compute nodes' gpu plugin (AutoDetect=nvml)
install-slurmd: plugins-release
	for p in $(SLURMD_PLUGINS); do install -D -m 0755 $(PLUGIN_ROOT)/release/$$p.so $(DESTDIR)$(PLUGINDIR)/$$p.so; done

## install-cli: the fairway command (every node: ckpt-done runs inside jobs), its man pages,
## shell completions, and the example configurations
install-cli: cli-release
	install -D -m 0755 $(TARGET)/release/fairway $(DESTDIR)$(PREFIX)/bin/fairway
	rm -rf target/man && $(TARGET)/release/fairway generate man target/man
	for m in target/man/*.1; do install -D -m 0644 $$m $(DESTDIR)$(PREFIX)/share/man/man1/$$(basename $$m); gzip -9nf $(DESTDIR)$(PREFIX)/share/man/man1/$$(basename $$m); done
	mkdir -p $(DESTDIR)$(PREFIX)/share/bash-completion/completions $(DESTDIR)$(PREFIX)/share/zsh/vendor-completions $(DESTDIR)$(PREFIX)/share/fish/vendor_completions.d
	$(TARGET)/release/fairway generate completion bash >$(DESTDIR)$(PREFIX)/share/bash-completion/completions/fairway
	$(TARGET)/release/fairway generate completion zsh >$(DESTDIR)$(PREFIX)/share/zsh/vendor-completions/_fairway
	$(TARGET)/release/fairway generate completion fish >$(DESTDIR)$(PREFIX)/share/fish/vendor_completions.d/fairway.fish
	for f in fairway.toml fairway.gpu-cluster.toml slurm.conf.fairway; do install -D -m 0644 config/$$f $(DESTDIR)$(PREFIX)/share/doc/fairway/examples/$$f; done
	for f in config/topology/*.toml; do install -D -m 0644 $$f $(DESTDIR)$(PREFIX)/share/doc/fairway/examples/topology/$$(basename $$f); done
	for f in config/monitoring/*; do install -D -m 0644 $$f $(DESTDIR)$(PREFIX)/share/doc/fairway/examples/monitoring/$$(basename $$f); done
	for f in README.md SECURITY.md CHANGELOG.md LICENSE; do install -D -m 0644 $$f $(DESTDIR)$(PREFIX)/share/doc/fairway/$$f; done

## uninstall: what install put there (the plugin directory of this Slurm release only)
uninstall:
	rm -f $(foreach p,$(CTLD_PLUGINS) $(SLURMD_PLUGINS),$(DESTDIR)$(PLUGINDIR)/$(p).so)
	-rmdir $(DESTDIR)$(PLUGINDIR) $(DESTDIR)$(PREFIX)/lib/fairway 2>/dev/null
	rm -f $(DESTDIR)$(PREFIX)/bin/fairway $(DESTDIR)$(PREFIX)/share/man/man1/fairway.1.gz $(DESTDIR)$(PREFIX)/share/man/man1/fairway-*.1.gz
	rm -f $(DESTDIR)$(PREFIX)/share/bash-completion/completions/fairway $(DESTDIR)$(PREFIX)/share/zsh/vendor-completions/_fairway $(DESTDIR)$(PREFIX)/share/fish/vendor_completions.d/fairway.fish
	rm -rf $(DESTDIR)$(PREFIX)/share/doc/fairway

print-slurm-version:
	@echo $(SLURM_VERSION)

## deb: Debian packages for the installed Slurm release, in target/debian:
## fairway-slurmctld and fairway-slurmd (each tied to this exact Slurm release) and fairway
deb: plugins-release cli-release
	bash scripts/package-deb.sh

## test-packages: the packages installed with apt in a clean container of Debian's Slurm,
## the README's install lines run as written, a job run, and check-config catching a
## Slurm release that no longer matches the plugins
test-packages: setup
	bash scripts/test-packages.sh

lint: setup
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings
	# The fuzz targets are a workspace of their own: keep them compiling.
	$(CARGO) check --locked --manifest-path fuzz/Cargo.toml --bins

test-unit: setup
	$(CARGO) test --workspace --exclude fairway-tests

## test-cli-standalone: the fairway command built in a bare Debian container (no Slurm, no libclang),
## its binary free of Slurm libraries
test-cli-standalone: setup
	bash scripts/cli-without-slurm.sh

## test-slurm: tests on a real Slurm started by the harness, a cluster per test, two at a time
test-slurm: plugins
	$(CARGO) build -p fairway-cli  # tests run `fairway explain` as a user
	FAIRWAY_PLUGIN_DIR=$(CURDIR)/$(PLUGIN_ROOT)/test CARGO=$(CARGO) bash scripts/test-slurm.sh

## test-e2e: the end-to-end suite on a docker cluster of each Slurm version, one at a time;
## the E2E_COMPOSE_V2 versions under Docker Compose v2 (scripts/compose-v2.sh), the others
## under whichever compose the machine has (v1 on bookworm), so both stay tested
E2E_VERSIONS ?= 22.05 24.11 26.05
E2E_COMPOSE_V2 ?= 26.05
test-e2e: setup
	rc=0; for v in $(E2E_VERSIONS); do \
	  case " $(E2E_COMPOSE_V2) " in *" $$v "*) export DOCKER_CONFIG=$$(bash scripts/compose-v2.sh) ;; *) unset DOCKER_CONFIG ;; esac; \
	  $(MAKE) --no-print-directory e2e SLURM=$$v || rc=1; done; exit $$rc

## e2e-prepare: the images and plugins of every E2E_VERSIONS cluster, built without starting one
e2e-prepare: setup
	for v in $(E2E_VERSIONS); do bash docker/cluster.sh build $$v; done

## test: every test. The host suites mostly wait on Slurm's timers, so the rest runs beside
## them (scripts/side-by-side.sh, test-beside); then the other e2e versions, one at a time.
test: lint test-unit fuzz-short
	bash scripts/side-by-side.sh '$(MAKE) --no-print-directory test-slurm' '$(MAKE) --no-print-directory test-beside'
	$(MAKE) --no-print-directory test-e2e E2E_VERSIONS="$(filter-out $(E2E_BESIDE),$(E2E_VERSIONS))"

## test-beside: what `make test` runs beside the host suites: the CLI without Slurm, the
## packages, the E2E_BESIDE versions' e2e suites (their clusters mostly wait too; 26.05's is
## short: it builds job_submit/fairway only) and the other e2e clusters' images and plugins.
## Each step runs even if one before it failed, so that one run reports them all.
E2E_BESIDE ?= 24.11 26.05
test-beside:
	rc=0; for t in test-cli-standalone test-packages; do $(MAKE) --no-print-directory $$t || rc=1; done; \
	  $(MAKE) --no-print-directory test-e2e E2E_VERSIONS="$(filter $(E2E_BESIDE),$(E2E_VERSIONS))" || rc=1; \
	  $(MAKE) --no-print-directory e2e-prepare E2E_VERSIONS="$(filter-out $(E2E_BESIDE),$(E2E_VERSIONS))" || rc=1; \
	  exit $$rc

## demo: the docker cluster of $(SLURM) (24.11 by default) running a mix of AI jobs; left up
demo: cluster-up
	$(CARGO) build -q -p fairway-tests --bin fairway-demo
	FAIRWAY_DEMO_DOCKER=$(SLURM) target/debug/fairway-demo

## demo-host: the same idea on a single-node cluster of the host's Slurm, every plugin built here
demo-host: plugins-release
	FAIRWAY_PLUGIN_DIR=$(CURDIR)/$(PLUGIN_ROOT)/release bash scripts/demo.sh

## cluster-up / cluster-down: the docker cluster for one Slurm version (SLURM=22.05|24.11|26.05)
SLURM ?= 24.11
cluster-up: setup
	bash docker/cluster.sh up $(SLURM)

cluster-down:
	bash docker/cluster.sh down $(SLURM)

## e2e: the end-to-end tests on a fresh docker cluster of that version, then down again
e2e: cluster-up
	rc=0; FAIRWAY_E2E=$(SLURM) $(CARGO) test -p fairway-tests --no-fail-fast --test e2e --test e2e_priority -- --ignored --test-threads=1 || rc=$$?; \
	  [ $$rc = 0 ] || bash docker/cluster.sh logs $(SLURM) | tail -300; \
	  bash docker/cluster.sh down $(SLURM); exit $$rc

## bench-submit: submissions per second, no plugin vs job_submit/fairway vs job_submit/lua (minutes; not a test)
bench-submit: plugins-release
	$(CARGO) build --release -p fairway-bench
	FAIRWAY_PLUGIN_DIR=$(CURDIR)/$(PLUGIN_ROOT)/release target/release/fairway-bench-submit 1000 5 100

## fuzz: every fuzz target for FUZZ_SECS each (needs nightly and cargo-fuzz)
FUZZ_SECS ?= 180
fuzz:
	cd fuzz && for t in $$(cargo +nightly fuzz list); do cargo +nightly fuzz run $$t -- -max_total_time=$(FUZZ_SECS) -print_final_stats=1; done

## fuzz-short: every fuzz target for FUZZ_SECS (20 s) with the stable toolchain, no sanitizer (part of make test)
fuzz-short:
	bash scripts/fuzz-short.sh

## fuzz-long: every fuzz target for FUZZ_RUNS executions (10 million), report in bench/results/fuzz.md (hours; not in CI)
fuzz-long:
	bash scripts/fuzz-long.sh

## fuzz-coverage: the lines of the submission rules (crates/core/src/submit) the submit_rules
## corpus reaches and misses, after FUZZ_SECS (60) of fuzzing; bench/results/fuzz-coverage.md
## (needs nightly and Debian's llvm for llvm-symbolizer; a few minutes; not in CI)
fuzz-coverage:
	bash scripts/fuzz-coverage.sh

## memcheck: slurmctld's memory under MEMCHECK_JOBS jobs of mixed load, Fairway against stock
## Slurm, then under valgrind (about an hour on 2 cores; bench/results/memcheck.md; not in CI)
MEMCHECK_JOBS ?= 10000
memcheck: plugins
	FAIRWAY_PLUGIN_DIR=$(CURDIR)/$(PLUGIN_ROOT)/test MEMCHECK_JOBS=$(MEMCHECK_JOBS) CARGO=$(CARGO) bash scripts/memcheck.sh

## bench-priority: priority recalculation, fairway vs multifactor (minutes; not a test)
bench-priority: plugins-release
	$(CARGO) build --release -p fairway-bench
	FAIRWAY_PLUGIN_DIR=$(CURDIR)/$(PLUGIN_ROOT)/release target/release/fairway-bench-priority 50000 2000

clean:
	$(CARGO) clean
