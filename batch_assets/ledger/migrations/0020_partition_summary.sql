-- partition_summary: each final partition's report figures, so a report across partitions need not
-- open every partition's store. Written when a partition's report is built (the `report` asset,
-- the demo); `store_sha256` is the version of the partition's store it was computed from (NULL
-- where stores have no versions). A reader takes it only while the partition is still final and,
-- with object storage, its store still at that version; else it reads the store.
CREATE TABLE ledger.partition_summary (
    task_id       VARCHAR    NOT NULL,
    store_sha256  VARCHAR,
    final_status  VARCHAR    NOT NULL,   -- the partition's final status the figures were read with
    summary       VARCHAR    NOT NULL,   -- JSON: reconciliation, gate, times, re-parse figures
    computed_at   TIMESTAMP  NOT NULL,
    PRIMARY KEY (task_id)
);
