-- GENERATED FILE, do not edit: the ledger schema after every migration, read from DuckDB's catalog.
-- From batch_assets/ledger/migrations/0001..0021 (schema version 21).
-- Regenerate: python -m batch_assets.ledger.schema   (a test fails when this file and the migrations differ)
-- Change the schema by adding a migration, never by editing this file.

CREATE SCHEMA ledger;

CREATE TABLE ledger.account_pause (
    provider       VARCHAR    NOT NULL,
    paused_at      TIMESTAMP  NOT NULL,
    error_code     VARCHAR    NOT NULL,
    error_message  VARCHAR,
    task_id        VARCHAR    NOT NULL,
    job_key        VARCHAR,
    items          BIGINT     NOT NULL,
    fix            VARCHAR    NOT NULL,
    resumed_at     TIMESTAMP,
    resumed_by     VARCHAR,
    PRIMARY KEY (provider, paused_at)
);

CREATE TABLE ledger.applied_previous (
    custom_id           VARCHAR    NOT NULL,
    task_id             VARCHAR    NOT NULL,
    business_id         VARCHAR    NOT NULL,
    target_table        VARCHAR    NOT NULL,
    output_version      VARCHAR    NOT NULL,
    previous_custom_id  VARCHAR,
    previous_row        JSON       NOT NULL,
    recorded_at         TIMESTAMP  NOT NULL,
    PRIMARY KEY (custom_id)
);

CREATE TABLE ledger.applied_result (
    custom_id       VARCHAR    NOT NULL,
    task_id         VARCHAR    NOT NULL,
    business_id     VARCHAR    NOT NULL,
    outcome         VARCHAR    NOT NULL,
    target_table    VARCHAR    NOT NULL,
    output_version  VARCHAR    NOT NULL,
    applied_at      TIMESTAMP  NOT NULL,
    item_no         BIGINT     NOT NULL,
    PRIMARY KEY (task_id, item_no)
);

CREATE TABLE ledger.batch_task (
    task_id                VARCHAR    NOT NULL,
    task_name              VARCHAR    NOT NULL,
    partition_date         DATE       NOT NULL,
    item_type              VARCHAR    NOT NULL,
    provider               VARCHAR    NOT NULL,
    model                  VARCHAR    NOT NULL,
    endpoint               VARCHAR    NOT NULL,
    prompt_version         VARCHAR    NOT NULL,
    output_schema_version  VARCHAR    NOT NULL,
    manifest_uri           VARCHAR,
    manifest_version       INTEGER    NOT NULL DEFAULT 0,
    status                 VARCHAR    NOT NULL,
    total_items            BIGINT     NOT NULL DEFAULT 0,
    est_input_tokens       BIGINT,
    est_output_tokens      BIGINT,
    created_at             TIMESTAMP  NOT NULL,
    updated_at             TIMESTAMP  NOT NULL,
    final_status           VARCHAR,
    finished_at            TIMESTAMP,
    currency               VARCHAR,
    prompt_hash            VARCHAR,
    output_schema_hash     VARCHAR,
    PRIMARY KEY (task_id)
);

CREATE TABLE ledger.compliance_hold (
    custom_id        VARCHAR    NOT NULL,
    task_id          VARCHAR    NOT NULL,
    business_id      VARCHAR    NOT NULL,
    attempt          INTEGER    NOT NULL,
    provider_code    VARCHAR,
    provider_reason  VARCHAR,
    review_state     VARCHAR    NOT NULL DEFAULT 'pending',
    recorded_at      TIMESTAMP  NOT NULL,
    PRIMARY KEY (custom_id)
);

CREATE TABLE ledger.dry_run (
    task_name       VARCHAR    NOT NULL,
    prompt_version  VARCHAR    NOT NULL,
    prompt_hash     VARCHAR,
    task_id         VARCHAR    NOT NULL,
    n               INTEGER    NOT NULL,
    sample_hash     VARCHAR    NOT NULL,
    items           BIGINT     NOT NULL,
    cost_estimated  DOUBLE,
    currency        VARCHAR,
    dry_run_at      TIMESTAMP  NOT NULL
);

CREATE TABLE ledger.manifest_item (
    custom_id              VARCHAR    NOT NULL,
    task_id                VARCHAR    NOT NULL,
    business_id            VARCHAR    NOT NULL,
    item_type              VARCHAR    NOT NULL,
    input_hash             VARCHAR    NOT NULL,
    prompt_version         VARCHAR    NOT NULL,
    model                  VARCHAR    NOT NULL,
    params_json            VARCHAR    NOT NULL,
    output_schema_version  VARCHAR    NOT NULL,
    manifest_version       INTEGER    NOT NULL,
    frozen_at              TIMESTAMP  NOT NULL,
    superseded_at          TIMESTAMP,
    est_input_tokens       BIGINT,
    est_cost               DOUBLE,
    item_no                BIGINT     NOT NULL,
    PRIMARY KEY (task_id, item_no)
);

