-- shard.est_cost and partition_lease: what a partition store's neighbours need from the control ledger
-- shard.est_cost: the estimated cost of the shard's lines (sum of their items' manifest_item.est_cost;
-- NULL when the model has no price), written with the shard at cut. The budget sums it across
-- partitions from the control ledger alone: in `distributed` each partition's lines and items are in
-- that partition's own store, which another partition's run does not open.
ALTER TABLE ledger.shard ADD COLUMN est_cost DOUBLE;
UPDATE ledger.shard s SET est_cost = (
    SELECT sum(m.est_cost)
    FROM ledger.shard_line sl JOIN ledger.manifest_item m ON m.task_id = sl.task_id AND m.custom_id = sl.custom_id
    WHERE sl.shard_id = s.shard_id
);
-- partition_lease: who may write a partition's per-item store (`distributed`; unused on `local`,
-- where the one warehouse file's lock is the guard). A writer takes the row when it is free, expired,
-- already its own, or held by a process of its host that is gone; renews it while it writes; and
-- deletes it when done.
CREATE TABLE ledger.partition_lease (
    task_id     VARCHAR    NOT NULL,
    owner       VARCHAR    NOT NULL,   -- host:pid of the writing process
    host        VARCHAR    NOT NULL,
    pid         BIGINT     NOT NULL,
    taken_at    TIMESTAMP  NOT NULL,
    expires_at  TIMESTAMP  NOT NULL,
    PRIMARY KEY (task_id)
);
