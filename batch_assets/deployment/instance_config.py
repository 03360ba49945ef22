"""Checks a Dagster instance file (deploy/dagster.yaml and its local variant) with Dagster's own config
system, as the webserver, the daemon and every run pod will read it, before anything is deployed.

Two passes, because Dagster validates in two places: the instance schema (sections, the `concurrency`
limits, `run_monitoring`, …) when the instance loads, and each configurable class's own schema
(`run_launcher`, `run_coordinator`, `compute_logs`, the PostgreSQL storage) when it is built. Each
problem is one line naming the file, the section and the field Dagster refused.
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import yaml

# Sections whose value is {module, class, config}: their config is checked by the class's schema.
CLASS_SECTIONS = (
    "run_coordinator",
    "run_launcher",
    "compute_logs",
    "run_storage",
    "event_log_storage",
    "schedule_storage",
    "secrets",
)
# storage: {<kind>: config} -> the class whose schema checks that config.
STORAGE_CLASSES = {
    "postgres": ("dagster_postgres", "DagsterPostgresStorage"),
    "sqlite": ("dagster._core.storage.sqlite_storage", "DagsterSqliteStorage"),
}
# The extra a class's module comes from, for the fix in the message.
PACKAGE_OF = {"dagster_k8s": "dagster-k8s", "dagster_aws": "dagster-aws", "dagster_postgres": "dagster-postgres"}
DEPLOY_DIR = Path(__file__).resolve().parents[2] / "deploy"


def _one_line(message: str) -> str:
    """Dagster's message without the schema it prints after `Expected`."""
    head = re.split(r"\.?\s+Expected[: ]", message, maxsplit=1)[0]
    return " ".join(head.split())


def _errors(errors, fallback: str) -> list[str]:
    return [_one_line(e.message) for e in errors] or [_one_line(fallback)]


def _class_problems(where: str, module: str, name: str, config) -> list[str]:
    from dagster._config import validate_config

    try:
        cls = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as exc:
        package = PACKAGE_OF.get(module.split(".")[0], module.split(".")[0])
        return [f"{where}: cannot load {module}.{name} ({exc}); install {package} where this instance runs"]
    result = validate_config(cls.config_type(), config if config is not None else {})
    if result.success:
        return []
    return [f"{where}: {m}" for m in _errors(result.errors, f"{name}'s config is not valid")]


def check_instance_file(path: Path) -> list[str]:
    """Every problem Dagster finds in the instance file at `path`, one line each (none: it is valid)."""
    from dagster._core.errors import DagsterInvalidConfigError
    from dagster._core.instance.config import dagster_instance_config

    path = Path(path)
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        return [f"{path}: cannot read it: {exc.strerror}"]
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        return [f"{path}: not YAML{f' (line {mark.line + 1})' if mark else ''}: {getattr(exc, 'problem', exc)}"]
    if not isinstance(raw, dict):
        return [f"{path}: expected a mapping of instance settings at the top"]
    problems = []
    try:
        dagster_instance_config(str(path.parent), path.name)
    except DagsterInvalidConfigError as exc:
        problems += [f"{path}: {m}" for m in _errors(exc.errors, str(exc))]
    for section in CLASS_SECTIONS:
        value = raw.get(section)
        if isinstance(value, dict) and "module" in value and "class" in value:
            where = f"{path}: {section} ({value['class']})"
            problems += _class_problems(where, str(value["module"]), str(value["class"]), value.get("config"))
    storage = raw.get("storage")
    refused = any("root:storage" in p for p in problems)  # already named by the instance schema
    if isinstance(storage, dict) and len(storage) == 1 and not refused:
        ((kind, config),) = storage.items()
        if kind in STORAGE_CLASSES:
            problems += _class_problems(f"{path}: storage.{kind}", *STORAGE_CLASSES[kind], config)
    return problems


def instance_files(directory: Path = DEPLOY_DIR) -> list[Path]:
    """The instance files of a deploy folder: dagster.yaml and dagster.<variant>.yaml."""
    return sorted(Path(directory).glob("dagster*.yaml"))
