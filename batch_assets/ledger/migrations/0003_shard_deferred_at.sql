-- shard.deferred_at: when submission held a shard back for the provider's concurrent-job cap
ALTER TABLE ledger.shard ADD COLUMN deferred_at TIMESTAMP;