CREATE TABLE ledger.operator_action (
    action     VARCHAR    NOT NULL,
    task_id    VARCHAR,
    job_key    VARCHAR,
    custom_id  VARCHAR,
    detail     VARCHAR,
    acted_at   TIMESTAMP  NOT NULL
);

CREATE TABLE ledger.parse_generation (
    task_id                VARCHAR    NOT NULL,
    generation             INTEGER    NOT NULL,
    classes                VARCHAR    NOT NULL,
    output_schema_version  VARCHAR    NOT NULL,
    output_schema_hash     VARCHAR,
    candidates             BIGINT     NOT NULL,
    changed                BIGINT     NOT NULL,
    now_usable             BIGINT     NOT NULL,
    still_failed           BIGINT     NOT NULL,
    who                    VARCHAR,
    created_at             TIMESTAMP  NOT NULL,
    PRIMARY KEY (task_id, generation)
);

CREATE TABLE ledger.parsed_result (
    custom_id              VARCHAR    NOT NULL,
    attempt                INTEGER    NOT NULL,
    task_id                VARCHAR    NOT NULL,
    job_key                VARCHAR    NOT NULL,
    provider_succeeded     BOOLEAN    NOT NULL,
    error_class            VARCHAR,
    error_code             VARCHAR,
    error_message          VARCHAR,
    http_status            INTEGER,
    output_json            VARCHAR,
    finish_reason          VARCHAR,
    input_tokens           BIGINT,
    output_tokens          BIGINT,
    provider_request_id    VARCHAR,
    output_schema_version  VARCHAR    NOT NULL,
    parsed_at              TIMESTAMP  NOT NULL,
    from_line              BOOLEAN    DEFAULT true,
    cost                   DOUBLE,
    thinking_tokens        BIGINT,
    cached_input_tokens    BIGINT,
    item_no                BIGINT,
    parse_generation       INTEGER    DEFAULT 0,
    PRIMARY KEY (custom_id, attempt)
);

CREATE TABLE ledger.parsed_result_superseded (
    custom_id         VARCHAR    NOT NULL,
    attempt           INTEGER    NOT NULL,
    task_id           VARCHAR    NOT NULL,
    item_no           BIGINT,
    parse_generation  INTEGER    NOT NULL,
    superseded_by     INTEGER    NOT NULL,
    parsed_row        JSON       NOT NULL,
    retry_decision    JSON,
    superseded_at     TIMESTAMP  NOT NULL,
    PRIMARY KEY (custom_id, attempt, parse_generation)
);

CREATE TABLE ledger.partition_lease (
    task_id     VARCHAR    NOT NULL,
    owner       VARCHAR    NOT NULL,
    host        VARCHAR    NOT NULL,
    pid         BIGINT     NOT NULL,
    taken_at    TIMESTAMP  NOT NULL,
    expires_at  TIMESTAMP  NOT NULL,
    PRIMARY KEY (task_id)
);

CREATE TABLE ledger.partition_store (
    task_id     VARCHAR    NOT NULL,
    object_key  VARCHAR    NOT NULL,
    sha256      VARCHAR    NOT NULL,
    version     BIGINT     NOT NULL,
    byte_count  BIGINT     NOT NULL,
    updated_at  TIMESTAMP  NOT NULL,
    PRIMARY KEY (task_id)
);

CREATE TABLE ledger.partition_summary (
    task_id       VARCHAR    NOT NULL,
    store_sha256  VARCHAR,
    final_status  VARCHAR    NOT NULL,
    summary       VARCHAR    NOT NULL,
    computed_at   TIMESTAMP  NOT NULL,
    PRIMARY KEY (task_id)
);

CREATE TABLE ledger.pii_mapping (
    custom_id    VARCHAR    NOT NULL,
    task_id      VARCHAR    NOT NULL,
    detector     VARCHAR    NOT NULL,
    placeholder  VARCHAR    NOT NULL,
    value        VARCHAR    NOT NULL,
    recorded_at  TIMESTAMP  NOT NULL,
    PRIMARY KEY (custom_id, placeholder)
);

