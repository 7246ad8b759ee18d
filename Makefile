# The two commands of the README. Each installs what it needs itself, so both work on a fresh
# machine: Debian packages (ZooKeeper, a JRE), a virtual environment (filled by uv) with the
# project and its test extras, and the generated protobuf modules.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
APT_PACKAGES := zookeeper default-jre-headless
# What `magnetar kube up` runs besides the Kubernetes binaries: the container runtime, the CNI
# plugins (/usr/lib/cni), iptables for kube-proxy, and gcc with a static libc for the pause binary.
KUBE_APT_PACKAGES := containerd runc containernetworking-plugins iptables conntrack iproute2 gcc libc6-dev
PYTEST_ARGS ?=
# pytest's workers (pytest-xdist; tests/scheduling.py keeps the tests that share a cluster, the
# operator's control plane or the machine's one Kubernetes node on one worker, longest first).
# Three by default: most of a serial run waits on the scenarios' own clocks; two workers took the
# first pytest from 62 to 30 minutes on 2 cores and left the cores a fifth idle, and a third uses
# that once the kube tier's node and pods weigh more than a session (tests/parts.py), without
# which they starved (docs/development.md). TEST_WORKERS=0 runs it serially.
# The tests marked exclusive (timing under a fault) run beside the rest in a CPU cgroup of their
# own that outweighs everything else (tests/parts.py), or alone after them where none can be made.
TEST_WORKERS ?= 3
PYTEST_PARALLEL = $(if $(filter 0,$(TEST_WORKERS)),,-n $(TEST_WORKERS) --dist loadgroup --no-loadscope-reorder)
# when this make started: the table at the end of pytest (tests/timing.py) shows the steps before it
export MAGNETAR_MAKE_STARTED := $(shell date +%s)
export MAGNETAR_MAKE_GOALS := $(or $(MAKECMDGOALS),test)

.PHONY: test test-prerequisites test-drivers check kube-tier demo install system-deps proto bytecode lint typecheck docs bench bench-compare clean k8s-testenv kube-deps kube-node image

# Everything pytest needs is made first, side by side where nothing orders it (make -j): the Go
# builds, the images, the venv, lint, types and docs mostly wait on the network, the disk or one
# core each, so on a cold machine they overlap instead of queueing (docs/development.md).
PREREQUISITE_JOBS ?= 4
test:
	@$(MAKE) --no-print-directory -j$(PREREQUISITE_JOBS) test-prerequisites
	$(BIN)/python -m tests.parts -- $(BIN)/pytest $(PYTEST_PARALLEL) --exclusive=skip $(PYTEST_ARGS) \
		-- $(BIN)/pytest --exclusive=only $(PYTEST_ARGS)

test-prerequisites: install kube-tier lint typecheck docs test-drivers

# The tests' own drivers, built or fetched once into ~/.cache/magnetar here, beside the other
# builds, rather than inside a test's setup: the official Go admin client, and Apache Pulsar's jars
# (where mvn and Java are; elsewhere the comparison test skips, saying why).
test-drivers: proto system-deps
	$(BIN)/python -c 'from tests.admin_go import build; build()'
	@if command -v mvn >/dev/null && command -v java >/dev/null; then \
	  $(BIN)/python -m magnetar.chaos.apache_pulsar.processes fetch; fi

# The inner loop, a few minutes warm: lint, types, the unit tests and each component's fastest
# end-to-end test (tests/check.py). Never instead of `make test`, which CI runs.
check: install lint typecheck
	$(BIN)/pytest -n 2 --dist loadgroup --no-loadscope-reorder -m check $(PYTEST_ARGS)

# What the kube tier's tests run: the node's packages and binaries and the images. Built
# where a node can run (root); elsewhere the tier's tests skip, saying why.
ifeq ($(shell id -u),0)
kube-tier: kube-node image
else
kube-tier:
	@echo "kube tier: not root, so no node here; its tests will skip"
endif

demo: install
	$(BIN)/magnetar chaos demo

install: system-deps $(STAMP) proto bytecode k8s-testenv

# kube-apiserver, etcd, kubectl and helm for the operator suite, built from the Go module proxy once
# and cached under ~/.cache/magnetar/k8s (the first build takes several minutes; later runs only check).
k8s-testenv:
	bash operator/testenv/build-k8s.sh

# The images a pod needs (magnetar, ZooKeeper, pause), built with no image registry: a private
# dockerd, a debootstrap base and the host's wheels; tarballs in ~/.cache/magnetar/images, imported
# into a running `magnetar kube up` node's containerd (images/README.md). Needs root.
image: proto kube-deps
	bash images/build.sh $(IMAGE_ARGS)

