"""A broken task folder is isolated: beside a copy of the tasks with one broken (`provider: opnai`),
the definitions load with the other tasks, the sensor and the broken task's error definition; the
CLI's `tasks` verb lists it with its one-line error, `report` names it, and verbs on other tasks work.
"""

from __future__ import annotations

import json
import shutil
import sys
import uuid
from pathlib import Path

import dagster as dg
import pytest

from batch_assets.cli import main
from batch_assets.components.broken_task import SPEC_CHECK, SPEC_STAGE
from batch_assets.pipeline.freeze.manifest import freeze_manifest
from batch_assets.spec import resolve
from batch_assets.spec.resolve import BrokenTask, TaskSpecError, load_all_tasks, load_task_folder, load_tasks

from .conftest import DAY1

REAL_DEFS = Path(resolve.__file__).resolve().parent.parent / "defs"
BROKEN = "ticket_triage_copy"


def break_copy(tasks: Path, folder: str = BROKEN, *, name: str | None = BROKEN) -> Path:
    """A copy of ticket_triage in `folder` with `provider: opnai` (and `name` when given)."""
    shutil.copytree(tasks / "ticket_triage", tasks / folder)
    yaml_path = tasks / folder / "defs.yaml"
    text = yaml_path.read_text(encoding="utf-8").replace("  provider: openai\n", "  provider: opnai\n")
    if name is not None:
        text = text.replace("  name: ticket_triage\n", f"  name: {name}\n")
    yaml_path.write_text(text, encoding="utf-8")
    return yaml_path


def line_of(yaml_path: Path, startswith: str) -> int:
    return next(
        n for n, line in enumerate(yaml_path.read_text().splitlines(), 1) if line.strip().startswith(startswith)
    )


@pytest.fixture
def project(tmp_path, monkeypatch):
    """A dg project in tmp_path holding a copy of the real defs folder plus one broken task folder;
    the CLI (and defs/tables.py) read its tasks folder. Returns (project root, tasks folder)."""
    module = f"bt_broken_{uuid.uuid4().hex[:10]}"
    root = tmp_path / "proj"
    (root / module).mkdir(parents=True)
    (root / "pyproject.toml").write_text(
        f'[tool.dg]\ndirectory_type = "project"\n[tool.dg.project]\nroot_module = "{module}"\n'
    )
    (root / module / "__init__.py").write_text("")
    shutil.copytree(REAL_DEFS, root / module / "defs", ignore=shutil.ignore_patterns("__pycache__"))
    tasks = root / module / "defs" / "tasks"
    break_copy(tasks)
    monkeypatch.setattr(resolve, "tasks_dir", lambda: tasks)
    monkeypatch.syspath_prepend(str(root))
    for name in ("BATCH_ASSETS_DATABASE", "BATCH_ASSETS_DATA_DIR", "BATCH_ASSETS_DEBUG"):
        monkeypatch.delenv(name, raising=False)
    yield root, tasks
    for name in [m for m in sys.modules if m == module or m.startswith(module + ".")]:
        del sys.modules[name]


@pytest.fixture
def broken_defs(project) -> dg.Definitions:
    from batch_assets.definitions import build_definitions

    return build_definitions(project[0])


def spec_key() -> dg.AssetKey:
    return dg.AssetKey([BROKEN, SPEC_STAGE])


# --- loading -----------------------------------------------------------------------------------------


