-- parse generations: re-parsing kept raw results (`batch-assets reparse`) without resending
-- A re-parse runs the parser again over the raw result lines of items whose parse failed (after a
-- parser or output-schema fix) and replaces the outcomes that change. Parsed results and retry
-- decisions stay keyed by (custom_id, attempt): the current outcome of an attempt is the one row in
-- ledger.parsed_result, its generation in parse_generation (0: the first parse); every row a re-parse
-- replaced is kept in ledger.parsed_result_superseded with the retry decision that was taken on it.
CREATE TABLE ledger.parse_generation (
    task_id                VARCHAR NOT NULL,
    generation             INTEGER NOT NULL,   -- 1, 2, … per task partition (0 is every first parse)
    classes                VARCHAR NOT NULL,   -- the failure classes re-parsed, comma-separated
    output_schema_version  VARCHAR NOT NULL,
    output_schema_hash     VARCHAR,            -- the schema the answers were checked against
    candidates             BIGINT NOT NULL,    -- results parsed again
    changed                BIGINT NOT NULL,    -- whose outcome changed (superseded)
    now_usable             BIGINT NOT NULL,    -- of those, answers that now parse (applied by apply)
    still_failed           BIGINT NOT NULL,    -- of those, failed still (with another class or message)
    who                    VARCHAR,
    created_at             TIMESTAMP NOT NULL,
    PRIMARY KEY (task_id, generation)
);
ALTER TABLE ledger.parsed_result ADD COLUMN parse_generation INTEGER DEFAULT 0;
CREATE TABLE ledger.parsed_result_superseded (
    custom_id         VARCHAR NOT NULL,
    attempt           INTEGER NOT NULL,
    task_id           VARCHAR NOT NULL,
    item_no           BIGINT,
    parse_generation  INTEGER NOT NULL,   -- the generation of the replaced row
    superseded_by     INTEGER NOT NULL,   -- the generation that replaced it
    parsed_row        JSON NOT NULL,      -- the replaced ledger.parsed_result row
    retry_decision    JSON,               -- the ledger.retry_decision row taken on it (removed with it)
    superseded_at     TIMESTAMP NOT NULL,
    PRIMARY KEY (custom_id, attempt, parse_generation)
);
