"""The job-state and task-status vocabulary of the ledger, defined once, with its SQL fragments.

Job states come from the provider contract (`JobState`, `TERMINAL_STATES`); this module only
renders them for SQL, so no query spells a state list by hand.

Two predicates over `ledger.provider_job`, and which one a query wants:

* **in flight** (`IN_FLIGHT_SQL`): the provider has the batch (a provider batch id is recorded)
  and its state is not terminal. This is what occupies a provider's concurrent-job capacity and
  what polling asks the provider about. A job whose intent is recorded but whose create call has
  not (yet) returned a batch id is not in flight.
* **not terminal** (`NOT_TERMINAL_SQL`): the job has not ended, whether or not the provider has it
  yet (intents included): lines of such jobs are still open in a reconciliation.

A job's `terminal_at` is set in the same write that moves its state into a terminal one, so
`state NOT IN (terminal)` and `terminal_at IS NULL` select the same rows; queries use the state.
"""

from __future__ import annotations

from enum import StrEnum

from batch_assets.providers.contract import TERMINAL_STATES, JobState

__all__ = [
    "FAILED_TERMINAL_STATES",
    "FAILED_TERMINAL_STATES_SQL",
    "IN_FLIGHT_SQL",
    "NOT_TERMINAL_SQL",
    "TERMINAL_SQL",
    "TERMINAL_STATES",
    "TERMINAL_STATES_SQL",
    "JobState",
    "TaskStatus",
    "in_flight_sql",
    "not_terminal_sql",
    "state_list_sql",
    "terminal_sql",
]


class TaskStatus(StrEnum):
    """`ledger.batch_task.status`: how far a task partition got; it only ever moves forward."""

    FROZEN = "FROZEN"  # manifest frozen
    SHARDED = "SHARDED"  # shards cut, nothing submitted yet
    SUBMITTED = "SUBMITTED"  # at least one shard submitted (or recovered) as a provider batch


# Terminal states other than COMPLETED: the batch ended without running (all of) its requests.
FAILED_TERMINAL_STATES = frozenset(TERMINAL_STATES - {JobState.COMPLETED})


def state_list_sql(states) -> str:
    """A SQL list literal of states, e.g. `('CANCELLED', 'COMPLETED')` (sorted, so stable)."""
    return "(" + ", ".join(f"'{JobState(s).value}'" for s in sorted(states)) + ")"


TERMINAL_STATES_SQL = state_list_sql(TERMINAL_STATES)
FAILED_TERMINAL_STATES_SQL = state_list_sql(FAILED_TERMINAL_STATES)


def _col(alias: str | None, column: str) -> str:
    return f"{alias}.{column}" if alias else column


def terminal_sql(alias: str | None = None) -> str:
    """Predicate: the job (table alias `alias`, if any) is in a terminal state."""
    return f"({_col(alias, 'state')} IN {TERMINAL_STATES_SQL})"


def not_terminal_sql(alias: str | None = None) -> str:
    """Predicate: the job has not ended (intents without a provider batch id included)."""
    return f"({_col(alias, 'state')} NOT IN {TERMINAL_STATES_SQL})"


def in_flight_sql(alias: str | None = None) -> str:
    """Predicate: the provider holds the batch (batch id recorded) and it has not ended."""
    return f"({_col(alias, 'provider_batch_id')} IS NOT NULL AND {_col(alias, 'state')} NOT IN {TERMINAL_STATES_SQL})"


TERMINAL_SQL = terminal_sql()
NOT_TERMINAL_SQL = not_terminal_sql()
IN_FLIGHT_SQL = in_flight_sql()
