.PHONY: setup demo test lint

setup:
	bash scripts/setup.sh

demo: setup
	bash scripts/demo.sh

test: setup
	HF_HUB_OFFLINE=1 .venv/bin/python -m pytest -q

lint:
	.venv/bin/ruff check src tests benchmarks studies
	.venv/bin/ruff format --check src tests benchmarks studies
	.venv/bin/mypy src
