"""`postgres_url`: a fresh, empty PostgreSQL database per test, on the server `make test` starts.

`make test` runs pytest under `python -m batch_assets.services run`, which starts a throwaway
PostgreSQL and sets BATCH_ASSETS_TEST_PG_URL (its superuser URL). Without it a test that needs the
server skips with a message, and fails when CI is set (CI must run every test).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from typing import NoReturn

import pytest

from batch_assets.services.__main__ import TEST_S3_VARIABLE, TEST_URL_VARIABLE


def _unavailable(message: str) -> NoReturn:
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)


@pytest.fixture
def postgres_url() -> Iterator[str]:
    admin = os.environ.get(TEST_URL_VARIABLE)
    if not admin:
        _unavailable(f"no PostgreSQL for this test: run `make test` (it starts one) or set {TEST_URL_VARIABLE}")
    import psycopg

    # A unique name per test, so xdist workers sharing the server never meet.
    name = f"test_{uuid.uuid4().hex[:12]}"
    from batch_assets.services.postgres import create_database

    try:
        url = create_database(admin, name)
    except psycopg.OperationalError as exc:
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        _unavailable(f"no PostgreSQL for this test: {TEST_URL_VARIABLE}={admin} does not answer ({reason})")
    try:
        yield url
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


@pytest.fixture(params=["duckdb", "postgres"])
def empty_control(request, tmp_path):
    """Empty control tables on each backend: a Warehouse's DuckDB file, then a real PostgreSQL."""
    from batch_assets.ledger.control_db import DuckControl, connect_postgres
    from batch_assets.ledger.control_schema import ensure_control_schema
    from batch_assets.ledger.warehouse import Warehouse

    if request.param == "duckdb":
        with Warehouse.at(tmp_path / "warehouse.duckdb", tmp_path, ledger_url=None).connect() as conn:
            yield DuckControl(conn)
        return
    db = connect_postgres(request.getfixturevalue("postgres_url"))
    ensure_control_schema(db)
    try:
        yield db
    finally:
        db.conn.close()


@pytest.fixture(params=["local", "distributed"])
def ledger_backend(request, monkeypatch) -> str:
    """The test twice: its control ledger in the warehouse file (`local`), then in a fresh PostgreSQL
    database (`distributed`, $BATCH_ASSETS_LEDGER_URL), the environment every run and process reads."""
    from batch_assets.ledger.distributed import LEDGER_URL_VAR

    if request.param == "distributed":
        monkeypatch.setenv(LEDGER_URL_VAR, request.getfixturevalue("postgres_url"))
    else:
        monkeypatch.delenv(LEDGER_URL_VAR, raising=False)
    return request.param


@pytest.fixture
def s3_storage():
    """Object storage under a fresh prefix of the test S3 server's bucket (`make test` starts it)."""
    from batch_assets.services import s3
    from batch_assets.storage.objects import ObjectStorage

    endpoint = os.environ.get(TEST_S3_VARIABLE)
    if not endpoint:
        _unavailable(f"no S3 server for this test: run `make test` (it starts one) or set {TEST_S3_VARIABLE}")
    return ObjectStorage(
        bucket=s3.BUCKET,
        prefix=f"test_{uuid.uuid4().hex[:12]}",
        endpoint=endpoint,
        region=s3.REGION,
        access_key=s3.ACCESS_KEY,
        secret_key=s3.SECRET_KEY,
    )
