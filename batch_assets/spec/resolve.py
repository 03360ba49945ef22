"""Turns a validated TaskSpec plus its YAML location into a ResolvedTask (files read, checked).

Errors raise TaskSpecError naming the YAML file, the field and the fix. `load_tasks` loads every
task folder without raising: the tasks that load, and the broken ones with their one-line error
(a broken task must not stop the others, in Dagster or the CLI).
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

__all__ = [
    "COMPONENT_TYPE",
    "BrokenTask",
    "ResolvedTask",
    "TaskLoad",
    "TaskSpecError",
    "load_all_tasks",
    "load_task_file",
    "load_tasks",
    "resolve_task",
]


def task_id_for(task_name: str, partition_date: str) -> str:
    """A partition's task_id, {task_name}_{YYYYMMDD}, also for a task whose file does not load now."""
    return f"{task_name}_{partition_date.replace('-', '')}"


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
        return task_id_for(self.spec.name, partition_date)

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
    return TaskSpecError(f"{yaml_path}: field '{field}': {problem}. Fix: {fix}", field=field, fix=fix)


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
    fix = "correct the YAML syntax at that line"
    return TaskSpecError(f"{where}: not valid YAML: {detail}. Fix: {fix}", fix=fix)


def _validation_error(yaml_path: Path, exc: pydantic.ValidationError, text: str) -> TaskSpecError:
    """The spec model's errors, one per field, on one line (each names its field, its line in the
    file and what is wrong); `field` and `fix` are the first error's."""
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError:
        root = None
    problems, fixes = [], []
    for err in exc.errors():
        loc = tuple(err.get("loc", ()))
        field = ".".join(str(part) for part in loc) or "attributes"
        line = _line_of(root, ("attributes", *loc))
        msg = str(err.get("msg", "invalid")).removeprefix("Value error, ")
        fixes.append(_fix_of(err.get("type", ""), msg))
        msg = msg.replace("; use ", ". Fix: use ", 1)  # the model's own fix, said as every fix is
        problems.append((field, f"field '{field}'{f' (line {line})' if line else ''}: {msg}"))
    text = "; ".join(p for _, p in problems)
    if fixes and ". Fix: " not in text:
        text += f". Fix: {fixes[0]}"
    return TaskSpecError(
        f"{yaml_path}: invalid task spec: {text}",
        field=problems[0][0] if problems else None,
        fix=fixes[0] if fixes else None,
    )


def _fix_of(kind: str, msg: str) -> str:
    """The fix a model error names ("…; use one of: …"), else the usual one for its kind."""
    if "; use " in msg:
        return msg.split("; ", 1)[1]
    if kind == "extra_forbidden":
        return "remove the field or correct its name (docs/tasks.md lists every field)"
    if kind == "missing":
        return "add the field"
    return "correct the field's value (docs/tasks.md describes every field)"


def _line_of(node, path: tuple) -> int | None:
    """1-based line of the key at `path` in a composed YAML document (or of its deepest parent found)."""
    line = None
    for part in path:
        if isinstance(node, yaml.MappingNode):
            keys = (kv for kv in node.value if isinstance(kv[0], yaml.ScalarNode) and kv[0].value == str(part))
            pair = next(keys, None)
            if pair is None:
                break
            line, node = pair[0].start_mark.line + 1, pair[1]
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and 0 <= part < len(node.value):
            node = node.value[part]
            line = node.start_mark.line + 1
        else:
            break
    return line


def load_task_file(yaml_path: Path) -> ResolvedTask:
    """Load one task's defs.yaml outside Dagster (CLI, demo, benchmark). Every problem is a
    TaskSpecError naming the file (and the line of a YAML syntax error)."""
    try:
        text = yaml_path.read_text(encoding="utf-8")
    except OSError as exc:
        raise TaskSpecError(
            f"{yaml_path}: cannot be read ({exc.strerror or exc}). Fix: restore the file or its permissions",
            fix="restore the file or its permissions",
        ) from exc
    try:
        doc = yaml.safe_load(text) or {}
    except yaml.YAMLError as exc:
        raise _yaml_error(yaml_path, exc) from exc
    if not isinstance(doc, dict) or doc.get("type") != COMPONENT_TYPE:
        fix = f"set `type: {COMPONENT_TYPE}`"
        raise TaskSpecError(
            f"{yaml_path}: field 'type': expected {COMPONENT_TYPE!r}. Fix: {fix}", field="type", fix=fix
        )
    try:
        spec = TaskSpec.model_validate(doc.get("attributes") or {})
    except pydantic.ValidationError as exc:
        raise _validation_error(yaml_path, exc, text) from exc
    try:
        return resolve_task(spec, yaml_path)
    except TaskSpecError as exc:
        raise _with_line(exc, text) from exc


def _with_line(exc: TaskSpecError, text: str) -> TaskSpecError:
    """A field's error with the field's line in the file added (`field 'x' (line N): …`)."""
    if not exc.field:
        return exc
    try:
        line = _line_of(yaml.compose(text, Loader=yaml.SafeLoader), ("attributes", *exc.field.split(".")))
    except yaml.YAMLError:
        line = None
    where = f"field '{exc.field}':"
    if line is None or where not in str(exc):
        return exc
    message = str(exc).replace(where, f"field '{exc.field}' (line {line}):", 1)
    return TaskSpecError(message, field=exc.field, fix=exc.fix)


