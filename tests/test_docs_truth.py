"""Docs that the code keeps true: each list a reader relies on is compared with what the code does.

- Redis key families: every `redis_key(...)` call (and every hard-coded `notifier:` key) has its
  family in the one list, the docstring of core/redis_client.py.
- Celery queues: the queues the code declares, routes to and consumes are exactly the "Queues"
  table of docs/architecture.md and its process diagram; the docs name no other `email-*` queue.
- Environment variables: each one the code reads has a row in the README's Configuration table
  and follows docs/contributing.md's naming rule (prefixes, or a listed conventional name).
- The fault catalogue: docs/fault_catalogue.md has a row for each of F1-F23, and every test it
  names (a file, or a file::test) exists.

The code is read with `ast`, so a new call site is found without anyone registering it.
"""

from __future__ import annotations

import ast
import re
import warnings
from collections.abc import Iterable, Iterator
from fnmatch import fnmatchcase
from functools import cache
from itertools import pairwise
from pathlib import Path

import pytest
from django.conf import global_settings, settings

import core.redis_client
from core.priorities import ALL_QUEUES
from core.worker import ROLES, worker_argv
from notifier.renamed_env import RENAMED, adopt_renamed_variables
from tests.support.source import ROOT, docstring_constants, layers, python_files

PACKAGES = layers()  # the packages that run in production, top to bottom
PROCESS_FILES = [ROOT / "Procfile", ROOT / "docker-compose.yml"]
ARCHITECTURE = ROOT / "docs" / "architecture.md"
README = ROOT / "README.md"
CONTRIBUTING = ROOT / "docs" / "contributing.md"


def _production_python(*, migrations: bool = False) -> list[Path]:
    return [*python_files(PACKAGES, migrations=migrations), ROOT / "manage.py"]


@cache
def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(), filename=str(path))


def _parsed(paths: Iterable[Path]) -> Iterator[tuple[Path, ast.Module]]:
    for path in paths:
        yield path, _tree(path)


def _markdown_section(path: Path, heading: str) -> str:
    """The text under `heading` (a whole line such as '## Configuration') up to the next heading
    of the same or a higher level."""
    text = path.read_text()
    level = heading.split(" ")[0]
    start = text.index(f"\n{heading}\n") + len(heading) + 2
    ends = [m.start() for m in re.finditer(r"^(#+) ", text[start:], re.M) if len(m.group(1)) <= len(level)]
    return text[start:start + ends[0]] if ends else text[start:]


def _first_cells(table_text: str) -> list[str]:
    return [line.split("|")[1] for line in table_text.splitlines()
            if line.startswith("|") and not re.match(r"\|\s*-", line)]


# --- Redis key families ------------------------------------------------------------------------

def _constant_tuples(tree: ast.Module) -> dict[str, tuple[object, ...]]:
    """Module-level `NAME = ("a", "b")`, so `redis_key(*NAME)` can be read."""
    found = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Tuple) and len(node.targets) == 1:
            target = node.targets[0]
            if isinstance(target, ast.Name) and all(isinstance(e, ast.Constant) for e in node.value.elts):
                found[target.id] = tuple(e.value for e in node.value.elts)
    return found


def _key_parts(call: ast.Call, constants: dict[str, tuple[object, ...]]) -> list[str] | None:
    """The family of one redis_key(...) call: literal parts kept, anything computed is `*`.
    None when its first part is not a literal (nobody could tell which family it builds)."""
    parts: list[str] = []
    for arg in call.args:
        if isinstance(arg, ast.Starred):
            if not (isinstance(arg.value, ast.Name) and arg.value.id in constants):
                return None
            parts += [str(value) for value in constants[arg.value.id]]
        elif isinstance(arg, ast.Constant) and arg.value != "":
            parts.append(str(arg.value))
        else:  # a variable, or "" (a key prefix the caller appends a token to)
            parts.append("*")
    return parts if parts and parts[0] != "*" else None


