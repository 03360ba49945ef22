"""`batch-assets check-deploy [FILE ...]`: check Dagster instance files before deploying them.

Default: every dagster*.yaml of the project's deploy/ folder. Each file goes through Dagster's own
config system (batch_assets/deployment/instance_config.py); a problem is one line naming the file,
the section and the field, and the exit status is 1. Reads the files only.
"""

from __future__ import annotations

from pathlib import Path

from batch_assets.cli.errors import CliError


def cmd_check_deploy(args) -> int:
    import dagster

    from batch_assets.deployment.instance_config import check_instance_file, instance_files

    files = [Path(f) for f in args.files] or instance_files()
    if not files:
        raise CliError("no dagster*.yaml in deploy/: name the instance files to check")
    bad = 0
    for path in files:
        problems = check_instance_file(path)
        for problem in problems:
            print(problem)
        if problems:
            bad += 1
        else:
            print(f"{path}: valid for Dagster {dagster.__version__}")
    return 1 if bad else 0
