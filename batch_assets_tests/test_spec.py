"""Task specs: the real task loads; every invalid spec names the file, the field and the fix;
Dagster's component loading points at the YAML file and line; output schemas compile to SQL checks
that agree with JSON Schema itself."""

from __future__ import annotations

import json
import shutil
import sys
import uuid
from collections.abc import Callable
from pathlib import Path

import dagster as dg
import duckdb
import jsonschema
import pytest
import yaml

from batch_assets.spec.output_schema import check_supported_schema, schema_violation_sql
from batch_assets.spec.resolve import TaskSpecError, load_all_tasks, load_task_file, tasks_dir

REAL_TASK_DIR = tasks_dir() / "ticket_triage"


# --- helpers ---------------------------------------------------------------------------------------


def write_task(
    folder: Path,
    mutate: Callable[[dict], None] | None = None,
    *,
    template: str | None = None,
    schema: str | dict | None = None,
) -> Path:
    """A copy of the real ticket_triage task folder with `mutate` applied to its `attributes:`."""
    folder.mkdir(parents=True, exist_ok=True)
    for f in REAL_TASK_DIR.iterdir():
        if f.is_file():
            shutil.copy(f, folder / f.name)
    doc = yaml.safe_load((folder / "defs.yaml").read_text(encoding="utf-8"))
    if mutate:
        mutate(doc["attributes"])
    (folder / "defs.yaml").write_text(yaml.safe_dump(doc, sort_keys=False, allow_unicode=True), encoding="utf-8")
    if template is not None:
        (folder / doc["attributes"]["prompt"]["template"]).write_text(template, encoding="utf-8")
    if schema is not None:
        text = schema if isinstance(schema, str) else json.dumps(schema)
        (folder / doc["attributes"]["output"]["schema_file"]).write_text(text, encoding="utf-8")
    return folder / "defs.yaml"


def setter(path: str, value) -> Callable[[dict], None]:
    def mutate(attrs: dict) -> None:
        *parents, last = path.split(".")
        node = attrs
        for p in parents:
            node = node[p]
        node[last] = value

    return mutate


def line_of(yaml_path: Path, startswith: str) -> int:
    """1-based line number of the first line whose stripped text starts with `startswith`."""
    for n, line in enumerate(yaml_path.read_text(encoding="utf-8").splitlines(), start=1):
        if line.strip().startswith(startswith):
            return n
    raise AssertionError(f"{startswith!r} not in {yaml_path}")


def error_chain_text(exc: BaseException) -> str:
    parts, seen = [], set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        parts.append(f"{type(exc).__name__}: {exc}")
        exc = exc.__cause__ or exc.__context__
    return "\n".join(parts)


# --- the real task ----------------------------------------------------------------------------------


def test_real_task_loads(ticket_task):
    spec = ticket_task.spec
    assert ticket_task.name == "ticket_triage" == spec.name
    assert ticket_task.yaml_path == REAL_TASK_DIR / "defs.yaml"
    assert spec.item_type == "ticket" and spec.provider == "openai" and spec.endpoint == "/v1/chat/completions"
    assert ticket_task.template_columns == ("language", "subject", "body")
    assert set(ticket_task.output_schema["properties"]) == {"category", "confidence", "reason"}
    assert dict(spec.apply.columns) == {"category": "category", "confidence": "confidence", "reason": "reason"}
    # Limits come from the provider's limits.yaml (no override in the task file).
    assert ticket_task.limits.max_requests_per_shard == 50_000
    assert ticket_task.limits.request_id_max_len == 64
    assert ticket_task.task_id("2026-11-20") == "ticket_triage_20261120"
    assert json.loads(ticket_task.params_json) == {"max_tokens": 200, "temperature": 0.0}
    assert "ticket_triage" in load_all_tasks()


def test_task_limits_override_only_the_given_fields(tmp_path):
    task = load_task_file(write_task(tmp_path / "t", setter("limits", {"max_requests_per_shard": 7})))
    assert task.limits.max_requests_per_shard == 7
    assert task.limits.max_shard_bytes == 209_715_200  # untouched provider value


