.PHONY: setup demo test lint
# Python writes each module's bytecode at its first import, for the processes after it (tests, Ray workers,
# the CLI's runs): set, PYTHONDONTWRITEBYTECODE makes each of them compile torch again
unexport PYTHONDONTWRITEBYTECODE

setup:
	bash scripts/setup.sh

demo: setup
	bash scripts/demo.sh

# on every core (at most 4 processes; tests/conftest.py says which modules run whole in one)
test: setup
	HF_HUB_OFFLINE=1 .venv/bin/python -m pytest -q -n auto --maxprocesses 4

lint:
	.venv/bin/ruff check src tests benchmarks studies
	.venv/bin/ruff format --check src tests benchmarks studies
	.venv/bin/mypy src
