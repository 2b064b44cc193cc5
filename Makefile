# The commands of the README: `make run` (the workflow end to end on the CPU default), `make test` and
# `make test-fast` (`make test LOAD=2`: the same beside two busy CPU loops).
VENV := .venv
export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)

.PHONY: env run test test-load test-fast lint dry-run
env:
	@bash tools/bootstrap.sh

run: env
	snakemake --profile profiles/local

dry-run: env
	snakemake -n

# Two pytest-xdist workers (CI has two cores; most slow tests wait on timeouts and sleeps): tests/conftest.py
# keeps each test module on one worker, runs the Slurm tests in turn and schedules the slow ones first.
# PYTEST_WORKERS=0 runs the suite in this one process.
# LOAD=N (or LOAD=on, two) runs the tests beside N busy CPU loops, as on a busy CI machine
# (FTQUAL_TEST_LOAD; tests/support/load.py); `make test-load` is `make test LOAD=on`.
PYTEST_WORKERS ?= 2
LOAD ?= $(FTQUAL_TEST_LOAD)
test: env
	FTQUAL_TEST_LOAD=$(LOAD) python -m pytest -ra --durations=20 -n $(PYTEST_WORKERS) --dist loadscope $(PYTEST_ARGS)

test-load: env
	$(MAKE) test LOAD=$(if $(filter-out 0 off no false,$(LOAD)),$(LOAD),on)

# The unit tests only (tests/unit: pure functions, recorded runs, the workloads' parts), on the same two
# workers: no Snakemake start, no real ft_launcher, no Slurm (tests/integration holds those). No Slurm
# configuration either: importing Snakemake's Slurm plugin asks scontrol, which waits ~9 s where a
# slurm.conf exists and no controller answers.
test-fast: env
	SLURM_CONF=/dev/null FTQUAL_TEST_LOAD=$(LOAD) python -m pytest -ra -n $(PYTEST_WORKERS) --dist loadscope tests/unit $(PYTEST_ARGS)

lint: env
	ruff check ftqual scripts workloads tools tests bench
	ruff format --check ftqual scripts workloads tools tests bench
	snakefmt --check Snakefile rules
	snakemake --lint