# --- invalid specs: file, field and fix ---------------------------------------------------------------

NOT_A_SCHEMA = {"type": "object", "properties": {"category": {"type": "strng"}}}
ONE_OF = {
    "type": "object",
    "properties": {"category": {"oneOf": [{"type": "string"}, {"type": "number"}]}},
    "required": ["category"],
}
ARRAY_ROOT = {"type": "array", "items": {"type": "string"}}
ARRAY_OF_OBJECTS = {
    "type": "object",
    "properties": {"category": {"type": "string"}, "tags": {"type": "array", "items": {"type": "object"}}},
}

INVALID_SPECS = [
    # id, mutate, template, schema, fragments the message must contain
    (
        "limit_above_the_providers",
        setter("limits", {"max_concurrent_jobs": 999}),
        None,
        None,
        ["field 'limits.max_concurrent_jobs'", "999 is above the provider's", "Fix: a task may only lower"],
    ),
    (
        "unknown_provider",
        setter("provider", "acme_ai"),
        None,
        None,
        ["provider", "unknown provider 'acme_ai'", "use one of:", "openai"],
    ),
    (
        "unsupported_endpoint",
        setter("endpoint", "/v1/images/generations"),
        None,
        None,
        ["endpoint '/v1/images/generations' is not supported", "use one of:", "/v1/chat/completions"],
    ),
    (
        "missing_prompt_file",
        setter("prompt.template", "prompt.v9.txt"),
        None,
        None,
        ["field 'prompt.template'", "prompt.v9.txt not found", "Fix: create the template file"],
    ),
    (
        "template_without_placeholders",
        None,
        "Classify this ticket.\n",
        None,
        ["field 'prompt.template'", "no {{ column }} placeholder", "Fix: reference at least one column"],
    ),
    (
        "malformed_placeholder",
        None,
        "Subject: {{ subject }}\nBody: {{ body\n",
        None,
        ["field 'prompt.template'", "malformed placeholder", "Fix: write placeholders as {{ column_name }}"],
    ),
    (
        "schema_not_json",
        None,
        None,
        '{"type": "object", "properties": {',
        ["field 'output.schema_file'", "is not valid JSON", "Fix: fix the JSON syntax"],
    ),
    (
        "schema_not_a_json_schema",
        None,
        None,
        NOT_A_SCHEMA,
        ["field 'output.schema_file'", "is not a valid JSON Schema", "Fix:", "draft 2020-12"],
    ),
    (
        "schema_oneOf",
        None,
        None,
        ONE_OF,
        [
            "field 'output.schema_file'",
            "['oneOf']",
            "property 'category'",
            "not supported",
            "Fix: use the structured-output subset",
        ],
    ),
    (
        "schema_array_root",
        None,
        None,
        ARRAY_ROOT,
        ["field 'output.schema_file'", "the root must be", "Fix: use the structured-output subset"],
    ),
    (
        "schema_array_of_objects",
        None,
        None,
        ARRAY_OF_OBJECTS,
        ["field 'output.schema_file'", "arrays of arrays/objects", "Fix:"],
    ),
    (
        "apply_column_not_in_schema",
        setter("apply.columns", {"category": "label"}),
        None,
        None,
        ["field 'apply.columns.category'", "output field 'label'", "Fix: map to one of: category, confidence, reason"],
    ),
    (
        "sql_without_partition_date",
        setter("source.sql", "SELECT ticket_id, subject, body, language FROM support_tickets"),
        None,
        None,
        ["source.sql", "$partition_date", "WHERE created_date = $partition_date"],
    ),
    (
        "sql_not_a_select",
        setter("source.sql", "DELETE FROM support_tickets WHERE created_date = $partition_date"),
        None,
        None,
        ["source.sql", "must be exactly one SELECT", "DELETE"],
    ),
    (
        "sql_two_statements",
        setter(
            "source.sql",
            "SELECT ticket_id, subject, body, language FROM support_tickets "
            "WHERE created_date = $partition_date; CREATE TABLE pwned AS SELECT 1",
        ),
        None,
        None,
        ["source.sql", "must be exactly one SELECT", "2 statement(s): SELECT, CREATE"],
    ),
    (
        "sql_copy_out",
        setter(
            "source.sql", "COPY (SELECT * FROM support_tickets WHERE created_date = $partition_date) TO '/tmp/leak.csv'"
        ),
        None,
        None,
        ["source.sql", "must be exactly one SELECT", "COPY"],
    ),
    (
        "sql_unparsable",
        setter("source.sql", "SELEC ticket_id FROM support_tickets WHERE created_date = $partition_date"),
        None,
        None,
        ["source.sql", "is not valid DuckDB SQL"],
    ),
    ("bad_task_name", setter("name", "Ticket-Triage"), None, None, ["name", "use lower-case letters, digits and '_'"]),
    ("bad_item_type", setter("item_type", "Support Ticket"), None, None, ["item_type", "use lower-case letters"]),
    ("unknown_field", setter("modle", "gpt-4o-mini"), None, None, ["modle", "Extra inputs are not permitted"]),
    (
        "bad_apply_table",
        setter("apply.table", "ticket labels"),
        None,
        None,
        ["apply.table", "not a plain SQL identifier"],
    ),
]


