-- quota admission: the account a job counts against, and each waiting shard's place in the queue
-- provider_job.account: the provider account (a name per provider connection, default 'default')
-- whose concurrent-batch and enqueued-token limits the job holds a place of while it is reserved
-- (an intent being created, an undecided create, or a batch in flight).
ALTER TABLE ledger.provider_job ADD COLUMN account VARCHAR DEFAULT 'default';
-- A shard that could not be admitted waits: since deferred_at, for its account, with its priority (0 low .. 3 urgent),
-- why it waits and when a submitter last asked for it (a waiter nobody asks for any more does not
-- hold the queue).
ALTER TABLE ledger.shard ADD COLUMN wait_account VARCHAR;
ALTER TABLE ledger.shard ADD COLUMN wait_priority INTEGER;
ALTER TABLE ledger.shard ADD COLUMN wait_reason VARCHAR;
ALTER TABLE ledger.shard ADD COLUMN wait_seen_at TIMESTAMP;
-- One row per provider account: admissions update it in their transaction, so two admissions for
-- one account never decide on the same view of its reservations.
CREATE TABLE ledger.quota_account (
    provider     VARCHAR  NOT NULL,
    account      VARCHAR  NOT NULL,
    admissions   BIGINT   NOT NULL DEFAULT 0,
    admitted_at  TIMESTAMP,
    PRIMARY KEY (provider, account)
);
