-- provider_job.collected_at: when a terminal job was first found fully collected (downloaded, its
-- files ingested, its lines parsed, its usable answers applied). Nothing in the ledger undoes any of
-- these steps, so such a job stays collected and the search for pending collections skips it: that
-- search then costs what the unfinished jobs cost, not the ledger's whole history.
ALTER TABLE ledger.provider_job ADD COLUMN collected_at TIMESTAMP;
