"""`batch-assets export --out` never creates directories: a mistyped path is an error, not a new tree."""

from __future__ import annotations

from batch_assets.cli import main


def test_export_into_a_missing_directory_is_refused_and_creates_nothing(capsys, tmp_path):
    target = tmp_path / "no_such_dir" / "x.csv"
    code = main(["--database", str(tmp_path / "warehouse.duckdb"), "export", "t_20261120", "--out", str(target)])
    err = capsys.readouterr().err
    assert code != 0
    assert err.strip().splitlines() == [
        f"batch-assets export: --out {target}: the directory {target.parent} does not exist; "
        "create it or choose another path"
    ]
    assert not target.parent.exists() and not (tmp_path / "warehouse.duckdb").exists()