def _is_redis_key_call(node: ast.AST) -> bool:
    if not isinstance(node, ast.Call):
        return False
    func = node.func
    return (isinstance(func, ast.Name) and func.id == "redis_key") or (
        isinstance(func, ast.Attribute) and func.attr == "redis_key")


def key_families_in(tree: ast.Module, prefix: str = "notifier") -> tuple[list[str], list[str]]:
    """(families, unreadable calls) of one module: `redis_key(...)` calls, and string literals
    outside docstrings that hard-code a `<prefix>:` key."""
    constants, docstrings = _constant_tuples(tree), docstring_constants(tree)
    families, unreadable = [], []
    for node in ast.walk(tree):
        if _is_redis_key_call(node):
            parts = _key_parts(node, constants)
            if parts is None:
                unreadable.append(f"line {node.lineno}: {ast.unparse(node)}")
            else:
                families.append(":".join(parts))
        elif (isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
              and re.fullmatch(rf"{prefix}:[a-z_-]+(:[\w<>-]*)*", node.value)):
            literal = node.value.removeprefix(f"{prefix}:")
            families.append(literal + "*" if literal.endswith(":") else literal)
    return families, unreadable


def documented_key_families() -> list[list[str]]:
    """The families core/redis_client.py lists, as segment lists (`<x>` is `*`; `a|b` two)."""
    families: list[list[str]] = [[]]
    for line in (core.redis_client.__doc__ or "").splitlines():
        # The key is the line's first column: up to two spaces or the end.
        match = re.match(r"\s+notifier:(.+?)(?:\s{2,}|$)", line)
        if not match:
            continue
        segments = re.sub(r"<[^>]*>", "*", match.group(1)).split(":")
        expanded: list[list[str]] = [[]]
        for segment in segments:
            expanded = [[*head, choice] for head in expanded for choice in segment.split("|")]
        families += expanded
    return [family for family in families if family]


def _family_documented(family: str, documented: list[list[str]]) -> bool:
    segments = family.split(":")
    return any(len(doc) == len(segments) and all(d in ("*", s) for d, s in zip(doc, segments, strict=True))
               for doc in documented)


def code_key_families() -> tuple[dict[str, set[str]], list[str]]:
    families: dict[str, set[str]] = {}
    unreadable = []
    for path, tree in _parsed(_production_python()):
        found, bad = key_families_in(tree)
        for family in found:
            families.setdefault(family, set()).add(str(path.relative_to(ROOT)))
        unreadable += [f"{path.relative_to(ROOT)} {call}" for call in bad]
    return families, unreadable


def test_every_redis_key_family_is_in_the_one_list():
    families, unreadable = code_key_families()
    documented = documented_key_families()
    missing = {family: sorted(files) for family, files in families.items()
               if not _family_documented(family, documented)}
    assert unreadable == [], "redis_key(...) whose family cannot be read: start it with string literals"
    assert missing == {}, "add these families to core/redis_client.py's docstring"


def test_every_listed_redis_key_family_is_built_somewhere():
    families, _ = code_key_families()
    stale = [":".join(doc) for doc in documented_key_families()
             if not any(_family_documented(family, [doc]) for family in families)]
    assert stale == []


def test_the_key_family_reader_sees_each_way_a_key_is_built():
    source = ('"""notifier:docstring:ignored"""\n'
              'PARTS = ("templates", "generation")\n'
              'a = redis_key("delivery", "batch_seen", token)\n'
              'b = core.redis_client.redis_key(*PARTS)\n'
              'c = redis_key("webhooks", "mailgun-token", "")\n'
              'd = "notifier:hardcoded:prefix:"\n'
              'e = redis_key(name, "x")\n')
    families, unreadable = key_families_in(ast.parse(source))
    assert families == ["delivery:batch_seen:*", "templates:generation", "webhooks:mailgun-token:*",
                        "hardcoded:prefix:*"]
    assert unreadable == ["line 7: redis_key(name, 'x')"]
    documented = documented_key_families()
    assert _family_documented("delivery:batch_seen:*", documented)
    assert _family_documented("fault:*:put_back", documented)
    assert not _family_documented("delivery:batch_unseen:*", documented)


