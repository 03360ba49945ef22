"""Output JSON Schemas compiled to DuckDB SQL, so a million answers validate in one query.

Supported subset (the structured-output subset providers accept): an object root; properties typed
string / number / integer / boolean / array / object (nullable via ["type", "null"]); `required`,
`additionalProperties: false`, `enum`, `minimum`/`maximum`, `minLength`/`maxLength`, `pattern`,
`minItems`/`maxItems`, array `items` of a primitive type (with `enum`), nested objects.
`check_supported_schema` rejects anything else at load time, so validation can never be skipped.
"""

from __future__ import annotations

import json

_TYPE_TESTS = {
    "string": "{t} = 'VARCHAR'",
    "number": "{t} IN ('BIGINT', 'UBIGINT', 'HUGEINT', 'DOUBLE')",
    "integer": "({t} IN ('BIGINT', 'UBIGINT', 'HUGEINT') OR ({t} = 'DOUBLE' AND {v}::DOUBLE = round({v}::DOUBLE)))",
    "boolean": "{t} = 'BOOLEAN'",
    "array": "{t} = 'ARRAY'",
    "object": "{t} = 'OBJECT'",
    "null": "{t} = 'NULL'",
}
_ALLOWED = {
    "type",
    "properties",
    "required",
    "additionalProperties",
    "enum",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "minLength",
    "maxLength",
    "pattern",
    "items",
    "minItems",
    "maxItems",
    "description",
    "title",
    "$schema",
    "$id",
    "default",
    "examples",
}


def _types(schema: dict) -> list[str]:
    t = schema.get("type")
    return [t] if isinstance(t, str) else list(t or [])


def check_supported_schema(schema: dict, where: str = "the schema root") -> str | None:
    """None if the schema is within the supported subset, else what is not."""
    if where == "the schema root" and _types(schema) != ["object"]:
        return 'the root must be {"type": "object", "properties": {...}}'
    unknown = set(schema) - _ALLOWED
    if unknown:
        return f"keyword(s) {sorted(unknown)} at {where} are not supported"
    types = _types(schema)
    if not types or any(t not in _TYPE_TESTS for t in types):
        return f"{where} needs a 'type' among {sorted(_TYPE_TESTS)}"
    if "object" in types:
        for name, sub in (schema.get("properties") or {}).items():
            problem = check_supported_schema(sub, f"property '{name}'")
            if problem:
                return problem
        missing = set(schema.get("required", [])) - set(schema.get("properties") or {})
        if missing:
            return f"required field(s) {sorted(missing)} at {where} have no property definition"
    if "array" in types and "items" in schema:
        items = schema["items"]
        if set(_types(items)) & {"array", "object"}:
            return f"arrays of arrays/objects at {where} are not supported"
        problem = check_supported_schema(items, f"the items of {where}")
        if problem:
            return problem
    return None


def _lit(value) -> str:
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    if isinstance(value, bool):
        return "true" if value else "false"
    return repr(value)


def _path_lit(path: str) -> str:
    return _lit(path)


def _value_checks(schema: dict, value_sql: str, type_sql: str, label: str) -> list[tuple[str, str]]:
    """(condition that must hold, message) pairs for one JSON value, in the order they are reported."""
    types = _types(schema)
    concrete = [t for t in types if t != "null"]
    tests = " OR ".join(_TYPE_TESTS[t].format(t=type_sql, v=value_sql) for t in types)
    checks: list[tuple[str, str]] = [(f"({tests})", f"{label}: expected {'/'.join(types)}")]
    guard = f"{type_sql} = 'NULL' OR " if "null" in types else ""
    str_sql = f"({value_sql} ->> '$')"
    if "enum" in schema:
        checks.append(_enum_check(schema["enum"], type_sql, str_sql, label, guard))
    if "string" in concrete:
        checks.extend(_string_checks(schema, str_sql, label, guard))
    checks.extend(_number_checks(schema, str_sql, label, guard))
    if "array" in concrete:
        checks.extend(_array_checks(schema, value_sql, label, guard))
    if "object" in concrete:
        checks.extend(_object_checks(schema, value_sql, label, guard))
    return checks


def _enum_check(enum: list, type_sql: str, str_sql: str, label: str, guard: str) -> tuple[str, str]:
    # Strings compare as text, numbers as numbers (TRY_CAST: a huge or odd value is a
    # violation of this one answer, never an error of the whole query).
    texts = [v for v in enum if isinstance(v, str)]
    numbers = [v for v in enum if isinstance(v, (int, float)) and not isinstance(v, bool)]
    bools = [v for v in enum if isinstance(v, bool)]
    options = []
    if texts:
        options.append(f"({type_sql} = 'VARCHAR' AND {str_sql} IN ({', '.join(_lit(v) for v in texts)}))")
    if numbers:
        options.append(f"TRY_CAST({str_sql} AS DOUBLE) IN ({', '.join(repr(float(v)) for v in numbers)})")
    if bools:
        options.append(f"({type_sql} = 'BOOLEAN' AND {str_sql} IN ({', '.join(_lit(str(v).lower()) for v in bools)}))")
    return f"({guard}{' OR '.join(options) or 'false'})", f"{label}: not one of {enum}"