@pytest.mark.parametrize(
    ("mutate", "template", "schema", "fragments"), [pytest.param(*case[1:], id=case[0]) for case in INVALID_SPECS]
)
def test_invalid_spec_names_file_field_and_fix(tmp_path, mutate, template, schema, fragments):
    yaml_path = write_task(tmp_path / "task", mutate, template=template, schema=schema)
    with pytest.raises(TaskSpecError) as info:
        load_task_file(yaml_path)
    message = str(info.value)
    assert str(yaml_path) in message
    for fragment in fragments:
        assert fragment in message, f"{fragment!r} missing from:\n{message}"


def test_wrong_component_type_is_named(tmp_path):
    yaml_path = write_task(tmp_path / "task")
    yaml_path.write_text(yaml_path.read_text().replace("batch_assets.components.BatchTask", "my.Other"))
    with pytest.raises(TaskSpecError, match=r"field 'type'.*Fix: set `type: batch_assets.components.BatchTask`"):
        load_task_file(yaml_path)


def test_two_tasks_with_the_same_name_are_rejected(tmp_path):
    first = write_task(tmp_path / "tasks" / "a")
    second = write_task(tmp_path / "tasks" / "b")
    with pytest.raises(TaskSpecError) as info:
        load_all_tasks(tmp_path / "tasks")
    message = str(info.value)
    assert str(second) in message and str(first) in message
    assert "field 'name'" in message and "unique name" in message


# --- loading through Dagster (the BatchTask component in a defs folder) ---------------------------------


@pytest.fixture
def dg_project(tmp_path, monkeypatch):
    """A throwaway dg project under tmp_path; returns (project_root, task_folder_maker)."""
    module = f"bt_spec_proj_{uuid.uuid4().hex[:10]}"
    root = tmp_path / "proj"
    (root / module / "defs" / "tasks").mkdir(parents=True)
    (root / "pyproject.toml").write_text(
        f'[tool.dg]\ndirectory_type = "project"\n[tool.dg.project]\nroot_module = "{module}"\n'
    )
    (root / module / "__init__.py").write_text("")
    (root / module / "defs" / "__init__.py").write_text("")
    # The project's shared resources, as the real defs folder provides them.
    shutil.copy(tasks_dir().parent / "resources.py", root / module / "defs" / "resources.py")
    monkeypatch.syspath_prepend(str(root))
    yield root, lambda name, *a, **kw: write_task(root / module / "defs" / "tasks" / name, *a, **kw)
    for name in [m for m in sys.modules if m == module or m.startswith(module + ".")]:
        del sys.modules[name]


def load_project(root: Path) -> dg.Definitions:
    return dg.load_from_defs_folder(path_within_project=root)