# --- Celery queues -----------------------------------------------------------------------------

WORKER_ROLES = list(ROLES)


def _queue_literals(tree: ast.Module) -> set[str]:
    """`queue="..."` keywords and `{"queue": "..."}` entries (beat's periodic tasks)."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.keyword) and node.arg == "queue" and isinstance(node.value, ast.Constant):
            found.add(node.value.value)
        if isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values, strict=True):
                if (isinstance(key, ast.Constant) and key.value == "queue" and isinstance(value, ast.Constant)
                        and isinstance(value.value, str)):
                    found.add(value.value)
    return found


def _consumed_queues() -> set[str]:
    """-Q of every worker role and of any command in the Procfile / docker-compose.yml."""
    argvs = [worker_argv(role) for role in WORKER_ROLES]
    found = {q for argv in argvs for flag, value in pairwise(argv) if flag == "-Q"
             for q in value.split(",")}
    for path in PROCESS_FILES:
        found |= {q for value in re.findall(r"(?:-Q|--queues)[ =]([\w,.-]+)", path.read_text())
                  for q in value.split(",")}
    return found


def used_queues() -> dict[str, str]:
    """Each queue the code routes to or consumes, with where."""
    used = {q: "core/priorities.py ALL_QUEUES" for q in ALL_QUEUES}
    used[settings.CELERY_TASK_DEFAULT_QUEUE] = "CELERY_TASK_DEFAULT_QUEUE"
    for route in dict(getattr(settings, "CELERY_TASK_ROUTES", None) or {}).values():
        used.setdefault(route["queue"], "CELERY_TASK_ROUTES")
    for queue in _consumed_queues():
        used.setdefault(queue, "a worker's -Q")
    for path, tree in _parsed(_production_python(migrations=True)):
        for queue in _queue_literals(tree):
            used.setdefault(queue, str(path.relative_to(ROOT)))
    return used


def documented_queues() -> list[str]:
    table = _markdown_section(ARCHITECTURE, "### Queues")
    return [name for cell in _first_cells(table) for name in re.findall(r"`([^`]+)`", cell)]


def diagram_queues() -> set[str]:
    """Queue names in the Processes diagram: lower-case names joined by ` | `."""
    block = _markdown_section(ARCHITECTURE, "## Processes").split("```")[1]
    chains = re.findall(r"[a-z0-9][a-z0-9-]*(?: *\| *[a-z0-9][a-z0-9-]*)+", block)
    return {name.strip() for chain in chains for name in chain.split("|")}


def test_queues_the_code_uses_are_the_documented_queues():
    used, documented = used_queues(), documented_queues()
    assert len(documented) == len(set(documented)), "a queue appears twice in the Queues table"
    assert {q: w for q, w in used.items() if q not in documented} == {}, "missing from the Queues table"
    assert sorted(set(documented) - set(used)) == [], "the Queues table names a queue the code never uses"


def test_every_used_queue_is_declared():
    """A queue outside `task_queues` is consumed by no worker role."""
    assert {q: w for q, w in used_queues().items() if q not in ALL_QUEUES} == {}


def test_the_process_diagram_names_exactly_the_queues():
    assert diagram_queues() == set(documented_queues())


def test_the_docs_name_no_other_email_queue():
    queues = set(documented_queues())
    named = {(path.name, name) for path in [README, *sorted((ROOT / "docs").glob("*.md"))]
             for name in re.findall(r"\bemail-[a-z0-9-]*[a-z0-9](?![\w<.-])", path.read_text())}
    assert sorted((file, name) for file, name in named if name not in queues) == []


# --- Environment variables ---------------------------------------------------------------------

_READ_METHODS = {"get", "str", "int", "float", "bool", "list", "dict", "tuple", "json", "db", "url", "path",
                 "pop"}
# Not configuration: read to pass on (devtools/run.py puts the venv's bin/ first for honcho).
NOT_CONFIGURATION = {"PATH"}


def _dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    return ""


def _is_environment(node: ast.AST) -> bool:
    """`os.environ`, the settings' `env`, or a mapping named env / environ / environment."""
    return _dotted(node).split(".")[-1] in {"env", "environ", "environment"}


