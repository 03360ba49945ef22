"""Turns a validated TaskSpec plus its YAML location into a ResolvedTask (files read, checked).

Errors raise TaskSpecError naming the YAML file, the field and the fix.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path

import jsonschema
import pydantic
import yaml

from batch_assets.providers.limits import LimitAboveProvider, ProviderLimits
from batch_assets.providers.registry import provider_limits
from batch_assets.spec.errors import TaskSpecError
from batch_assets.spec.model import TaskSpec
from batch_assets.spec.output_schema import check_supported_schema, field_sql_type

PLACEHOLDER_RE = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")
COMPONENT_TYPE = "batch_assets.components.BatchTask"

__all__ = ["COMPONENT_TYPE", "ResolvedTask", "TaskSpecError", "load_all_tasks", "load_task_file", "resolve_task"]


@dataclass(frozen=True)
class ResolvedTask:
    spec: TaskSpec
    yaml_path: Path
    template: str
    template_columns: tuple[str, ...]
    output_schema: dict
    limits: ProviderLimits

    @property
    def name(self) -> str:
        return self.spec.name

    def task_id(self, partition_date: str) -> str:
        """task_id = {task_name}_{YYYYMMDD} (the partition's date)."""
        return f"{self.spec.name}_{partition_date.replace('-', '')}"

    @property
    def params_json(self) -> str:
        """Canonical (sorted, compact) model params: part of every input hash."""
        return json.dumps(self.spec.params.model_dump(), sort_keys=True, separators=(",", ":"))

    @property
    def output_schema_json(self) -> str:
        return json.dumps(self.output_schema, sort_keys=True, separators=(",", ":"), ensure_ascii=False)

    @property
    def prompt_hash(self) -> str:
        """sha256 of what the prompt is made of (template text + system message), recorded at freeze."""
        text = self.template + "\x1f" + (self.spec.prompt.system or "")
        return hashlib.sha256(text.encode("utf-8")).hexdigest()

    @property
    def output_schema_hash(self) -> str:
        """sha256 of the output schema as canonical JSON (key order and spacing do not count)."""
        return hashlib.sha256(self.output_schema_json.encode("utf-8")).hexdigest()


def _fail(yaml_path: Path, field: str, problem: str, fix: str) -> TaskSpecError:
    return TaskSpecError(f"{yaml_path}: field '{field}': {problem}. Fix: {fix}")


def resolve_task(spec: TaskSpec, yaml_path: Path) -> ResolvedTask:
    base = yaml_path.parent
    template_path = base / spec.prompt.template
    if not template_path.is_file():
        raise _fail(
            yaml_path,
            "prompt.template",
            f"file {template_path} not found",
            "create the template file or correct the path (relative to defs.yaml)",
        )
    template = template_path.read_text(encoding="utf-8")
    columns = tuple(dict.fromkeys(PLACEHOLDER_RE.findall(template)))
    if not columns:
        raise _fail(
            yaml_path,
            "prompt.template",
            f"{template_path.name} has no {{{{ column }}}} placeholder",
            "reference at least one column of the source query, e.g. {{ body }}",
        )
    leftover = PLACEHOLDER_RE.sub("", template)
    if "{{" in leftover or "}}" in leftover:
        raise _fail(
            yaml_path,
            "prompt.template",
            f"{template_path.name} has a malformed placeholder",
            "write placeholders as {{ column_name }} (letters, digits, '_')",
        )

    schema = _output_schema(spec, yaml_path)
    props = schema.get("properties", {})
    for target, field in spec.apply.columns.items():
        if field not in props:
            raise _fail(
                yaml_path,
                f"apply.columns.{target}",
                f"output field {field!r} does not exist",
                f"map to one of: {', '.join(props)}",
            )
    if spec.review.always_if is not None:
        _check_review_condition(spec, schema, yaml_path)
    try:
        limits = provider_limits(spec.provider).with_overrides(spec.limits)
    except LimitAboveProvider as exc:
        raise _fail(yaml_path, exc.field, exc.problem, exc.fix) from None
    return ResolvedTask(
        spec=spec, yaml_path=yaml_path, template=template, template_columns=columns, output_schema=schema, limits=limits
    )


def _check_review_condition(spec: TaskSpec, schema: dict, yaml_path: Path) -> None:
    """`review.always_if` must be one condition over the output fields: bound by DuckDB against an
    empty table with those fields as columns (typed as they are applied)."""
    import duckdb

    from batch_assets.sqltext import quote_ident

    props = schema.get("properties", {})
    cols = (
        ", ".join(
            f"{quote_ident(f)} {field_sql_type(schema, f) if spec.output.kind != 'embedding' else 'JSON'}"
            for f in props
        )
        or "_none INTEGER"
    )
    conn = duckdb.connect()
    try:
        conn.execute(f"CREATE TEMP TABLE answer ({cols})")
        statements = duckdb.extract_statements(f"SELECT * FROM answer WHERE ({spec.review.always_if})")
        if len(statements) != 1:
            raise duckdb.ParserException("more than one statement")
        conn.execute(f"SELECT count(*) FROM answer WHERE ({spec.review.always_if})").fetchall()
    except duckdb.Error as exc:
        problem = str(exc).splitlines()[0]
        raise _fail(
            yaml_path,
            "review.always_if",
            f"{spec.review.always_if!r} is not a condition over the output fields ({problem})",
            f"write a SQL condition over: {', '.join(props)} (e.g. `{next(iter(props), 'x')} IS NULL`)",
        ) from None
    finally:
        conn.close()


def _output_schema(spec: TaskSpec, yaml_path: Path) -> dict:
    """The schema of the answer: the task's JSON Schema, or the fixed shape of text / embedding answers."""
    if spec.output.kind == "text":
        return {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}
    if spec.output.kind == "embedding":
        return {
            "type": "object",
            "properties": {
                "embedding": {
                    "type": "array",
                    "items": {"type": "number"},
                    "minItems": spec.output.dimensions,
                    "maxItems": spec.output.dimensions,
                }
            },
            "required": ["embedding"],
        }
    schema_path = yaml_path.parent / spec.output.schema_file
    if not schema_path.is_file():
        raise _fail(
            yaml_path,
            "output.schema_file",
            f"file {schema_path} not found",
            "create the JSON Schema file or correct the path (relative to defs.yaml)",
        )
    try:
        schema = json.loads(schema_path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise _fail(
            yaml_path, "output.schema_file", f"{schema_path.name} is not valid JSON ({exc})", "fix the JSON syntax"
        ) from exc
    try:
        jsonschema.Draft202012Validator.check_schema(schema)
    except jsonschema.SchemaError as exc:
        raise _fail(
            yaml_path,
            "output.schema_file",
            f"{schema_path.name} is not a valid JSON Schema ({exc.message})",
            "fix the schema so it validates against JSON Schema draft 2020-12",
        ) from exc
    problem = check_supported_schema(schema)
    if problem:
        raise _fail(
            yaml_path,
            "output.schema_file",
            f"{schema_path.name}: {problem}",
            "use the structured-output subset: an object of typed properties "
            "(string/number/integer/boolean/array/object, enum, min/max, lengths)",
        )
    return schema


def _yaml_error(yaml_path: Path, exc: yaml.YAMLError) -> TaskSpecError:
    """A YAML syntax error as one line: the file, the line and column (1-based) and what is wrong there."""
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    where = f"{yaml_path}:{mark.line + 1}:{mark.column + 1}" if mark is not None else str(yaml_path)
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    context, started = getattr(exc, "context", None), getattr(exc, "context_mark", None)
    if context and started is not None and mark is not None and started.line != mark.line:
        context += f" started at line {started.line + 1}"
    detail = f"{problem} ({context})" if context else problem
    return TaskSpecError(f"{where}: not valid YAML: {detail}. Fix: correct the YAML syntax at that line")


def _validation_error(yaml_path: Path, exc: pydantic.ValidationError) -> TaskSpecError:
    """The spec model's errors, one per field, on one line (each names its field and what is wrong)."""
    problems = []
    for err in exc.errors():
        field = ".".join(str(part) for part in err.get("loc", ())) or "attributes"
        problems.append(f"field '{field}': {err.get('msg', 'invalid')}")
    return TaskSpecError(f"{yaml_path}: invalid task spec: {'; '.join(problems)}")


def load_task_file(yaml_path: Path) -> ResolvedTask:
    """Load one task's defs.yaml outside Dagster (CLI, demo, benchmark). Every problem is a
    TaskSpecError naming the file (and the line of a YAML syntax error)."""
    try:
        doc = yaml.safe_load(yaml_path.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as exc:
        raise _yaml_error(yaml_path, exc) from exc
    if not isinstance(doc, dict) or doc.get("type") != COMPONENT_TYPE:
        raise TaskSpecError(
            f"{yaml_path}: field 'type': expected {COMPONENT_TYPE!r}. Fix: set `type: {COMPONENT_TYPE}`"
        )
    try:
        spec = TaskSpec.model_validate(doc.get("attributes") or {})
    except pydantic.ValidationError as exc:
        raise _validation_error(yaml_path, exc) from exc
    return resolve_task(spec, yaml_path)


def tasks_dir() -> Path:
    return Path(__file__).resolve().parent.parent / "defs" / "tasks"


def load_all_tasks(root: Path | None = None) -> dict[str, ResolvedTask]:
    """Every task declared under defs/tasks/*/defs.yaml, by name."""
    found: dict[str, ResolvedTask] = {}
    for path in sorted((root or tasks_dir()).glob("*/defs.yaml")):
        task = load_task_file(path)
        if task.name in found:
            raise TaskSpecError(
                f"{path}: field 'name': task {task.name!r} is also declared in "
                f"{found[task.name].yaml_path}. Fix: give each task a unique name"
            )
        found[task.name] = task
    return found
