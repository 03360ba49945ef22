-- item_no: every manifest item's number (unique within its partition), carried by each per-item ledger table
-- A manifest item gets a number when it is frozen (0, 1, 2, … in a first freeze; a refreeze numbers
-- its new items after the partition's highest), and every row written for the item (shard line,
-- quarantine, result line, outcome, retry decision, apply decision) carries it, taken from the same
-- row that gives its custom_id. The per-item reconciliation matches the tables by this integer: DuckDB
-- joins and groups 8-byte integers several times faster than ~60-byte custom_id strings, and at 10M
-- items their hash tables fit in memory where the strings' spilled. A row of an id the manifest does
-- not know has none (NULL). (The columns are added first: DuckDB refuses to alter a table with
-- outstanding updates in the same transaction.)
ALTER TABLE ledger.manifest_item ADD COLUMN item_no BIGINT;
ALTER TABLE ledger.shard_line ADD COLUMN item_no BIGINT;
ALTER TABLE ledger.quarantine ADD COLUMN item_no BIGINT;
ALTER TABLE ledger.raw_result ADD COLUMN item_no BIGINT;
ALTER TABLE ledger.parsed_result ADD COLUMN item_no BIGINT;
ALTER TABLE ledger.retry_decision ADD COLUMN item_no BIGINT;
ALTER TABLE ledger.applied_result ADD COLUMN item_no BIGINT;

UPDATE ledger.manifest_item SET item_no = n.item_no
FROM (SELECT custom_id, row_number() OVER (PARTITION BY task_id ORDER BY manifest_version, frozen_at, custom_id) - 1 AS item_no
      FROM ledger.manifest_item) AS n
WHERE manifest_item.custom_id = n.custom_id;
UPDATE ledger.shard_line SET item_no = m.item_no FROM ledger.manifest_item m WHERE m.custom_id = shard_line.custom_id;
UPDATE ledger.quarantine SET item_no = m.item_no FROM ledger.manifest_item m WHERE m.custom_id = quarantine.custom_id;
UPDATE ledger.raw_result SET item_no = m.item_no FROM ledger.manifest_item m WHERE m.custom_id = raw_result.custom_id;
UPDATE ledger.parsed_result SET item_no = m.item_no FROM ledger.manifest_item m WHERE m.custom_id = parsed_result.custom_id;
UPDATE ledger.retry_decision SET item_no = m.item_no FROM ledger.manifest_item m WHERE m.custom_id = retry_decision.custom_id;
UPDATE ledger.applied_result SET item_no = m.item_no FROM ledger.manifest_item m WHERE m.custom_id = applied_result.custom_id;
