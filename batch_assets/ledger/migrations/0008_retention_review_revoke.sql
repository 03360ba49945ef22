-- retention (provider-side deletions, local purge), human review sampling, revoke
-- Provider-side files deleted after a job's results were downloaded: one row per file (or one
-- 'nothing_to_delete' row where the provider keeps no user files), failures kept with the error.
CREATE TABLE ledger.remote_file_deletion (
    job_key      VARCHAR NOT NULL,
    task_id      VARCHAR NOT NULL,
    provider     VARCHAR NOT NULL,
    file_id      VARCHAR,
    outcome      VARCHAR NOT NULL,   -- deleted | nothing_to_delete | failed
    error        VARCHAR,
    recorded_at  TIMESTAMP NOT NULL
);
-- When a job's provider-side files were deleted (NULL: pending), tries so far and the last error.
ALTER TABLE ledger.provider_job ADD COLUMN remote_deleted_at TIMESTAMP;
ALTER TABLE ledger.provider_job ADD COLUMN remote_delete_attempts INTEGER DEFAULT 0;
ALTER TABLE ledger.provider_job ADD COLUMN remote_delete_error VARCHAR;
-- Local files purged after the retention window (rows and hashes stay). A raw result file is the
-- only verbatim copy of the provider's lines, so it is kept gzip-compressed at archived_path.
ALTER TABLE ledger.shard ADD COLUMN purged_at TIMESTAMP;
ALTER TABLE ledger.raw_file ADD COLUMN purged_at TIMESTAMP;
ALTER TABLE ledger.raw_file ADD COLUMN archived_path VARCHAR;

-- Applied answers picked for human review (sampled by rate, or matching the task's always_if).
CREATE TABLE ledger.review_item (
    custom_id    VARCHAR PRIMARY KEY,
    task_id      VARCHAR NOT NULL,
    attempt      INTEGER NOT NULL,
    sampled_by   VARCHAR NOT NULL,   -- rate | always_if
    state        VARCHAR NOT NULL,   -- pending | approved | rejected
    reason       VARCHAR,
    created_at   TIMESTAMP NOT NULL,
    decided_at   TIMESTAMP
);

-- The business table's row an apply overwrote (same key and output version), kept so a revoke
-- can put it back.
CREATE TABLE ledger.applied_previous (
    custom_id           VARCHAR PRIMARY KEY,   -- the item whose apply overwrote the row
    task_id             VARCHAR NOT NULL,
    business_id         VARCHAR NOT NULL,
    target_table        VARCHAR NOT NULL,
    output_version      VARCHAR NOT NULL,
    previous_custom_id  VARCHAR,
    previous_row        JSON NOT NULL,
    recorded_at         TIMESTAMP NOT NULL
);

-- Applied answers taken back: the value removed, or the earlier one restored.
CREATE TABLE ledger.revocation (
    custom_id           VARCHAR PRIMARY KEY,
    task_id             VARCHAR NOT NULL,
    business_id         VARCHAR NOT NULL,
    target_table        VARCHAR NOT NULL,
    output_version      VARCHAR NOT NULL,
    action              VARCHAR NOT NULL,   -- removed | restored | superseded (a later answer holds the key)
    restored_custom_id  VARCHAR,
    reason              VARCHAR,
    revoked_at          TIMESTAMP NOT NULL
);