CREATE TABLE ledger.provider_job (
    job_key                 VARCHAR    NOT NULL,
    task_id                 VARCHAR    NOT NULL,
    shard_id                VARCHAR    NOT NULL,
    provider                VARCHAR    NOT NULL,
    endpoint                VARCHAR    NOT NULL,
    provider_batch_id       VARCHAR,
    input_file_id           VARCHAR,
    output_file_id          VARCHAR,
    error_file_id           VARCHAR,
    raw_status              VARCHAR,
    state                   VARCHAR    NOT NULL,
    cancel_requested        BOOLEAN    NOT NULL DEFAULT false,
    request_total           BIGINT,
    request_completed       BIGINT,
    request_failed          BIGINT,
    provider_errors         VARCHAR,
    created_at              TIMESTAMP  NOT NULL,
    submitted_at            TIMESTAMP,
    state_changed_at        TIMESTAMP  NOT NULL,
    terminal_at             TIMESTAMP,
    last_polled_at          TIMESTAMP,
    terminal_seq            BIGINT,
    downloaded_at           TIMESTAMP,
    claimed_by              VARCHAR,
    claim_expires_at        TIMESTAMP,
    create_outcome          VARCHAR,
    create_error            VARCHAR,
    results_ready           BOOLEAN,
    stuck_at                TIMESTAMP,
    stuck_action            VARCHAR,
    collect_attempts        INTEGER    DEFAULT 0,
    collect_error           VARCHAR,
    endpoint_mode           VARCHAR,
    endpoint_url            VARCHAR,
    request_options         VARCHAR,
    remote_deleted_at       TIMESTAMP,
    remote_delete_attempts  INTEGER    DEFAULT 0,
    remote_delete_error     VARCHAR,
    collected_at            TIMESTAMP,
    account                 VARCHAR    DEFAULT 'default',
    provider_created_at     TIMESTAMP,
    provider_started_at     TIMESTAMP,
    provider_finalizing_at  TIMESTAMP,
    provider_ended_at       TIMESTAMP,
    poll_owner              VARCHAR,
    poll_lease_until        TIMESTAMP,
    PRIMARY KEY (job_key)
);

CREATE TABLE ledger.quarantine (
    custom_id    VARCHAR    NOT NULL,
    task_id      VARCHAR    NOT NULL,
    reason_code  VARCHAR    NOT NULL,
    reason       VARCHAR    NOT NULL,
    recorded_at  TIMESTAMP  NOT NULL,
    item_no      BIGINT,
    PRIMARY KEY (custom_id)
);

CREATE TABLE ledger.quota_account (
    provider     VARCHAR    NOT NULL,
    account      VARCHAR    NOT NULL,
    admissions   BIGINT     NOT NULL DEFAULT 0,
    admitted_at  TIMESTAMP,
    PRIMARY KEY (provider, account)
);

CREATE TABLE ledger.raw_file (
    file_key          VARCHAR    NOT NULL,
    job_key           VARCHAR    NOT NULL,
    task_id           VARCHAR    NOT NULL,
    kind              VARCHAR    NOT NULL,
    provider_file_id  VARCHAR,
    path              VARCHAR    NOT NULL,
    sha256            VARCHAR    NOT NULL,
    byte_count        BIGINT     NOT NULL,
    line_count        BIGINT,
    downloaded_at     TIMESTAMP  NOT NULL,
    ingested_at       TIMESTAMP,
    purged_at         TIMESTAMP,
    archived_path     VARCHAR,
    unmatched_lines   BIGINT     DEFAULT 0,
    PRIMARY KEY (file_key)
);

CREATE TABLE ledger.raw_result (
    file_key             VARCHAR    NOT NULL,
    line_no              BIGINT     NOT NULL,
    job_key              VARCHAR    NOT NULL,
    task_id              VARCHAR    NOT NULL,
    request_id           VARCHAR,
    custom_id            VARCHAR,
    status               VARCHAR    NOT NULL,
    line_id              VARCHAR,
    status_code          INTEGER,
    provider_request_id  VARCHAR,
    body                 JSON       USING COMPRESSION zstd,
    error                JSON,
    malformed_line       VARCHAR,
    ingested_at          TIMESTAMP  NOT NULL,
    attempt              INTEGER,
    item_no              BIGINT
);

CREATE TABLE ledger.remote_file_deletion (
    job_key      VARCHAR    NOT NULL,
    task_id      VARCHAR    NOT NULL,
    provider     VARCHAR    NOT NULL,
    file_id      VARCHAR,
    outcome      VARCHAR    NOT NULL,
    error        VARCHAR,
    recorded_at  TIMESTAMP  NOT NULL
);