def test_dagster_loads_a_task_folder_as_its_asset_group(dg_project):
    root, make_task = dg_project
    make_task("other", setter("name", "other_triage"))
    defs = load_project(root)
    keys = {k.to_user_string() for k in defs.resolve_asset_graph().get_all_asset_keys()}
    # The source table the manifest reads shows as an (external) asset even without the project's defs/tables.py.
    assert keys == {
        f"other_triage/{s}"
        for s in ("manifest", "shards", "submissions", "raw_results", "parsed_results", "applied", "settled", "report")
    } | {"warehouse/support_tickets"}
    assert defs.resolve_job_def("other_triage__submit") is not None


def broken_error(defs: dg.Definitions, folder: str) -> str:
    """The one-line error the broken task folder's `task_spec` asset carries (components/broken_task.py)."""
    specs = [s for s in defs.resolve_all_asset_specs() if s.key.path[-1] == "task_spec"]
    assert len(specs) == 1, [s.key for s in specs]
    assert folder in specs[0].description
    return specs[0].metadata["error"]


@pytest.mark.parametrize(
    ("mutate", "line_key", "fragment"),
    [
        pytest.param(setter("provider", "acme_ai"), "provider:", "unknown provider 'acme_ai'", id="provider"),
        pytest.param(
            setter("source.sql", "SELECT ticket_id, subject, body, language FROM support_tickets"),
            "sql:",
            "$partition_date",
            id="source_sql",
        ),
        pytest.param(setter("name", "Ticket-Triage"), "name: Ticket-Triage", "lower-case", id="name"),
        pytest.param(
            setter("params", {"temperature": 5.0, "max_tokens": 200}),
            "temperature:",
            "less than or equal to 2",
            id="params_temperature",
        ),
        pytest.param(
            setter("endpoint", "/v1/images/generations"),
            "endpoint:",
            "endpoint '/v1/images/generations' is not supported",
            id="endpoint",
        ),
        pytest.param(setter("owners", ["support ops"]), "owners:", "are not owners", id="owners"),
        pytest.param(setter("tags", {"cost center": "x"}), "tags:", "are not valid tags", id="tags"),
    ],
)
def test_dagster_reports_yaml_file_and_line(dg_project, mutate, line_key, fragment):
    root, make_task = dg_project
    yaml_path = make_task("bad", mutate)
    error = broken_error(load_project(root), "bad")  # the code location loads; the folder shows its error
    assert fragment in error
    assert str(yaml_path) in error and f"(line {line_of(yaml_path, line_key)})" in error, error


def test_dagster_reports_file_level_problems_with_file_and_field(dg_project):
    root, make_task = dg_project
    yaml_path = make_task("bad", setter("prompt.template", "prompt.v9.txt"))
    error = broken_error(load_project(root), "bad")
    assert str(yaml_path) in error and "field 'prompt.template'" in error and "prompt.v9.txt not found" in error


# --- schema_violation_sql: the output schema compiled to one SQL expression ----------------------------

SCHEMA = {
    "type": "object",
    "properties": {
        "category": {"type": "string", "enum": ["billing", "technical", "account"]},
        "confidence": {"type": "number", "minimum": 0, "maximum": 1},
        "priority": {"type": "integer", "minimum": 1, "maximum": 5},
        "reason": {"type": "string", "minLength": 3, "maxLength": 10},
        "code": {"type": "string", "pattern": "^[A-Z]{3}-[0-9]+$"},
        "urgent": {"type": "boolean"},
        "tags": {"type": "array", "items": {"type": "string", "enum": ["a", "b", "c"]}, "minItems": 1, "maxItems": 2},
        "scores": {"type": "array", "items": {"type": "number", "exclusiveMinimum": 0}},
        "level": {"type": "integer", "enum": [1, 2, 3]},
        "note": {"type": ["string", "null"], "maxLength": 5},
        "customer": {
            "type": "object",
            "properties": {"tier": {"type": "string", "enum": ["free", "pro"]}},
            "required": ["tier"],
            "additionalProperties": False,
        },
    },
    "required": ["category", "confidence", "priority"],
    "additionalProperties": False,
}
BASE = {"category": "billing", "confidence": 0.5, "priority": 3}

