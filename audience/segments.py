"""Segment definitions: validated JSON filters compiled to a parameterised SQL condition.

A definition is a group of conditions, nested at most `MAX_DEPTH` deep::

    {"match": "all",                       # or "any"
     "conditions": [
        {"field": "subscribed", "op": "equals", "value": true},
        {"field": "timezone", "op": "in", "value": ["Europe/Paris", "Europe/Berlin"]},
        {"field": "created_at", "op": "within_days", "value": 30},
        {"attribute": "plan", "op": "equals", "value": "pro"},
        {"attribute": "orders", "op": "gt", "value": 3},
        {"match": "any", "conditions": [...]}]}

Only whitelisted column names ever reach the SQL text; every value (attribute keys included)
travels as a parameter. The condition is written against the contact table aliased `c`.
An invalid definition raises `SegmentError` naming the offending part, e.g.
`definition.conditions[2].op`, which the API turns into a 400.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any
from zoneinfo import available_timezones

MAX_DEPTH = 3
MAX_CONDITIONS = 100
MAX_IN_VALUES = 1000
_ATTRIBUTE_KEY = re.compile(r"^[A-Za-z0-9_.\-]{1,64}$")
# Text columns and the operators they accept; subscribed and created_at have their own.
_TEXT_FIELDS = {"email", "name", "timezone", "locale"}
_COMPARISONS = {"gt": ">", "gte": ">=", "lt": "<", "lte": "<="}
_NUMBER = r"^-?[0-9]+(\.[0-9]+)?$"


class SegmentError(ValueError):
    def __init__(self, path: str, message: str):
        super().__init__(f"{path}: {message}")
        self.path = path
        self.message = message


@dataclass
class CompiledSegment:
    sql: str
    params: list[Any] = field(default_factory=list)


def segment_compile(definition: Any, path: str = "definition") -> CompiledSegment:
    """Validate and compile a definition; raises SegmentError."""
    return _group(definition, path, depth=1)


def _group(node: Any, path: str, depth: int) -> CompiledSegment:
    if not isinstance(node, dict):
        raise SegmentError(path, "must be an object with 'match' and 'conditions'.")
    if depth > MAX_DEPTH:
        raise SegmentError(path, f"groups nest at most {MAX_DEPTH} deep.")
    unknown = set(node) - {"match", "conditions"}
    if unknown:
        raise SegmentError(path, f"unknown keys: {', '.join(sorted(unknown))}.")
    match = node.get("match", "all")
    if match not in ("all", "any"):
        raise SegmentError(f"{path}.match", "must be 'all' or 'any'.")
    conditions = node.get("conditions")
    if not isinstance(conditions, list) or not conditions:
        raise SegmentError(f"{path}.conditions", "must be a non-empty list.")
    if len(conditions) > MAX_CONDITIONS:
        raise SegmentError(f"{path}.conditions", f"at most {MAX_CONDITIONS} conditions.")
    parts = [_node(item, f"{path}.conditions[{i}]", depth) for i, item in enumerate(conditions)]
    joiner = " AND " if match == "all" else " OR "
    return CompiledSegment(
        "(" + joiner.join(p.sql for p in parts) + ")", [v for p in parts for v in p.params]
    )


def _node(node: Any, path: str, depth: int) -> CompiledSegment:
    if isinstance(node, dict) and "conditions" in node:
        return _group(node, path, depth + 1)
    if not isinstance(node, dict):
        raise SegmentError(path, "must be an object.")
    unknown = set(node) - {"field", "attribute", "op", "value"}
    if unknown:
        raise SegmentError(path, f"unknown keys: {', '.join(sorted(unknown))}.")
    if "attribute" in node:
        return _attribute(node, path)
    return _field(node, path)


def _field(node: dict, path: str) -> CompiledSegment:
    name, op, value = node.get("field"), node.get("op"), node.get("value")
    if name == "subscribed":
        if op != "equals" or not isinstance(value, bool):
            raise SegmentError(path, "subscribed takes op 'equals' with true or false.")
        return CompiledSegment("c.subscribed = %s", [value])
    if name == "created_at":
        return _created_within(op, value, path)
    if name not in _TEXT_FIELDS:
        raise SegmentError(f"{path}.field", f"unknown field {name!r}; use one of "
                           f"{', '.join(sorted([*_TEXT_FIELDS, 'subscribed', 'created_at']))}.")
    values = _text_values(op, value, path)
    if name == "timezone":
        bad = sorted(set(values) - available_timezones() - {""})
        if bad:
            raise SegmentError(f"{path}.value", f"unknown time zone(s): {', '.join(bad[:5])}.")
    if name == "email":
        values = [v.lower() for v in values]
    return _in_or_equals(f"c.{name}", values, op)


def _created_within(op: Any, value: Any, path: str) -> CompiledSegment:
    if op != "within_days":
        raise SegmentError(f"{path}.op", "created_at takes op 'within_days'.")
    if not isinstance(value, int) or isinstance(value, bool) or not 0 < value <= 36500:
        raise SegmentError(f"{path}.value", "must be a whole number of days between 1 and 36500.")
    from datetime import timedelta

    from django.utils import timezone

    return CompiledSegment("c.created_at >= %s", [timezone.now() - timedelta(days=value)])


def _attribute(node: dict, path: str) -> CompiledSegment:
    key, op, value = node["attribute"], node.get("op"), node.get("value")
    if not isinstance(key, str) or not _ATTRIBUTE_KEY.match(key):
        raise SegmentError(f"{path}.attribute", "must be 1-64 letters, digits, '_', '.' or '-'.")
    if op in _COMPARISONS:
        if not isinstance(value, int | float) or isinstance(value, bool):
            raise SegmentError(f"{path}.value", f"op {op!r} needs a number.")
        expression = _numeric_attribute()
        keys = [key] * expression.count("%s")
        return CompiledSegment(f"{expression} {_COMPARISONS[op]} %s", [*keys, value])
    if op == "exists":
        return CompiledSegment("(c.attributes ->> %s) IS NOT NULL", [key])
    values = _text_values(op, value, path)
    return _in_or_equals("(c.attributes ->> %s)", values, op, prefix=[key])


def _numeric_attribute() -> str:
    """The attribute as a number, NULL when it is not one (never a cast error mid-fan-out)."""
    return "(CASE WHEN (c.attributes ->> %s) ~ '" + _NUMBER + "' THEN (c.attributes ->> %s)::numeric END)"


def _text_values(op: Any, value: Any, path: str) -> list[str]:
    if op == "equals":
        if not isinstance(value, str | int | float) or isinstance(value, bool):
            raise SegmentError(f"{path}.value", "op 'equals' needs a string or a number.")
        return [str(value)]
    if op == "in":
        if not isinstance(value, list) or not value or len(value) > MAX_IN_VALUES:
            raise SegmentError(f"{path}.value", f"op 'in' needs a list of 1-{MAX_IN_VALUES} values.")
        if any(not isinstance(v, str | int | float) or isinstance(v, bool) for v in value):
            raise SegmentError(f"{path}.value", "op 'in' takes strings or numbers.")
        return [str(v) for v in value]
    raise SegmentError(f"{path}.op", f"unknown op {op!r}; use equals, in, gt, gte, lt, lte, "
                       "exists or within_days.")


def _in_or_equals(column: str, values: list[str], op: str, prefix: list | None = None) -> CompiledSegment:
    prefix = prefix or []
    if op == "equals":
        return CompiledSegment(f"{column} = %s", [*prefix, values[0]])
    marks = ", ".join(["%s"] * len(values))
    return CompiledSegment(f"{column} IN ({marks})", [*prefix, *values])
