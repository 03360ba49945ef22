-- raw_file.unmatched_lines: provider answers that could not be matched to a request
-- A Gemini inline job may return responses without their `metadata.key`; the answers come back in
-- any order, so matching them by position would misattribute them. Such responses are left out of
-- the written file and counted here; the requests they belonged to become `unmatched_result` items
-- (re-queued as a file, no attempt charged).
ALTER TABLE ledger.raw_file ADD COLUMN unmatched_lines BIGINT DEFAULT 0;
