-- batch tasks, manifest, quarantine, shards, provider jobs, status events, raw/parsed/applied results
CREATE TABLE ledger.batch_task (
    task_id               VARCHAR PRIMARY KEY,
    task_name             VARCHAR NOT NULL,
    partition_date        DATE NOT NULL,
    item_type             VARCHAR NOT NULL,
    provider              VARCHAR NOT NULL,
    model                 VARCHAR NOT NULL,
    endpoint              VARCHAR NOT NULL,
    prompt_version        VARCHAR NOT NULL,
    output_schema_version VARCHAR NOT NULL,
    manifest_uri          VARCHAR,
    manifest_version      INTEGER NOT NULL DEFAULT 0,
    status                VARCHAR NOT NULL,
    total_items           BIGINT NOT NULL DEFAULT 0,
    est_input_tokens      BIGINT,
    est_output_tokens     BIGINT,
    created_at            TIMESTAMP NOT NULL,
    updated_at            TIMESTAMP NOT NULL
);
-- Source rows that could not become manifest items (e.g. a business id seen twice).
CREATE TABLE ledger.source_reject (
    task_id       VARCHAR NOT NULL,
    business_id   VARCHAR,
    row_count     BIGINT NOT NULL,
    reason_code   VARCHAR NOT NULL,
    reason        VARCHAR NOT NULL,
    recorded_at   TIMESTAMP NOT NULL
);
-- The frozen input manifest; the prompt texts live in the Parquet file at manifest_uri.
CREATE TABLE ledger.manifest_item (
    custom_id             VARCHAR PRIMARY KEY,
    task_id               VARCHAR NOT NULL,
    business_id           VARCHAR NOT NULL,
    item_type             VARCHAR NOT NULL,
    input_hash            VARCHAR NOT NULL,
    prompt_version        VARCHAR NOT NULL,
    model                 VARCHAR NOT NULL,
    params_json           VARCHAR NOT NULL,
    output_schema_version VARCHAR NOT NULL,
    manifest_version      INTEGER NOT NULL,
    frozen_at             TIMESTAMP NOT NULL,
    superseded_at         TIMESTAMP
);
-- Lines that failed validation before anything was sent, with the reason and the fix.
CREATE TABLE ledger.quarantine (
    custom_id     VARCHAR PRIMARY KEY,
    task_id       VARCHAR NOT NULL,
    reason_code   VARCHAR NOT NULL,
    reason        VARCHAR NOT NULL,
    recorded_at   TIMESTAMP NOT NULL
);
CREATE TABLE ledger.shard (
    shard_id      VARCHAR PRIMARY KEY,
    task_id       VARCHAR NOT NULL,
    provider      VARCHAR NOT NULL,
    endpoint      VARCHAR NOT NULL,
    model         VARCHAR NOT NULL,
    attempt       INTEGER NOT NULL,
    shard_no      INTEGER NOT NULL,
    path          VARCHAR NOT NULL,
    line_count    BIGINT NOT NULL,
    byte_count    BIGINT NOT NULL,
    est_tokens    BIGINT NOT NULL,
    sha256        VARCHAR,
    created_at    TIMESTAMP NOT NULL
);
-- One row per request line; request_id is the provider-safe id actually sent.
CREATE TABLE ledger.shard_line (
    shard_id      VARCHAR NOT NULL,
    line_no       INTEGER NOT NULL,
    custom_id     VARCHAR NOT NULL,
    request_id    VARCHAR NOT NULL,
    task_id       VARCHAR NOT NULL,
    attempt       INTEGER NOT NULL,
    line_bytes    BIGINT NOT NULL,
    est_tokens    BIGINT NOT NULL
);
-- One submitted (or about-to-be-submitted) provider batch. The row is written before the
-- create call (state CREATED), so a crash in between is found again instead of resubmitted.
CREATE TABLE ledger.provider_job (
    job_key              VARCHAR PRIMARY KEY,
    task_id              VARCHAR NOT NULL,
    shard_id             VARCHAR NOT NULL,
    provider             VARCHAR NOT NULL,
    endpoint             VARCHAR NOT NULL,
    provider_batch_id    VARCHAR,
    input_file_id        VARCHAR,
    output_file_id       VARCHAR,
    error_file_id        VARCHAR,
    raw_status           VARCHAR,
    state                VARCHAR NOT NULL,
    cancel_requested     BOOLEAN NOT NULL DEFAULT false,
    request_total        BIGINT,
    request_completed    BIGINT,
    request_failed       BIGINT,
    provider_errors      VARCHAR,
    created_at           TIMESTAMP NOT NULL,
    submitted_at         TIMESTAMP,
    state_changed_at     TIMESTAMP NOT NULL,
    terminal_at          TIMESTAMP,
    last_polled_at       TIMESTAMP,
    terminal_seq         BIGINT,            -- order in which jobs became terminal (sensor cursor)
    downloaded_at        TIMESTAMP
);
CREATE SEQUENCE ledger.terminal_seq START 1;
CREATE TABLE ledger.status_event (
    job_key        VARCHAR NOT NULL,
    from_state     VARCHAR,
    to_state       VARCHAR NOT NULL,
    raw_status     VARCHAR,
    request_total  BIGINT,
    request_completed BIGINT,
    request_failed BIGINT,
    observed_at    TIMESTAMP NOT NULL
);
-- Every downloaded provider file, kept on disk for audit and re-parsing.
CREATE TABLE ledger.raw_file (
    file_key          VARCHAR PRIMARY KEY,
    job_key           VARCHAR NOT NULL,
    task_id           VARCHAR NOT NULL,
    kind              VARCHAR NOT NULL,
    provider_file_id  VARCHAR,
    path              VARCHAR NOT NULL,
    sha256            VARCHAR NOT NULL,
    byte_count        BIGINT NOT NULL,
    line_count        BIGINT,
    downloaded_at     TIMESTAMP NOT NULL,
    ingested_at       TIMESTAMP
);
-- Every provider result line, keyed by where it came from (the downloaded file is kept on
-- disk verbatim; malformed lines are also copied here). custom_id is mapped back through
-- shard_line.request_id, never through line order.
CREATE TABLE ledger.raw_result (
    file_key             VARCHAR NOT NULL,
    line_no              BIGINT NOT NULL,
    job_key              VARCHAR NOT NULL,
    task_id              VARCHAR NOT NULL,
    request_id           VARCHAR,
    custom_id            VARCHAR,
    status               VARCHAR NOT NULL,  -- ok | orphan | duplicate | malformed
    line_id              VARCHAR,
    status_code          INTEGER,
    provider_request_id  VARCHAR,
    body                 JSON,
    error                JSON,
    malformed_line       VARCHAR,
    ingested_at          TIMESTAMP NOT NULL
);
-- One outcome per manifest item that got an answer: provider success or failure class,
-- and for successes whether the answer passed the output schema.
CREATE TABLE ledger.parsed_result (
    custom_id              VARCHAR PRIMARY KEY,
    task_id                VARCHAR NOT NULL,
    job_key                VARCHAR NOT NULL,
    provider_succeeded     BOOLEAN NOT NULL,
    error_class            VARCHAR,   -- failure class; NULL when the answer is usable
    error_code             VARCHAR,
    error_message          VARCHAR,
    http_status            INTEGER,
    output_json            VARCHAR,
    finish_reason          VARCHAR,
    input_tokens           BIGINT,
    output_tokens          BIGINT,
    provider_request_id    VARCHAR,
    output_schema_version  VARCHAR NOT NULL,
    parsed_at              TIMESTAMP NOT NULL
);
-- The record that a parsed result was written to (or held back from) the business table.
CREATE TABLE ledger.applied_result (
    custom_id       VARCHAR PRIMARY KEY,
    task_id         VARCHAR NOT NULL,
    business_id     VARCHAR NOT NULL,
    outcome         VARCHAR NOT NULL,  -- applied | stale
    target_table    VARCHAR NOT NULL,
    output_version  VARCHAR NOT NULL,
    applied_at      TIMESTAMP NOT NULL
);