# The single-node Kubernetes of `magnetar kube up`: its Debian packages, and kubelet,
# kube-controller-manager, kube-scheduler, kube-proxy and CoreDNS built into the operator suite's
# cache (a few minutes each the first time). `make test` builds it (kube-tier), `make install` does not.
# After k8s-testenv, which builds etcd too, and one Go build at a time is what two cores carry.
kube-node: kube-deps k8s-testenv
	bash operator/testenv/build-k8s.sh etcd kube node

# after system-deps: one apt-get at a time (dpkg's lock)
kube-deps: system-deps
	$(call apt_install,$(KUBE_APT_PACKAGES))

# Debian packages the tests use; installed only when missing (root, as on these machines, or sudo).
system-deps:
	$(call apt_install,$(APT_PACKAGES))

# apt-get install of those of the Debian packages $(1) that are missing (as root, or with sudo)
define apt_install
	@missing=""; for p in $(1); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing Debian packages:$$missing"; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$missing >/dev/null; \
	fi
endef

# uv installs the same packages as pip, from its cache under ~/.cache/uv, in a fraction of pip's
# time (docs/development.md); pip stays in the venv for the image's wheelhouse. --native-tls: the
# system's CA store, which pip's cert setting names on these machines.
# pyspark is published as source only (a 400 MB archive): uv downloaded and built it again for
# every fresh clone and kept each build (0.5 to 1.3 GB of ~/.cache/uv a clone, until the disk
# filled and the tests' bookies went read-only). Its wheel is built once per version instead, into
# BUILT_WHEELS, and uv takes it from there.
BUILT_WHEELS := $(HOME)/.cache/magnetar/wheelhouse/built
$(STAMP): pyproject.toml setup.py
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q -U pip uv
	mkdir -p $(BUILT_WHEELS)
	$(BIN)/uv pip install -q --native-tls --compile-bytecode --python $(BIN)/python --find-links $(BUILT_WHEELS) \
		-e '.[test,bench]'
	@version=$$($(BIN)/python -c 'import importlib.metadata as m; print(m.version("pyspark"))'); \
	if ! ls $(BUILT_WHEELS)/pyspark-$$version-*.whl >/dev/null 2>&1; then \
	  echo "building a wheel of pyspark $$version once, into $(BUILT_WHEELS)"; \
	  $(BIN)/pip wheel -q --no-deps --no-cache-dir -w $(BUILT_WHEELS) "pyspark==$$version"; \
	fi
	touch $(STAMP)

proto: $(STAMP)
	$(BIN)/python magnetar/proto/generate.py

# The byte code of the venv's packages (uv's --compile-bytecode, above) and of the project's own
# modules is compiled here, once: Python reads a .pyc whether or not it may write one, and where
# PYTHONDONTWRITEBYTECODE is set (as on these machines) every process compiled every module it
# imported, every time it started: a broker's imports took twice the CPU (docs/development.md).
# magnetar/'s components are links to the top-level folders, which compileall does not follow.
PACKAGE_DIRS := magnetar bookie broker chaos spark operator local
bytecode: proto
	$(BIN)/python -m compileall -q -j 0 $(PACKAGE_DIRS)

lint: proto
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

# mypy's cache is kept with the other caches: it checks each file's hash, so a fresh clone (CI's)
# reuses what an earlier clone found unchanged.
typecheck: proto
	$(BIN)/mypy --cache-dir $(HOME)/.cache/magnetar/mypy -p magnetar

# The documentation site (mkdocs.yml, docs/), built strictly into site/: a broken link or anchor,
# a page missing from the nav or a reference page the hook cannot generate fails the build. Not
# --quiet: in MkDocs 1.6 it drops warnings before strict mode counts them, so a broken link passed.
# NO_MKDOCS_2_WARNING silences mkdocs-material's banner about MkDocs 2.
docs: proto
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

bench: install
	$(BIN)/python bench/bookie_add.py

# Magnetar and Apache Pulsar side by side: fetches Pulsar's jars from Maven Central into
# ~/.cache/magnetar/pulsar once (needs mvn and Java 17), runs the same workloads on both, one table.
bench-compare: install
	$(BIN)/python bench/bench_compare.py $(BENCH_ARGS)

clean:
	rm -rf $(VENV) build dist *.egg-info magnetar/proto/*_pb2*.py magnetar/proto/*_pb2.pyi