def _variable_name(node: ast.AST) -> str | None:
    """A literal name, or an f-string's with each interpolation as `*`."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        name = node.value
    elif isinstance(node, ast.JoinedStr):
        name = "".join(v.value if isinstance(v, ast.Constant) else "*" for v in node.values)
    else:
        return None
    return name if re.fullmatch(r"[A-Z][A-Z0-9_*]*", name) else None


def _read_name(node: ast.AST) -> str | None:
    """The variable this node reads: env.<cast>("X"), environ.get("X"), os.getenv("X"),
    environ["X"], "X" in environ. A setdefault only sets a default for a library or a child."""
    if isinstance(node, ast.Call) and node.args:
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr in _READ_METHODS and _is_environment(func.value):
            return _variable_name(node.args[0])
        if _dotted(func) in {"os.getenv", "getenv", "env"}:
            return _variable_name(node.args[0])
    if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load) and _is_environment(node.value):
        return _variable_name(node.slice)
    if (isinstance(node, ast.Compare) and isinstance(node.ops[0], ast.In | ast.NotIn)
            and _is_environment(node.comparators[0])):
        return _variable_name(node.left)
    return None


def variables_read_in(tree: ast.Module) -> set[str]:
    return {name for node in ast.walk(tree) for name in [_read_name(node)] if name}


def _process_file_variables() -> dict[str, str]:
    return {name: path.name for path in PROCESS_FILES
            for name in re.findall(r"\$\{?([A-Z][A-Z0-9_]*)", path.read_text())}


def variables_read(dirs: Iterable[str] | None = None) -> dict[str, str]:
    """Each variable read, with one file that reads it: the production code and its process
    files by default, else the Python under `dirs`."""
    paths = _production_python() if dirs is None else python_files(dirs, migrations=True)
    found = _process_file_variables() if dirs is None else {}
    for path, tree in _parsed(paths):
        for name in variables_read_in(tree):
            found.setdefault(name, str(path.relative_to(ROOT)))
    return found


def configuration_table() -> set[str]:
    """Names in the first column of the README's Configuration table (`<X>` is `*`)."""
    cells = _first_cells(_markdown_section(README, "## Configuration"))
    return {re.sub(r"<[^>]*>", "*", name) for cell in cells for name in re.findall(r"`([^`]+)`", cell)
            if re.fullmatch(r"[A-Z][A-Z0-9_]*(<[A-Z]+>)?[A-Z0-9_]*", name) and not re.fullmatch(r"P\d", name)}


def conventional_names() -> set[str]:
    table = CONTRIBUTING.read_text().split("| Conventional name |")[1].split("\n\n")[0]
    return {name for cell in _first_cells(table) for name in re.findall(r"`([A-Z][A-Z0-9_]*)`", cell)}


def naming_problem(name: str, conventional: set[str]) -> str | None:
    """Why `name` breaks docs/contributing.md's rule, or None."""
    if re.fullmatch(r"(NOTIFIER|FEEDBACK)_[A-Z0-9_*]+", name) or name in conventional:
        return None
    if name.startswith("DJANGO_"):
        setting = name.removeprefix("DJANGO_")
        if hasattr(global_settings, setting) or setting == "CONN_MAX_AGE":
            return None
        return f"DJANGO_ is for Django's own settings; {setting} is none"
    return "neither NOTIFIER_/FEEDBACK_/DJANGO_ nor a conventional name listed in docs/contributing.md"


def _documented(name: str, table: set[str]) -> bool:
    return any(name == row or fnmatchcase(row, name) or fnmatchcase(name, row) for row in table)


