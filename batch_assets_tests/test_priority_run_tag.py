"""A run tag `batch_assets/priority` overrides a task's priority for one submit run (an urgent rerun
launched from the UI): its shards wait in the account's queue with that priority (which orders the
queue: test_quota_admission), and the next run without the tag has the task's own again. A tag
that is no priority fails the run, naming the choices. Through real Dagster runs of the project's
definitions against the emulator."""

from __future__ import annotations

import pytest

from batch_assets.ledger.admission import PRIORITY_RANKS
from batch_assets.ledger.quotas import waiting_partitions

from .conftest import DAY1, DAY2

TASK = "ticket_triage"
pytestmark = pytest.mark.slow


@pytest.fixture
def one_batch_account(dagster_env, monkeypatch):
    monkeypatch.setenv("OPENAI_MAX_CONCURRENT_JOBS", "1")  # the account holds one batch at a time
    return dagster_env


def _submit(instance, day: str, **tags):
    from batch_assets.definitions import defs

    job = defs().resolve_job_def(f"{TASK}__submit")
    return job.execute_in_process(instance=instance, partition_key=day, tags=tags, raise_on_error=False)


def test_an_urgent_run_tag_gives_its_waiting_shards_urgent_priority_for_that_run(one_batch_account, instance):
    assert _submit(instance, DAY1).success  # takes the account's one place (its other shards wait)
    assert _submit(instance, DAY2, **{"batch_assets/priority": "urgent"}).success
    with one_batch_account.connect() as conn:
        queue = waiting_partitions(conn)
    (waiting,) = queue
    assert (waiting["partition_date"], waiting["priority"]) == (DAY2, "urgent")
    assert waiting["effective_priority"] == PRIORITY_RANKS["urgent"]
    assert _submit(instance, DAY2).success  # the next run without the tag: the task's own priority again
    with one_batch_account.connect() as conn:
        (waiting,) = waiting_partitions(conn)
    assert waiting["priority"] == "normal"


def test_a_run_tag_that_is_no_priority_fails_the_run_naming_the_choices(one_batch_account, instance):
    result = _submit(instance, DAY1, **{"batch_assets/priority": "asap"})
    assert not result.success
    (failure,) = [e for e in result.all_events if e.is_step_failure]
    message = failure.step_failure_data.error.message
    assert "batch_assets/priority='asap' is not a priority: use one of low, normal, high, urgent" in message
    with one_batch_account.connect() as conn:  # nothing was sent
        assert conn.execute("SELECT count(*) FROM ledger.provider_job").fetchone()[0] == 0
