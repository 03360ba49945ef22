-- partition_store: the current version of each partition's per-item store in object storage
-- With $BATCH_ASSETS_STORAGE_URL set, a partition store is an object keyed by its content's sha256;
-- this row names the version every run must start from. A writer moves it by compare-and-set
-- (`WHERE sha256 = <the version it downloaded>`) in the same PostgreSQL transaction as the control
-- rows its work recorded, so a version counts once that transaction commits; an upload whose
-- transaction never committed is an orphan, deleted by retention.
CREATE TABLE ledger.partition_store (
    task_id     VARCHAR    NOT NULL,
    object_key  VARCHAR    NOT NULL,
    sha256      VARCHAR    NOT NULL,
    version     BIGINT     NOT NULL,   -- 1 for the first upload, +1 for each move
    byte_count  BIGINT     NOT NULL,
    updated_at  TIMESTAMP  NOT NULL,
    PRIMARY KEY (task_id)
);
