# Two commands for a fresh machine (Python 3.11 and Java 17): `make demo` and `make test`.
# Each creates the virtual environment .venv and installs kraftlab into it first.

PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: demo test test-ray-all test-flaky docs docs-reference docs-images bench schema conformance conformance-ray trace-hashes clean

# pip's and setuptools' own notices go to .venv/install.log, shown only when the install fails.
$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	@echo "installing kraftlab and its dependencies into $(VENV) (the log: $(VENV)/install.log)"
	@$(BIN)/pip install --quiet --upgrade pip > $(VENV)/install.log 2>&1 && \
	  $(BIN)/pip install --quiet -e ".[test,docs]" >> $(VENV)/install.log 2>&1 || { cat $(VENV)/install.log; exit 1; }
	@touch $(STAMP)

demo: $(STAMP)
	$(BIN)/kraftlab demo

# Two passes (tests/conftest.py says why): every tier but Ray's on two workers, then the tiers that
# start a Ray (markers ray, testbed) on their own, one test after another, as their real-time
# timeouts need. Both passes run; the target fails if either did. Each prints its slowest tests.
test: $(STAMP)
	$(BIN)/python -m pytest -q --durations=15 -n 2 --dist loadscope -m "not ray and not testbed" tests; first=$$?; \
	$(BIN)/python -m pytest -q --durations=15 -m "ray or testbed" tests; second=$$?; \
	test $$first -eq 0 && test $$second -eq 0

# The `ray` tier with every library scenario and every conformance case on Ray (`make test` runs one
# of each family and of each Kafka test class there): about an hour on 2 cores.
test-ray-all: $(STAMP)
	KRAFTLAB_LIBRARY_RAY=all KRAFTLAB_CONFORMANCE_RAY=all $(BIN)/python -m pytest -q -m ray tests/ray

# The tiers that wait on the wall clock (Ctrl-C and SIGTERM of the commands, Prometheus, Spark's
# command line, `ray`, `testbed`) RUNS times, every LOAD_EVERY-th pass with one core kept busy;
# prints every test that failed even once (tests/flaky.py). About 35 minutes a pass on 2 cores.
RUNS ?= 3
LOAD_EVERY ?= 3
test-flaky: $(STAMP)
	$(BIN)/python -m tests.flaky --runs $(RUNS) --load-every $(LOAD_EVERY)

# The documentation site (mkdocs.yml, docs/) into site/; --strict: a broken link or a missing page fails.
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet

# The reference pages the code already knows (formats, event kinds, metrics, anomalies and
# invariants) written anew from it into docs/reference/ (kraftlab/reference_docs.py).
docs-reference: $(STAMP)
	$(BIN)/python -m kraftlab.reference_docs

# The documentation's pictures (the report, the dashboards) made anew from simulated runs: needs
# Chromium and Prometheus on PATH (infra/docs/images.py).
docs-images: $(STAMP)
	$(BIN)/python infra/docs/images.py

bench: $(STAMP)
	$(BIN)/python bench/sim_throughput.py
	$(BIN)/python bench/sim_scale.py --partitions 10 100 1000
	$(BIN)/python bench/ray_throughput.py
	$(BIN)/python bench/ray_profile.py
	$(BIN)/python bench/ray_observation.py
	$(BIN)/python bench/kafka_clients.py
	$(BIN)/python bench/campaign_rate.py
	$(BIN)/python bench/campaign_memory.py

schema: $(STAMP)
	$(BIN)/kraftlab schema > workloads/scenario.schema.json

# docs/conformance.md from workloads/conformance/: the simulator's results run anew, Ray's kept.
# The simulator's trace hash of every library scenario and conformance case, rewritten into
# tests/golden/trace-hashes.json (tests/trace_hashes.py): the tests fail while a run's hash differs
# from the file, so a change of behaviour shows in the diff of the commit that makes it.
trace-hashes: $(STAMP)
	$(BIN)/python -m tests.trace_hashes

conformance: $(STAMP)
	$(BIN)/python -m kraftlab.conformance

# The same, with every case also run on an embedded local Ray (minutes).
conformance-ray: $(STAMP)
	$(BIN)/python -m kraftlab.conformance --ray

clean:
	rm -rf $(VENV) runs site .pytest_cache