def test_load_tasks_keeps_the_broken_folder_apart(project):
    _, tasks = project
    load = load_tasks()
    assert set(load.tasks) == set(load_all_tasks(REAL_DEFS / "tasks"))
    (broken,) = load.broken
    yaml_path = tasks / BROKEN / "defs.yaml"
    assert (broken.folder, broken.name, broken.provider, broken.field) == (BROKEN, BROKEN, "opnai", "provider")
    assert broken.error == (
        f"{yaml_path}: invalid task spec: field 'provider' (line {line_of(yaml_path, 'provider:')}): "
        "unknown provider 'opnai'. Fix: use one of: openai, dashscope, anthropic, gemini"
    )
    assert broken.fix == "use one of: openai, dashscope, anthropic, gemini"
    with pytest.raises(TaskSpecError, match="unknown provider 'opnai'"):
        load.get(BROKEN)  # a command naming the broken task gets its error
    assert load.get("ticket_triage") is load.tasks["ticket_triage"] and load.get("nope") is None
    with pytest.raises(TaskSpecError):
        load_all_tasks()  # the strict loader still refuses


def test_a_copy_that_kept_its_name_is_the_broken_one_wherever_it_sorts(tmp_path):
    tasks = tmp_path / "tasks"
    shutil.copytree(REAL_DEFS / "tasks" / "ticket_triage", tasks / "ticket_triage")
    shutil.copytree(tasks / "ticket_triage", tasks / "a_copy")  # sorts first, loads, same name
    load = load_tasks(tasks)
    assert load.tasks["ticket_triage"].yaml_path.parent.name == "a_copy"
    (duplicate,) = load.broken
    assert duplicate.folder == "ticket_triage" and "also declared in" in duplicate.error and duplicate.field == "name"
    # Each folder as its own Dagster component sees the same.
    assert not isinstance(load_task_folder(tasks / "a_copy" / "defs.yaml"), BrokenTask)
    assert isinstance(load_task_folder(tasks / "ticket_triage" / "defs.yaml"), BrokenTask)
    # A broken copy sorting first leaves the original alone.
    break_copy(tasks, "0_copy", name=None)
    load = load_tasks(tasks)
    assert "ticket_triage" in load.tasks and {b.folder for b in load.broken} == {"0_copy", "ticket_triage"}


def test_definitions_load_with_the_other_tasks_the_sensor_and_the_error_definition(broken_defs):
    dg.Definitions.validate_loadable(broken_defs)
    graph = broken_defs.resolve_asset_graph()
    keys = {k.to_user_string() for k in graph.get_all_asset_keys()}
    for name in load_all_tasks(REAL_DEFS / "tasks"):
        assert {f"{name}/manifest", f"{name}/applied", f"{name}/settled"} <= keys
        assert broken_defs.resolve_job_def(f"{name}__submit") is not None
    assert {k for k in keys if k.startswith(BROKEN)} == {f"{BROKEN}/{SPEC_STAGE}"}
    sensor = broken_defs.resolve_sensor_def("provider_status_sensor")
    assert {j.name for j in sensor.jobs} == {f"{n}__{s}" for n in load_tasks().tasks for s in ("submit", "collect")}

    spec = broken_defs.resolve_assets_def(spec_key())
    assert spec.group_names_by_key[spec_key()] == BROKEN
    error = load_tasks().broken[0].error
    assert error in spec.descriptions_by_key[spec_key()]
    meta = spec.metadata_by_key[spec_key()]
    assert meta["error"] == error and meta["field"] == "provider" and meta["fix"].startswith("use one of")
    assert meta["file"].value.endswith(f"{BROKEN}/defs.yaml")
    assert dg.AssetCheckKey(spec_key(), SPEC_CHECK) in graph.asset_check_keys


@pytest.mark.slow
def test_the_error_definition_fails_with_the_one_line_error(broken_defs):
    error = load_tasks().broken[0].error
    job = broken_defs.resolve_implicit_global_asset_job_def()
    with dg.instance_for_test() as instance:
        run = job.execute_in_process(instance=instance, asset_selection=[spec_key()], raise_on_error=False)
        assert not run.success
        (failure,) = [e.step_failure_data.user_failure_data for e in run.all_events if e.is_step_failure]
        assert failure.description == error and failure.metadata["fix"].value.startswith("use one of")
        check = job.get_subset(asset_selection=set(), asset_check_selection={dg.AssetCheckKey(spec_key(), SPEC_CHECK)})
        (evaluation,) = check.execute_in_process(instance=instance).get_asset_check_evaluations()
    assert not evaluation.passed and evaluation.severity == dg.AssetCheckSeverity.ERROR
    assert evaluation.description == error and evaluation.metadata["error"].value == error
    assert evaluation.metadata["field"].value == "provider"