def test_every_variable_the_code_reads_is_in_the_configuration_table():
    table = configuration_table()
    missing = {name: where for name, where in variables_read().items()
               if name not in NOT_CONFIGURATION and not _documented(name, table)}
    assert missing == {}, "add a row to the README's Configuration table"


def test_the_configuration_table_names_no_variable_nothing_reads():
    read = variables_read()
    stale = sorted(row for row in configuration_table() if not any(_documented(name, {row}) for name in read))
    assert stale == []


@pytest.mark.parametrize("scope", ["production", "tests and bench"])
def test_every_variable_follows_the_naming_rule(scope: str):
    read = variables_read() if scope == "production" else variables_read(["tests", "bench"])
    conventional = conventional_names()
    broken = {name: (where, problem) for name, where in read.items()
              for problem in [naming_problem(name, conventional)] if problem}
    assert broken == {}


def test_every_conventional_name_allowed_is_read():
    read = {*variables_read(), *variables_read(["tests", "bench"])}
    assert sorted(conventional_names() - read) == [], "drop it from docs/contributing.md's list"


def test_the_naming_rule_refuses_what_it_should():
    conventional = conventional_names()
    assert naming_problem("NOTIFIER_X", conventional) is None
    assert naming_problem("DJANGO_SECRET_KEY", conventional) is None
    assert naming_problem("DJANGO_NOTIFIER_THING", conventional)
    assert naming_problem("ESP_POOL_SIZE", conventional)
    assert naming_problem("FLOWER_URL", conventional)
    assert naming_problem("DATABASE_URL", conventional) is None


def test_the_variable_reader_sees_each_way_a_variable_is_read():
    source = ('env.int("A_ONE", default=1)\nos.environ.get("A_TWO")\nos.getenv("A_THREE")\n'
              'os.environ["A_FOUR"]\n"A_FIVE" in os.environ\nenviron.get(f"A_P{n}_SIX")\n'
              'os.environ.setdefault("NOT_A_READ", "1")\nos.environ["NOT_A_READ_EITHER"] = "1"\n')
    expected = {"A_ONE", "A_TWO", "A_THREE", "A_FOUR", "A_FIVE", "A_P*_SIX"}
    assert variables_read_in(ast.parse(source)) == expected


def test_renamed_variables_keep_working_with_a_warning():
    environ = {"ESP_POOL_SIZE": "3", "FLOWER_URL": "http://old/", "NOTIFIER_FLOWER_URL": "http://new/"}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert adopt_renamed_variables(environ) == ["ESP_POOL_SIZE", "FLOWER_URL"]
    assert environ["NOTIFIER_ESP_POOL_SIZE"] == "3"
    assert environ["NOTIFIER_FLOWER_URL"] == "http://new/"
    assert [w.category for w in caught] == [FutureWarning, FutureWarning]
    assert "set NOTIFIER_ESP_POOL_SIZE" in str(caught[0].message)


def test_each_renamed_variable_is_read_under_its_new_name_and_listed_in_the_readme():
    read, readme = variables_read(), README.read_text()
    assert sorted(new for new in RENAMED.values() if new not in read) == []
    assert sorted(old for old in RENAMED if f"`{old}`" not in readme) == []


# --- The fault catalogue ------------------------------------------------------------------------

def test_the_fault_catalogue_names_a_test_for_every_fault_and_each_test_exists():
    text = (ROOT / "docs" / "fault_catalogue.md").read_text()
    rows = {int(m.group(1)) for m in re.finditer(r"^\| F(\d+) \|", text, re.M)}
    assert rows == set(range(1, 24))
    named = re.findall(r"`(tests/[\w/]+\.py)(?:::(\w+))?", text)
    assert len(named) > 30
    missing = [f"{path}::{test}" if test else path for path, test in named
               if not (ROOT / path).is_file() or (test and f"def {test}(" not in (ROOT / path).read_text())]
    assert missing == []