GOOD = {
    "minimal": BASE,
    "confidence_at_minimum": {**BASE, "confidence": 0},
    "confidence_at_maximum": {**BASE, "confidence": 1},
    "integer_written_as_float": {**BASE, "priority": 2.0},
    "string_at_max_length": {**BASE, "reason": "abcdefghij"},
    "unicode_string_length_in_characters": {**BASE, "reason": "日本語の理由"},
    "pattern_match": {**BASE, "code": "ABC-12"},
    "boolean": {**BASE, "urgent": False},
    "array_within_bounds": {**BASE, "tags": ["a", "c"]},
    "numbers_array": {**BASE, "scores": [0.1, 2, 7.5]},
    "empty_unconstrained_array": {**BASE, "scores": []},
    "integer_enum": {**BASE, "level": 2},
    "nullable_null": {**BASE, "note": None},
    "nullable_value": {**BASE, "note": "abc"},
    "nested_object": {**BASE, "customer": {"tier": "pro"}},
    "quote_in_string": {**BASE, "reason": 'it\'s "ok"'},
}
BAD = {
    "enum": ({**BASE, "category": "shipping"}, "answer.category: not one of"),
    "missing_required": ({"confidence": 0.5, "priority": 3}, "answer.category: required field missing"),
    "additional_property": ({**BASE, "extra": 1}, "has fields not in the schema"),
    "above_maximum": ({**BASE, "confidence": 1.5}, "answer.confidence: maximum 1"),
    "below_minimum": ({**BASE, "confidence": -0.1}, "answer.confidence: minimum 0"),
    "number_as_string": ({**BASE, "confidence": "0.5"}, "answer.confidence: expected number"),
    "integer_with_fraction": ({**BASE, "priority": 2.5}, "answer.priority: expected integer"),
    "boolean_as_integer": ({**BASE, "priority": True}, "answer.priority: expected integer"),
    "integer_above_maximum": ({**BASE, "priority": 6}, "answer.priority: maximum 5"),
    "string_too_short": ({**BASE, "reason": "ab"}, "answer.reason: shorter than 3"),
    "string_too_long": ({**BASE, "reason": "abcdefghijk"}, "answer.reason: longer than 10"),
    "length_counts_code_points_not_graphemes": ({**BASE, "reason": "e\u0301" * 6}, "answer.reason: longer than 10"),
    "pattern_mismatch": ({**BASE, "code": "abc-1"}, "answer.code: does not match"),
    "boolean_as_string": ({**BASE, "urgent": "yes"}, "answer.urgent: expected boolean"),
    "array_too_short": ({**BASE, "tags": []}, "answer.tags: fewer than 1 items"),
    "array_too_long": ({**BASE, "tags": ["a", "b", "c"]}, "answer.tags: more than 2 items"),
    "array_item_not_in_enum": ({**BASE, "tags": ["a", "d"]}, "answer.tags: an item is not"),
    "array_item_wrong_type": ({**BASE, "tags": [1]}, "answer.tags: an item is not"),
    "array_as_string": ({**BASE, "tags": "a"}, "answer.tags: expected array"),
    "array_item_exclusive_minimum": ({**BASE, "scores": [1, 0]}, "answer.scores: an item is not"),
    "integer_not_in_enum": ({**BASE, "level": 4}, "answer.level: not one of"),
    "nullable_too_long": ({**BASE, "note": "toolong"}, "answer.note: longer than 5"),
    "null_for_non_nullable": ({**BASE, "category": None}, "answer.category: expected string"),
    "nested_required": ({**BASE, "customer": {}}, "answer.customer.tier: required field missing"),
    "nested_additional_property": ({**BASE, "customer": {"tier": "pro", "x": 1}}, "answer.customer: has fields"),
    "nested_enum": ({**BASE, "customer": {"tier": "vip"}}, "answer.customer.tier: not one of"),
    "not_an_object": (["billing"], "answer is not a JSON object"),
    "a_bare_string": ("billing", "answer is not a JSON object"),
    "huge_integer_not_in_enum": pytest.param({**BASE, "level": 10**20}, "answer.level: not one of"),
}


