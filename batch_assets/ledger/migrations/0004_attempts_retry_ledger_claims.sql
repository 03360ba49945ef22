-- attempts on results, the retry ledger, compliance holds, operator actions, final task status, submission claims, stuck jobs
-- Every result line and every outcome belongs to one attempt of an item (the attempt of the shard
-- line it answers): a retried item has one outcome per attempt, and duplicates are per attempt.
ALTER TABLE ledger.raw_result ADD COLUMN attempt INTEGER;
UPDATE ledger.raw_result SET attempt = s.attempt
FROM ledger.provider_job j JOIN ledger.shard s ON s.shard_id = j.shard_id
WHERE raw_result.job_key = j.job_key;

-- parsed_result is keyed by (custom_id, attempt); DuckDB cannot change a primary key in place.
CREATE TABLE ledger.parsed_result_v4 (
    custom_id              VARCHAR NOT NULL,
    attempt                INTEGER NOT NULL,
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
    parsed_at              TIMESTAMP NOT NULL,
    from_line              BOOLEAN DEFAULT true,
    PRIMARY KEY (custom_id, attempt)
);
INSERT INTO ledger.parsed_result_v4 (custom_id, attempt, task_id, job_key, provider_succeeded, error_class, error_code,
                                     error_message, http_status, output_json, finish_reason, input_tokens, output_tokens,
                                     provider_request_id, output_schema_version, parsed_at, from_line)
SELECT p.custom_id, coalesce(s.attempt, 1), p.task_id, p.job_key, p.provider_succeeded, p.error_class, p.error_code,
       p.error_message, p.http_status, p.output_json, p.finish_reason, p.input_tokens, p.output_tokens,
       p.provider_request_id, p.output_schema_version, p.parsed_at, p.from_line
FROM ledger.parsed_result p
LEFT JOIN ledger.provider_job j ON j.job_key = p.job_key
LEFT JOIN ledger.shard s ON s.shard_id = j.shard_id;
DROP TABLE ledger.parsed_result;
ALTER TABLE ledger.parsed_result_v4 RENAME TO parsed_result;

-- The retry ledger: what was decided for each failed attempt of an item, by its failure class.
CREATE TABLE ledger.retry_decision (
    custom_id     VARCHAR NOT NULL,
    attempt       INTEGER NOT NULL,    -- the attempt whose outcome was decided on
    task_id       VARCHAR NOT NULL,
    error_class   VARCHAR NOT NULL,
    action        VARCHAR NOT NULL,    -- retry | requeue | final_failed | compliance_hold | await_operator
    charged       BOOLEAN NOT NULL,    -- false: the item never ran (a batch rejected whole for capacity)
    next_attempt  INTEGER,             -- the attempt that sends it again (retry, requeue)
    not_before    TIMESTAMP,           -- backoff: not sent again before this time
    reason        VARCHAR NOT NULL,
    decided_at    TIMESTAMP NOT NULL,
    PRIMARY KEY (custom_id, attempt)
);

-- Items the provider refused on content-policy grounds: never retried automatically.
CREATE TABLE ledger.compliance_hold (
    custom_id        VARCHAR PRIMARY KEY,
    task_id          VARCHAR NOT NULL,
    business_id      VARCHAR NOT NULL,
    attempt          INTEGER NOT NULL,
    provider_code    VARCHAR,
    provider_reason  VARCHAR,
    review_state     VARCHAR NOT NULL DEFAULT 'pending',
    recorded_at      TIMESTAMP NOT NULL
);

-- What a person did from the command line or the UI (cancel, retry, adopt, abandon), with the reason.
CREATE TABLE ledger.operator_action (
    action       VARCHAR NOT NULL,
    task_id      VARCHAR,
    job_key      VARCHAR,
    custom_id    VARCHAR,
    detail       VARCHAR,
    acted_at     TIMESTAMP NOT NULL
);

-- A partition's final status once every item is final: COMPLETED | COMPLETED_WITH_FAILURES | FAILED | CANCELED.
ALTER TABLE ledger.batch_task ADD COLUMN final_status VARCHAR;
ALTER TABLE ledger.batch_task ADD COLUMN finished_at TIMESTAMP;

-- One submit run at a time owns an intent row (owner + lease), so two submitters never both create.
ALTER TABLE ledger.provider_job ADD COLUMN claimed_by VARCHAR;
ALTER TABLE ledger.provider_job ADD COLUMN claim_expires_at TIMESTAMP;
-- How the create call ended when it did not clearly succeed: unknown | failed | abandoned | adopted.
ALTER TABLE ledger.provider_job ADD COLUMN create_outcome VARCHAR;
ALTER TABLE ledger.provider_job ADD COLUMN create_error VARCHAR;
-- Whether the provider's results can be fetched (a batch may report success before they exist).
ALTER TABLE ledger.provider_job ADD COLUMN results_ready BOOLEAN;
-- A job too long in one state: when it was flagged and what the stuck policy did.
ALTER TABLE ledger.provider_job ADD COLUMN stuck_at TIMESTAMP;
ALTER TABLE ledger.provider_job ADD COLUMN stuck_action VARCHAR;
-- Collection tries of a terminal job (a failed download is retried, bounded) and the last error.
ALTER TABLE ledger.provider_job ADD COLUMN collect_attempts INTEGER DEFAULT 0;
ALTER TABLE ledger.provider_job ADD COLUMN collect_error VARCHAR;
-- Where the job went: the provider's live host or the local emulator.
ALTER TABLE ledger.provider_job ADD COLUMN endpoint_mode VARCHAR;
ALTER TABLE ledger.provider_job ADD COLUMN endpoint_url VARCHAR;
