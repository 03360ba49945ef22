-- parsed_result.from_line: whether an outcome came from a result line or from its batch's end state
ALTER TABLE ledger.parsed_result ADD COLUMN from_line BOOLEAN DEFAULT true;
UPDATE ledger.parsed_result SET from_line = false WHERE http_status IS NULL
    AND error_code IN ('batch_expired', 'batch_cancelled', 'batch_failed');