def _string_checks(schema: dict, str_sql: str, label: str, guard: str) -> list[tuple[str, str]]:
    checks = []
    if "minLength" in schema:
        checks.append(
            (
                f"({guard}length({str_sql}) >= {int(schema['minLength'])})",
                f"{label}: shorter than {schema['minLength']}",
            )
        )
    if "maxLength" in schema:
        checks.append(
            (f"({guard}length({str_sql}) <= {int(schema['maxLength'])})", f"{label}: longer than {schema['maxLength']}")
        )
    if "pattern" in schema:
        checks.append(
            (
                f"({guard}regexp_matches({str_sql}, {_lit(schema['pattern'])}))",
                f"{label}: does not match {schema['pattern']}",
            )
        )
    return checks


def _number_checks(schema: dict, str_sql: str, label: str, guard: str) -> list[tuple[str, str]]:
    num = f"TRY_CAST({str_sql} AS DOUBLE)"
    bounds = (("minimum", ">="), ("maximum", "<="), ("exclusiveMinimum", ">"), ("exclusiveMaximum", "<"))
    return [
        (f"({guard}{num} {op} {float(schema[key])!r})", f"{label}: {key} {schema[key]}")
        for key, op in bounds
        if key in schema
    ]


def _array_checks(schema: dict, value_sql: str, label: str, guard: str) -> list[tuple[str, str]]:
    checks = []
    length = f"json_array_length({value_sql})"
    if "minItems" in schema:
        checks.append(
            (f"({guard}{length} >= {int(schema['minItems'])})", f"{label}: fewer than {schema['minItems']} items")
        )
    if "maxItems" in schema:
        checks.append(
            (f"({guard}{length} <= {int(schema['maxItems'])})", f"{label}: more than {schema['maxItems']} items")
        )
    if "items" in schema:
        item_checks = _value_checks(schema["items"], "x", "json_type(x)", f"{label}[]")
        every = " AND ".join(cond for cond, _ in item_checks)
        checks.append(
            (
                f"({guard}coalesce(list_bool_and(list_transform("
                f"json_extract({value_sql}, '$[*]'), lambda x: {every})), true))",
                f"{label}: an item is not {json.dumps(schema['items'], ensure_ascii=False)}",
            )
        )
    return checks


def schema_fields_sql(schema: dict, json_sql: str) -> str | None:
    """The top-level fields the checks of an object schema look at, as ONE multi-path json_extract
    (a list of JSON values: NULL for a missing field, 'null' for a JSON null); None when there are
    none. Computed once per answer as a column and handed to schema_violation_sql, it parses the
    answer's text once instead of once per check."""
    names = _field_names(schema)
    return f"json_extract({json_sql}, [{', '.join(_path_lit('$.' + json.dumps(n)) for n in names)}])" if names else None


def _field_names(schema: dict) -> list[str]:
    return list(dict.fromkeys([*(schema.get("properties") or {}), *schema.get("required", [])]))


def _object_checks(
    schema: dict, value_sql: str, label: str, guard: str = "", fields_sql: str | None = None
) -> list[tuple[str, str]]:
    checks: list[tuple[str, str]] = []
    props = schema.get("properties") or {}
    if fields_sql:  # the fields, already extracted (schema_fields_sql)
        field = {n: f"{fields_sql}[{i + 1}]" for i, n in enumerate(_field_names(schema))}
    else:
        field = {n: f"json_extract({value_sql}, {_path_lit('$.' + json.dumps(n))})" for n in _field_names(schema)}
    for name in schema.get("required", []):
        checks.append((f"({guard}{field[name]} IS NOT NULL)", f"{label}.{name}: required field missing"))
    if schema.get("additionalProperties") is False:
        allowed = ", ".join(_lit(p) for p in props) or "NULL"
        checks.append(
            (
                f"({guard}coalesce(list_bool_and(list_transform("
                f"json_keys({value_sql}), lambda k: k IN ({allowed}))), true))",
                f"{label}: has fields not in the schema (allowed: {', '.join(props)})",
            )
        )
    for name, sub in props.items():
        sub_value = field[name]
        sub_type = f"json_type({sub_value})"
        # A missing optional field is fine; only present values are checked.
        for cond, msg in _value_checks(sub, sub_value, sub_type, f"{label}.{name}"):
            checks.append((f"({sub_value} IS NULL OR {cond})", msg))
    return checks


def schema_violation_sql(schema: dict, json_sql: str, fields_sql: str | None = None) -> str:
    """A SQL expression: NULL when `json_sql` (a JSON value) matches the schema, else the first
    violation. `fields_sql`: a column holding schema_fields_sql(schema, json_sql), if there is one."""
    checks = [(f"json_type({json_sql}) = 'OBJECT'", "answer is not a JSON object")]
    checks += _object_checks(schema, json_sql, "answer", fields_sql=fields_sql)
    whens = " ".join(f"WHEN NOT coalesce({cond}, false) THEN {_lit(msg)}" for cond, msg in checks)
    return f"CASE {whens} ELSE NULL END"


FIELD_SQL_TYPES = {
    "string": "VARCHAR",
    "number": "DOUBLE",
    "integer": "BIGINT",
    "boolean": "BOOLEAN",
    "array": "JSON",
    "object": "JSON",
}


def field_sql_type(schema: dict, field: str) -> str:
    """The SQL type an output field is written as (JSON when it may be of several types)."""
    types = schema["properties"][field].get("type")
    types = [types] if isinstance(types, str) else [t for t in (types or []) if t != "null"]
    return FIELD_SQL_TYPES[types[0]] if len(types) == 1 and types[0] in FIELD_SQL_TYPES else "JSON"
