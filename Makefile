# The two commands: `make run` (whole system, embedded defaults) and `make test`.
VENV ?= .venv
PYTHON ?= python3
BIN := $(VENV)/bin

.PHONY: run test lint migrate bench clean

$(BIN)/.installed: requirements.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -r requirements.txt
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
