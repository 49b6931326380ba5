# The two commands: `make run` (whole system, embedded defaults) and `make test`.
VENV ?= .venv
PYTHON ?= python3
BIN := $(VENV)/bin

.PHONY: run test test-fast test-packages lint migrate bench clean

# `make run` installs what running needs: the runtime set (requirements.txt, all the Docker image
# gets) and the launcher's few (requirements-run.txt), about 310 MB. Tests, lint and benchmarks
# install the development set (requirements-dev.txt, about 740 MB with the rest). Editing a file
# reinstalls the sets that include it; each install says what it is doing first, since the first
# one takes a minute or more.
$(BIN)/.installed-run: requirements.txt requirements-run.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@echo "Installing what make run needs (requirements-run.txt, about 310 MB) into $(VENV)/;" \
	  "the first time takes a minute or more ..."
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -r requirements-run.txt
	touch $@

# The development set includes the run set: once installed, `make run` installs nothing more.
$(BIN)/.installed: requirements.txt requirements-run.txt requirements-dev.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@echo "Installing the development set (requirements-dev.txt: tests, lint, benchmarks; about" \
	  "740 MB) into $(VENV)/; the first time takes a minute or more ..."
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -r requirements-dev.txt
	touch $@ $(BIN)/.installed-run

run: $(BIN)/.installed-run
	$(BIN)/python -m devtools.run

# Parallel workers (pytest-xdist), each with its own test database and Redis database; tests that
# share RabbitMQ's one vhost are grouped onto one worker (--dist loadgroup). Then the `solo` tests,
# which hold latency SLAs, one at a time with the machine to themselves. Exit status 5 (nothing
# selected, e.g. PYTEST_ARGS names only one kind) is not a failure.
TEST_WORKERS ?= 3
test: test-packages $(BIN)/.installed
	$(BIN)/pytest -n $(TEST_WORKERS) --dist loadgroup -m "not solo" $(PYTEST_ARGS) || [ $$? -eq 5 ]
	$(BIN)/pytest -m solo $(PYTEST_ARGS) || [ $$? -eq 5 ]

# The fast set: everything but the end-to-end scenarios of 10 s or more.
test-fast: test-packages $(BIN)/.installed
	$(BIN)/pytest -n $(TEST_WORKERS) --dist loadgroup -m "not slow" $(PYTEST_ARGS)

# Before anything else, the machine packages four tests need (Debian's chromium, Postfix's
# smtp-sink): devtools/test_packages.sh installs them as root with apt-get, else stops at once
# with the command that does. A part of the suite (PYTEST_ARGS) is not checked.
test-packages:
	$(if $(PYTEST_ARGS),,devtools/test_packages.sh)

lint: $(BIN)/.installed
	$(BIN)/ruff check .
	$(BIN)/lint-imports

# Against DATABASE_URL, or the embedded PostgreSQL while `make run` is up (make run migrates).
migrate: $(BIN)/.installed-run
	$(BIN)/python manage.py migrate

# Delivered mail and the embedded servers' data (stop `make run` first).
clean:
	rm -rf var/mail var/postgres var/redis var/demo_api_key