# --- the CLI ---------------------------------------------------------------------------------------------


def run(capsys, *argv) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_tasks_lists_every_folder_and_exits_1_for_a_broken_one(capsys, project):
    error = load_tasks().broken[0].error
    code, out, err = run(capsys, "tasks")
    assert code == 1 and err == ""
    lines = out.splitlines()
    assert lines[-1] == f"BROKEN {BROKEN}: {error}"
    row = next(line.split() for line in lines if line.startswith(f"{BROKEN} "))
    assert row[:4] == [BROKEN, BROKEN, "broken", "opnai"]
    assert any(line.split()[:3] == ["ticket_triage", "ticket_triage", "ok"] for line in lines)

    code, out, _ = run(capsys, "tasks", "--format", "json")
    records = {r["folder"]: r for r in json.loads(out)}
    assert code == 1 and set(records) == {*load_tasks().tasks, BROKEN}
    assert records[BROKEN] | {"file": None} == {
        "folder": BROKEN,
        "name": BROKEN,
        "status": "broken",
        "provider": "opnai",
        "model": "gpt-4o-mini",
        "file": None,
        "field": "provider",
        "error": error,
        "fix": "use one of: openai, dashscope, anthropic, gemini",
    }
    assert records["ticket_triage"]["status"] == "ok" and records["ticket_triage"]["error"] is None

    code, out, _ = run(capsys, "tasks", "--format", "csv")
    assert code == 1 and out.splitlines()[0] == "folder,name,status,provider,model,file,field,error,fix"


def test_tasks_exits_0_when_every_task_loads(capsys, project):
    shutil.rmtree(project[1] / BROKEN)
    code, out, _ = run(capsys, "tasks")
    assert code == 0 and "BROKEN" not in out and "broken" not in out


@pytest.fixture
def frozen(project, seeded_copy, ticket_task):
    freeze_manifest(seeded_copy, ticket_task, DAY1)
    return seeded_copy


def test_report_names_the_broken_task_and_reports_the_others(capsys, frozen):
    error = load_tasks().broken[0].error
    task_id = f"ticket_triage_{DAY1.replace('-', '')}"
    code, out, err = run(capsys, "report", "--task", "ticket_triage", "--database", frozen.database)
    assert code == 0, err
    assert task_id in out and "BROKEN" not in out

    code, out, err = run(capsys, "report", "--database", frozen.database)
    assert code == 1 and task_id in out
    assert out.splitlines()[-1] == f"BROKEN {BROKEN}: {error}"

    code, out, err = run(capsys, "report", "--format", "json", "--database", frozen.database)
    assert code == 1 and [r["task_id"] for r in json.loads(out)] == [task_id]
    assert f"BROKEN {BROKEN}: {error}" in err.splitlines()


def test_a_verb_naming_the_broken_task_fails_with_its_one_line_error(capsys, project, tmp_path):
    error = load_tasks().broken[0].error
    for argv in (["report", "--task", BROKEN], ["dry-run", f"{BROKEN}_20261120"]):
        code, out, err = run(capsys, *argv, "--database", tmp_path / "none.duckdb")
        assert code == 1 and out == ""
        assert err.strip() == f"batch-assets {argv[0]}: task file error: {error}"


def test_dry_run_of_a_good_task_works_beside_the_broken_one(capsys, frozen):
    code, out, err = run(
        capsys, "dry-run", f"ticket_triage_{DAY1.replace('-', '')}", "-n", "1", "--database", frozen.database
    )
    assert code == 0, err
    assert out.splitlines()[0].startswith("{")
