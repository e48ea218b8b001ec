# One command surface: `make test` (then `make deployments` and `make crash-trials` in CI), `make demo`, `make lint`, `make bench`.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
# pytest-xdist workers of `make test`, each with its own SparkSession: the 2-core machines this runs on spend much of a
# Spark test waiting (job scheduling, py4j round trips, subprocesses), so two workers take ~40 % off the suite's time
# Tried 2026-12-02 and left out: the C1 compiler alone for the tests' JVMs (SPARK_SUBMIT_OPTS=-XX:TieredStopAtLevel=1)
# took test_mor + test_services from 142 s to 106 s, but the whole suite from 33:33 to 38:21 (a worker's JVM lives for
# the whole run, and its hot code then misses C2); the 136 slowest tests summed 2837 s against 3237 s. The short-lived
# Spark processes the tests start (writers killed at a commit point, pipeline processes killed at random) do run on C1
# only (tests/processes.py): 10 test_crash cases 171-181 s -> 128-131 s, two writers' 20 rounds 81 s -> 65 s.
TEST_WORKERS ?= 2
# the test workers' driver JVMs (and the processes they start, which add C1 only: tests/processes.py) collect garbage
# with the parallel collector: test_mor + test_services in two workers, alternating, 160.5 and 160.3 s with G1 (the
# JDK's default), 142.6 and 150.2 s with it (2026-12-04); the heap (spark.driver.memory) is the same, no result changes
TEST_JVM_OPTIONS ?= -XX:+UseParallelGC

.PHONY: test deployments deployments-connect deployments-cluster crash-trials demo lint bench bench-mor bench-s3 bench-read-path bench-validate bench-gate bench-kafka bench-cdc bench-etl bench-lake-read bench-scaling bench-indexes bench-registry bench-doctor java clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[test]"
	touch $(STAMP)

java:
	@command -v java >/dev/null 2>&1 || { echo "ERROR: Java 17 or newer is required by PySpark 4 (install e.g. openjdk-17-jre-headless)"; exit 1; }
	@v=$$(java -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p' | head -1); \
	 if [ -z "$$v" ] || [ "$$v" -lt 17 ]; then echo "ERROR: Java 17 or newer is required by PySpark 4, found: $$(java -version 2>&1 | head -1)"; exit 1; fi

test: $(STAMP) java
	$(VENV)/bin/ruff check tablecore schema_registry validators governance tests benchmarks examples
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports
	SPARK_SUBMIT_OPTS="$(TEST_JVM_OPTIONS)" PYSPARK_PYTHON=$(abspath $(PY)) $(PY) -m pytest -q -n $(TEST_WORKERS)

# the interop suites and the demo again, from a Spark Connect client and on a standalone cluster (master, worker and
# Connect server started by the tests from the pyspark install); CI runs it after `make test`. The two modes run at
# the same time (each pytest run is one process that mostly waits on its JVMs; pytest gives each its own numbered
# temporary folder), and make prints each one's output whole when it ends. The modes' own targets check Java and the
# install (once, in the one make that runs both).
deployments:
	@$(MAKE) --no-print-directory -j2 --output-sync=target deployments-connect deployments-cluster

deployments-connect deployments-cluster: deployments-%: $(STAMP) java
	LAKEGATE_TEST_SPARK=$* PYSPARK_PYTHON=$(abspath $(PY)) $(PY) -m pytest -q -m deployments

# the trials' measured seconds (pytest.mark.trial_seconds) put the longest first, one to each worker, and worksteal
# lets a worker that ran out take the tail of the other's (tests/scheduling.py): in collection order one worker ran the
# Kafka, pipeline and backfill trials one after the other (2200 s against the other's 1719 s, 2026-12-03)
crash-trials: $(STAMP) java
	PYSPARK_PYTHON=$(abspath $(PY)) $(PY) -m pytest -q -n $(TEST_WORKERS) --dist worksteal -m crash_trials

demo: $(STAMP) java
	PYSPARK_PYTHON=$(abspath $(PY)) $(PY) -m governance.cli demo

lint: $(STAMP)
	$(VENV)/bin/ruff check tablecore schema_registry validators governance tests benchmarks examples
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports

bench: $(STAMP) java
	$(PY) -m pip install --quiet -e ".[test,bench]"
	PYSPARK_PYTHON=$(abspath $(PY)) $(PY) benchmarks/upsert.py

bench-mor: $(STAMP) java
	$(PY) -m pip install --quiet -e ".[test,bench]"
	PYSPARK_PYTHON=$(abspath $(PY)) $(PY) benchmarks/mor.py

bench-s3: $(STAMP) java
	$(PY) -m pip install --quiet -e ".[test,bench]"
	PYSPARK_PYTHON=$(abspath $(PY)) $(PY) benchmarks/s3.py

bench-read-path: $(STAMP) java
	$(PY) -m pip install --quiet -e ".[test,bench]"
	PYSPARK_PYTHON=$(abspath $(PY)) $(PY) benchmarks/read_path.py

bench-validate: $(STAMP) java
	$(PY) -m pip install --quiet -e ".[test,bench]"
	PYSPARK_PYTHON=$(abspath $(PY)) $(PY) benchmarks/validate.py

bench-gate: $(STAMP) java
	$(PY) -m pip install --quiet -e ".[test,bench]"
	PYSPARK_PYTHON=$(abspath $(PY)) $(PY) benchmarks/gate.py

bench-cdc: $(STAMP) java
	$(PY) -m pip install --quiet -e ".[test,bench]"
	PYSPARK_PYTHON=$(abspath $(PY)) $(PY) benchmarks/cdc.py

bench-etl: $(STAMP) java
	$(PY) -m pip install --quiet -e ".[test,bench]"
	PYSPARK_PYTHON=$(abspath $(PY)) $(PY) benchmarks/etl.py

bench-scaling: $(STAMP) java
	$(PY) -m pip install --quiet -e ".[test,bench]"
	PYSPARK_PYTHON=$(abspath $(PY)) $(PY) benchmarks/scaling.py

bench-indexes: $(STAMP) java
	$(PY) -m pip install --quiet -e ".[test,bench]"
	PYSPARK_PYTHON=$(abspath $(PY)) $(PY) benchmarks/indexes.py

bench-lake-read: $(STAMP) java
	$(PY) -m pip install --quiet -e ".[test,bench]"
	PYSPARK_PYTHON=$(abspath $(PY)) $(PY) benchmarks/lake_read.py

bench-kafka: $(STAMP) java
	$(PY) -m pip install --quiet -e ".[test,bench]"
	PYSPARK_PYTHON=$(abspath $(PY)) $(PY) benchmarks/kafka.py

bench-doctor: $(STAMP) java
	$(PY) -m pip install --quiet -e ".[test,bench]"
	PYSPARK_PYTHON=$(abspath $(PY)) $(PY) benchmarks/doctor.py

bench-registry: $(STAMP)
	$(PY) -m pip install --quiet -e ".[test,bench]"
	$(PY) benchmarks/registry.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
