# The two commands of the README: `make run` (the workflow end to end on the CPU default) and `make test`.
VENV := .venv
export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)

.PHONY: env run test lint dry-run
env:
	@bash tools/bootstrap.sh

run: env
	snakemake --profile profiles/local

dry-run: env
	snakemake -n

test: env
	python -m pytest -ra $(PYTEST_ARGS)

lint: env
	ruff check ftqual scripts tools tests bench
	ruff format --check ftqual scripts tools tests bench
	snakefmt --check Snakefile rules
	snakemake --lint
