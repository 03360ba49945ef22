-- raw_result.body stored with ZSTD compression
-- The provider's response body of every result line is the ledger's largest column (at 1M bench
-- items 982 of its blocks, ~245 MB, against at most 139 for any other ledger column). DuckDB's
-- default picks DICT_FSST for it; ZSTD holds the same JSON in a quarter of the bytes and writes it in
-- half the time (500,000 bench bodies, plain DuckDB 2.0.1: 3.1-3.4 s and 137 MB -> 1.4-1.7 s and 34 MB),
-- and parse's json_extract over it reads as fast (0.62-0.81 -> 0.55-0.72 s). A column's compression
-- cannot be altered in place, so the table is rebuilt (rows in their stored order, no key to keep).
CREATE TABLE ledger.raw_result_v12 (
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
    body                 JSON USING COMPRESSION zstd,
    error                JSON,
    malformed_line       VARCHAR,
    ingested_at          TIMESTAMP NOT NULL,
    attempt              INTEGER,
    item_no              BIGINT
);
INSERT INTO ledger.raw_result_v12 (file_key, line_no, job_key, task_id, request_id, custom_id, status, line_id,
                                   status_code, provider_request_id, body, error, malformed_line, ingested_at,
                                   attempt, item_no)
SELECT file_key, line_no, job_key, task_id, request_id, custom_id, status, line_id, status_code,
       provider_request_id, body, error, malformed_line, ingested_at, attempt, item_no
FROM ledger.raw_result;
DROP TABLE ledger.raw_result;
ALTER TABLE ledger.raw_result_v12 RENAME TO raw_result;