def violation(schema: dict, answer) -> str | None:
    with duckdb.connect() as conn:
        return conn.execute(
            f"SELECT {schema_violation_sql(schema, 'answer')} FROM (SELECT ?::JSON AS answer)", [json.dumps(answer)]
        ).fetchone()[0]


def test_the_test_schema_is_supported():
    assert check_supported_schema(SCHEMA) is None
    jsonschema.Draft202012Validator.check_schema(SCHEMA)


@pytest.mark.parametrize("answer", list(GOOD.values()), ids=list(GOOD))
def test_schema_sql_accepts_valid_answers(answer):
    assert jsonschema.Draft202012Validator(SCHEMA).is_valid(answer), "test case itself must be valid"
    assert violation(SCHEMA, answer) is None


@pytest.mark.parametrize(("answer", "message"), list(BAD.values()), ids=list(BAD))
def test_schema_sql_rejects_invalid_answers_with_the_field(answer, message):
    assert not jsonschema.Draft202012Validator(SCHEMA).is_valid(answer), "test case itself must be invalid"
    found = violation(SCHEMA, answer)
    assert found is not None and message in found, found


def test_schema_sql_checks_many_answers_in_one_query_without_mixing_them_up():
    """Set-based: one query over a column of answers gives each row its own verdict."""
    answers = [BASE, {**BASE, "category": "x"}, {**BASE, "tags": []}, GOOD["nested_object"], {"confidence": 1}]
    with duckdb.connect() as conn:
        got = [
            r[0]
            for r in conn.execute(
                f"SELECT {schema_violation_sql(SCHEMA, 'answer')} FROM (SELECT unnest(?::JSON[]) AS answer, "
                "generate_subscripts(?::JSON[], 1) AS i) ORDER BY i",
                [[json.dumps(a) for a in answers]] * 2,
            ).fetchall()
        ]
    assert [g is None for g in got] == [True, False, False, True, False]
    assert "answer.category: not one of" in got[1] and "fewer than 1 items" in got[2]


def test_real_task_schema_sql_matches_jsonschema(ticket_task):
    schema = ticket_task.output_schema
    validator = jsonschema.Draft202012Validator(schema)
    cases = [
        {"category": "billing", "confidence": 0.9, "reason": "refund"},
        {"category": "other", "confidence": 0.9, "reason": "x"},
        {"category": "billing", "confidence": 2, "reason": "x"},
        {"category": "billing", "confidence": 0.2},
        {"category": "billing", "confidence": 0.2, "reason": "x" * 301},
        {"category": "billing", "confidence": 0.2, "reason": "x", "extra": True},
    ]
    for answer in cases:
        assert (violation(schema, answer) is None) == validator.is_valid(answer), answer


# --- owners, tags and source tables: what the Dagster assets show ----------------------------------


def test_owners_and_tags_default_to_none_and_take_emails_and_teams(tmp_path):
    from batch_assets.spec.model import TaskSpec

    bare = load_task_file(write_task(tmp_path / "a", lambda a: (a.pop("owners"), a.pop("tags"))))
    assert bare.spec.owners == [] and bare.spec.tags == {}
    spec = load_task_file(
        write_task(
            tmp_path / "b",
            lambda a: a.update(
                owners=["team:support_ops", "ana@example.com"], tags={"domain": "support", "batch_assets/tier": "gold"}
            ),
        )
    ).spec
    assert spec.owners == ["team:support_ops", "ana@example.com"]
    assert spec.tags == {"domain": "support", "batch_assets/tier": "gold"}
    assert "owners" in TaskSpec.model_fields and "tags" in TaskSpec.model_fields


