-- account_pause: a provider account stopped after an account-level error, until an operator resumes it
-- A provider answering that the account itself cannot be used (DashScope's Arrearage, AccessDenied,
-- InvalidApiKey: billing, access or key) fails every request sent with it, so nothing more is sent to
-- that provider: the send gate refuses while a row has no resumed_at, and `batch-assets resume
-- <provider>` sets it (also recorded in ledger.operator_action). Rows stay: the account's history.
CREATE TABLE ledger.account_pause (
    provider       VARCHAR NOT NULL,
    paused_at      TIMESTAMP NOT NULL,
    error_code     VARCHAR NOT NULL,   -- the provider's code that paused it
    error_message  VARCHAR,
    task_id        VARCHAR NOT NULL,   -- the partition whose results showed it first
    job_key        VARCHAR,
    items          BIGINT NOT NULL,    -- items of that parse failed with an account-level code
    fix            VARCHAR NOT NULL,   -- what the operator has to do before resuming
    resumed_at     TIMESTAMP,
    resumed_by     VARCHAR,
    PRIMARY KEY (provider, paused_at)
);
