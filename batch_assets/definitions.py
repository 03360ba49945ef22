"""Dagster entry point: every module and component under defs/ is loaded automatically, then the
provider status sensors are attached with every task's jobs as its targets."""

from pathlib import Path

import dagster as dg


def build_definitions(path_within_project: Path) -> dg.Definitions:
    """The project's defs folder, then the sensor over the loaded tasks' jobs (a broken task has none:
    it loads as its error definition, components/broken_task.py). Tests load a copy through this."""
    from batch_assets.defs.sensors import build_provider_status_sensors

    loaded = dg.load_from_defs_folder(path_within_project=path_within_project)
    task_jobs = [job for job in loaded.jobs or [] if job.name.endswith(("__submit", "__collect"))]
    return dg.Definitions.merge(loaded, dg.Definitions(sensors=build_provider_status_sensors(task_jobs)))


@dg.definitions
def defs() -> dg.Definitions:
    return build_definitions(Path(__file__).parent)