def test_source_tables_are_found_in_the_query_unless_declared(tmp_path):
    from batch_assets.pipeline.report.table_stats import source_tables

    sql = (
        "WITH recent AS (SELECT * FROM support_tickets t JOIN customers c USING (customer_id) "
        "WHERE created_date = $partition_date) SELECT ticket_id, subject, body, language FROM recent"
    )
    found = load_task_file(write_task(tmp_path / "a", setter("source.sql", sql))).spec
    assert source_tables(found) == ["customers", "support_tickets"]  # the CTE is not a table
    declared = load_task_file(write_task(tmp_path / "b", setter("source.tables", ["tickets_view"]))).spec
    assert source_tables(declared) == ["tickets_view"]


def test_a_task_schedule_fires_at_its_time_zones_hour_and_submits_that_zones_yesterday(tmp_path):
    """`schedule: {cron, timezone}`: 07:30 in Shanghai is 23:30 UTC the day before; partitions are UTC
    days, so that tick submits the last one complete then."""
    import datetime as dt

    from dagster._utils.schedules import cron_string_iterator

    from batch_assets.components.task_defs import build_task_defs
    from batch_assets.resources import default_resources

    task = load_task_file(
        write_task(tmp_path / "t", setter("schedule", {"cron": "30 7 * * *", "timezone": "Asia/Shanghai"}))
    )
    definitions = dg.Definitions.merge(build_task_defs(task), dg.Definitions(resources=default_resources()))
    schedule = definitions.resolve_schedule_def(f"{task.name}__daily")
    assert (schedule.cron_schedule, schedule.execution_timezone) == ("30 7 * * *", "Asia/Shanghai")
    after = dt.datetime(2026, 11, 20, 12, 0, tzinfo=dt.UTC).timestamp()
    fires = next(cron_string_iterator(after, schedule.cron_schedule, schedule.execution_timezone))  # Dagster's ticks
    assert fires.astimezone(dt.UTC) == dt.datetime(2026, 11, 20, 23, 30, tzinfo=dt.UTC)  # 07:30 on the 21st there
    context = dg.build_schedule_context(scheduled_execution_time=fires, repository_def=definitions.get_repository_def())
    request = schedule.evaluate_tick(context).run_requests[0]
    assert request.partition_key == "2026-11-19" and request.tags["batch_assets/task_partition"].endswith(":2026-11-19")
    # Without `schedule:` the task keeps today's 01:00 UTC.
    default = load_task_file(write_task(tmp_path / "d", lambda _a: None)).spec.schedule
    assert (default.cron, default.timezone) == ("0 1 * * *", "UTC")


@pytest.mark.parametrize(
    ("field", "value", "said"),
    [
        ("cron", "61 7 * * *", "'61 7 * * *' is not a cron expression. Fix: use five fields"),
        ("timezone", "Mars/Olympus", "'Mars/Olympus' is not a time zone. Fix: use an IANA name"),
    ],
)
def test_a_bad_schedule_names_the_file_the_field_and_the_fix(tmp_path, field, value, said):
    yaml_path = write_task(tmp_path / "t", setter("schedule", {field: value}))
    with pytest.raises(TaskSpecError) as info:
        load_task_file(yaml_path)
    message = str(info.value)
    assert str(yaml_path) in message and f"schedule.{field}" in message and said in message, message
    assert "\n" not in message


CRON_CASES = [
    "0 1 * * *", "30 7 * * *", "*/15 * * * *", "0 9-17 * * mon-fri", "0 0 1,15 * *", "0 0 * jan,jul *",
    "0 0 * * 7", "0 0 * * SUN", "1-5/2 * * * *", "@daily", "@hourly", "61 7 * * *", "0 24 * * *", "* * * *",
    "0 0 0 * *", "0 0 * 13 *", "0 0 * * 8", "0 */0 * * *", "a b c d e", "0 0 * * * *", "",
]  # fmt: skip


def test_the_specs_cron_check_never_accepts_what_dagster_refuses():
    from dagster._utils.schedules import is_valid_cron_string

    from batch_assets.spec.cron import is_cron

    accepted = [c for c in CRON_CASES if is_cron(c)]
    assert accepted == CRON_CASES[:11]
    assert all(is_valid_cron_string(c) for c in accepted)
    assert not any(is_valid_cron_string(c) for c in CRON_CASES[11:])  # what it refuses, Dagster refuses too
