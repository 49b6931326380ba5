# The two commands: `make run` (whole system, embedded defaults) and `make test`.
VENV ?= .venv
PYTHON ?= python3
BIN := $(VENV)/bin

.PHONY: run test lint migrate bench clean

# Development installs the runtime set (requirements.txt, all the Docker image gets) plus tests,
# lint, benchmarks and the launcher (requirements-dev.txt); editing either file reinstalls.
$(BIN)/.installed: requirements.txt requirements-dev.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -r requirements-dev.txt
	touch $@

run: $(BIN)/.installed
	$(BIN)/python -m notifier.dev

test: $(BIN)/.installed
	$(BIN)/pytest $(PYTEST_ARGS)

lint: $(BIN)/.installed
	$(BIN)/ruff check .

migrate: $(BIN)/.installed
	$(BIN)/python manage.py migrate

clean:
	rm -rf var/mail var/test.sqlite3*
