-- prompt and output-schema hashes at freeze, recorded dry runs
-- What the partition was frozen with: sha256 of the prompt (template + system message) and of the
-- output schema (canonical JSON). The gate refuses to submit when the task file now differs.
ALTER TABLE ledger.batch_task ADD COLUMN prompt_hash VARCHAR;
ALTER TABLE ledger.batch_task ADD COLUMN output_schema_hash VARCHAR;
-- `batch-assets dry-run`: N request lines rendered as they would be sent, shown, never sent.
-- One row per dry run; one per task and prompt version lets partitions above the threshold through.
CREATE TABLE ledger.dry_run (
    task_name       VARCHAR NOT NULL,
    prompt_version  VARCHAR NOT NULL,
    prompt_hash     VARCHAR,
    task_id         VARCHAR NOT NULL,
    n               INTEGER NOT NULL,
    sample_hash     VARCHAR NOT NULL,
    items           BIGINT NOT NULL,
    cost_estimated  DOUBLE,
    currency        VARCHAR,
    dry_run_at      TIMESTAMP NOT NULL
);
