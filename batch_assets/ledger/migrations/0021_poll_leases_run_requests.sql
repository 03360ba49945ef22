-- provider_job.poll_owner / poll_lease_until: who is polling the job right now, and until when
-- A poller (a sensor tick, `batch-assets poll`, a collect run refreshing its partition) marks the
-- jobs it is about to poll on their own rows (on PostgreSQL under FOR UPDATE SKIP LOCKED) and
-- clears the mark once their snapshots are recorded; a job marked by another poller whose lease has
-- not run out is not polled, so pollers whose scopes overlap never poll one job twice at once. A
-- poller that dies leaves a mark that lapses when its lease does.
ALTER TABLE ledger.provider_job ADD COLUMN poll_owner VARCHAR;
ALTER TABLE ledger.provider_job ADD COLUMN poll_lease_until TIMESTAMP;
-- run_request: every run a provider status sensor asked Dagster for, by run key
-- Dagster deduplicates run keys within one sensor only; with several status sensors (polling
-- sharded by provider or bucket of tasks, ledger/poll_leases.py) whose scopes overlap, the first
-- to insert a key asks for the run and the others drop it. Rows older than a week are deleted by
-- retention.
CREATE TABLE ledger.run_request (
    run_key       VARCHAR    NOT NULL,
    task_id       VARCHAR    NOT NULL,
    job_name      VARCHAR    NOT NULL,
    sensor        VARCHAR    NOT NULL,
    requested_at  TIMESTAMP  NOT NULL,
    PRIMARY KEY (run_key)
);