CREATE TABLE ledger.retry_decision (
    custom_id     VARCHAR    NOT NULL,
    attempt       INTEGER    NOT NULL,
    task_id       VARCHAR    NOT NULL,
    error_class   VARCHAR    NOT NULL,
    action        VARCHAR    NOT NULL,
    charged       BOOLEAN    NOT NULL,
    next_attempt  INTEGER,
    not_before    TIMESTAMP,
    reason        VARCHAR    NOT NULL,
    decided_at    TIMESTAMP  NOT NULL,
    item_no       BIGINT,
    PRIMARY KEY (custom_id, attempt)
);

CREATE TABLE ledger.review_item (
    custom_id   VARCHAR    NOT NULL,
    task_id     VARCHAR    NOT NULL,
    attempt     INTEGER    NOT NULL,
    sampled_by  VARCHAR    NOT NULL,
    state       VARCHAR    NOT NULL,
    reason      VARCHAR,
    created_at  TIMESTAMP  NOT NULL,
    decided_at  TIMESTAMP,
    PRIMARY KEY (custom_id)
);

CREATE TABLE ledger.revocation (
    custom_id           VARCHAR    NOT NULL,
    task_id             VARCHAR    NOT NULL,
    business_id         VARCHAR    NOT NULL,
    target_table        VARCHAR    NOT NULL,
    output_version      VARCHAR    NOT NULL,
    action              VARCHAR    NOT NULL,
    restored_custom_id  VARCHAR,
    reason              VARCHAR,
    revoked_at          TIMESTAMP  NOT NULL,
    PRIMARY KEY (custom_id)
);

CREATE TABLE ledger.run_request (
    run_key       VARCHAR    NOT NULL,
    task_id       VARCHAR    NOT NULL,
    job_name      VARCHAR    NOT NULL,
    sensor        VARCHAR    NOT NULL,
    requested_at  TIMESTAMP  NOT NULL,
    PRIMARY KEY (run_key)
);

CREATE TABLE ledger.schema_version (
    version      INTEGER    NOT NULL,
    description  VARCHAR,
    applied_at   TIMESTAMP,
    PRIMARY KEY (version)
);

CREATE TABLE ledger.shard (
    shard_id       VARCHAR    NOT NULL,
    task_id        VARCHAR    NOT NULL,
    provider       VARCHAR    NOT NULL,
    endpoint       VARCHAR    NOT NULL,
    model          VARCHAR    NOT NULL,
    attempt        INTEGER    NOT NULL,
    shard_no       INTEGER    NOT NULL,
    path           VARCHAR    NOT NULL,
    line_count     BIGINT     NOT NULL,
    byte_count     BIGINT     NOT NULL,
    est_tokens     BIGINT     NOT NULL,
    sha256         VARCHAR,
    created_at     TIMESTAMP  NOT NULL,
    deferred_at    TIMESTAMP,
    purged_at      TIMESTAMP,
    wait_account   VARCHAR,
    wait_priority  INTEGER,
    wait_reason    VARCHAR,
    wait_seen_at   TIMESTAMP,
    est_cost       DOUBLE,
    PRIMARY KEY (shard_id)
);

CREATE TABLE ledger.shard_line (
    shard_id    VARCHAR  NOT NULL,
    line_no     INTEGER  NOT NULL,
    custom_id   VARCHAR  NOT NULL,
    request_id  VARCHAR  NOT NULL,
    task_id     VARCHAR  NOT NULL,
    attempt     INTEGER  NOT NULL,
    line_bytes  BIGINT   NOT NULL,
    est_tokens  BIGINT   NOT NULL,
    item_no     BIGINT
);

CREATE TABLE ledger.source_reject (
    task_id      VARCHAR    NOT NULL,
    business_id  VARCHAR,
    row_count    BIGINT     NOT NULL,
    reason_code  VARCHAR    NOT NULL,
    reason       VARCHAR    NOT NULL,
    recorded_at  TIMESTAMP  NOT NULL
);

CREATE TABLE ledger.status_event (
    job_key            VARCHAR    NOT NULL,
    from_state         VARCHAR,
    to_state           VARCHAR    NOT NULL,
    raw_status         VARCHAR,
    request_total      BIGINT,
    request_completed  BIGINT,
    request_failed     BIGINT,
    observed_at        TIMESTAMP  NOT NULL
);

-- Indexes: none (primary keys and UNIQUE constraints are above)

-- Sequences
CREATE SEQUENCE ledger.terminal_seq INCREMENT BY 1 MINVALUE 1 MAXVALUE 9223372036854775807 START 1 NO CYCLE;

-- Views: none