def tasks_dir() -> Path:
    return Path(__file__).resolve().parent.parent / "defs" / "tasks"


def load_all_tasks(root: Path | None = None) -> dict[str, ResolvedTask]:
    """Every task declared under defs/tasks/*/defs.yaml, by name; the first broken one raises its
    TaskSpecError (for callers that need every task: tests, benchmarks). The CLI and the Dagster
    definitions use `load_tasks`, which keeps a broken task apart instead."""
    found: dict[str, ResolvedTask] = {}
    for path in sorted((root or tasks_dir()).glob("*/defs.yaml")):
        task = load_task_file(path)
        if task.name in found:
            raise _duplicate(path, task.name, found[task.name].yaml_path)
        found[task.name] = task
    return found


def _duplicate(path: Path, name: str, first: Path) -> TaskSpecError:
    fix = "give each task a unique name"
    return TaskSpecError(
        f"{path}: field 'name': task {name!r} is also declared in {first}. Fix: {fix}", field="name", fix=fix
    )


@dataclass(frozen=True)
class BrokenTask:
    """A task folder whose defs.yaml does not load: its one-line error (file, field, fix) and what
    could be read of it anyway (name, provider, model: None when unreadable)."""

    folder: str
    yaml_path: Path
    error: str
    field: str | None
    fix: str | None
    declared: dict

    @classmethod
    def of(cls, yaml_path: Path, exc: TaskSpecError) -> BrokenTask:
        return cls(
            folder=yaml_path.parent.name,
            yaml_path=yaml_path,
            error=" ".join(str(exc).split()),  # one line, whatever a nested message held
            field=exc.field,
            fix=exc.fix,
            declared={k: v for k, v in declared_attributes(yaml_path).items() if k in ("name", "provider", "model")},
        )

    def _declared(self, key: str) -> str | None:
        value = self.declared.get(key)
        return value if isinstance(value, str) else None

    @property
    def name(self) -> str | None:
        return self._declared("name")

    @property
    def provider(self) -> str | None:
        return self._declared("provider")

    @property
    def model(self) -> str | None:
        return self._declared("model")

    def error_for_cli(self) -> TaskSpecError:
        """The same one line, raised by a command that names this task."""
        return TaskSpecError(self.error, field=self.field, fix=self.fix)


def declared_attributes(yaml_path: Path) -> dict:
    """A defs.yaml's `attributes:` as written (unvalidated), {} when the file cannot be read."""
    try:
        doc = yaml.safe_load(yaml_path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError):
        return {}
    attrs = doc.get("attributes") if isinstance(doc, dict) else None
    return attrs if isinstance(attrs, dict) else {}


@dataclass(frozen=True)
class TaskLoad:
    """Every task folder, loaded: the tasks by name, and the broken folders (sorted by folder)."""

    tasks: dict[str, ResolvedTask]
    broken: tuple[BrokenTask, ...] = ()

    def broken_named(self, name: str) -> BrokenTask | None:
        """The broken task a command names: by its declared name, else by its folder."""
        return next((b for b in self.broken if b.name == name), None) or next(
            (b for b in self.broken if b.folder == name), None
        )

    def get(self, name: str) -> ResolvedTask | None:
        """The task `name`; None when no folder declares it; a broken one raises its one-line error."""
        if name in self.tasks:
            return self.tasks[name]
        broken = self.broken_named(name)
        if broken is not None:
            raise broken.error_for_cli()
        return None

    def __getitem__(self, name: str) -> ResolvedTask:
        task = self.get(name)
        if task is None:
            raise KeyError(name)
        return task


def load_task_folder(yaml_path: Path) -> ResolvedTask | BrokenTask:
    """One task folder as the Dagster component loads it: the task, or its BrokenTask. A task whose
    name a folder sorted before it already declares (and loads) is broken as a duplicate, as in
    `load_tasks`, so the two never define the same assets."""
    try:
        task = load_task_file(yaml_path)
    except TaskSpecError as exc:
        return BrokenTask.of(yaml_path, exc)
    here = yaml_path.resolve()
    for other in sorted(here.parent.parent.glob("*/defs.yaml")):
        if other == here:
            break
        if declared_attributes(other).get("name") == task.name and not isinstance(load_task_folder(other), BrokenTask):
            return BrokenTask.of(yaml_path, _duplicate(yaml_path, task.name, other))
    return task


def load_tasks(root: Path | None = None) -> TaskLoad:
    """Every task folder under defs/tasks, without raising: a broken one (or the second of two
    folders with one name) is kept as a BrokenTask and the others load."""
    tasks: dict[str, ResolvedTask] = {}
    broken: list[BrokenTask] = []
    for path in sorted((root or tasks_dir()).glob("*/defs.yaml")):
        try:
            task = load_task_file(path)
        except TaskSpecError as exc:
            broken.append(BrokenTask.of(path, exc))
            continue
        if task.name in tasks:
            broken.append(BrokenTask.of(path, _duplicate(path, task.name, tasks[task.name].yaml_path)))
            continue
        tasks[task.name] = task
    return TaskLoad(tasks, tuple(broken))
