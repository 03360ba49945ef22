-- sensitive-data placeholders kept locally, estimated and actual cost per item
-- The original values behind the placeholders of redacted items (`[EMAIL_1]` -> the address).
-- Local only: never sent to a provider, logged, reported or written to a shard file.
CREATE TABLE ledger.pii_mapping (
    custom_id     VARCHAR NOT NULL,
    task_id       VARCHAR NOT NULL,
    detector      VARCHAR NOT NULL,
    placeholder   VARCHAR NOT NULL,
    value         VARCHAR NOT NULL,
    recorded_at   TIMESTAMP NOT NULL,
    PRIMARY KEY (custom_id, placeholder)
);
-- Estimated cost of an item at freeze (offline token estimate, batch price, output at params.max_tokens).
ALTER TABLE ledger.manifest_item ADD COLUMN est_input_tokens BIGINT;
ALTER TABLE ledger.manifest_item ADD COLUMN est_cost DOUBLE;
-- Actual cost of an attempt from the provider's usage (input + output incl. thinking, batch price).
ALTER TABLE ledger.parsed_result ADD COLUMN cost DOUBLE;
-- The currency of a partition's costs (from the provider's price table).
ALTER TABLE ledger.batch_task ADD COLUMN currency VARCHAR;
