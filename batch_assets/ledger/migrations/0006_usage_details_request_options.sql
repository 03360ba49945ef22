-- usage details kept apart, and the request options each provider job was sent with
-- Thinking (reasoning) tokens of an answer, as the provider reports them apart; already part of
-- output_tokens (billed as output). NULL when the provider reports no separate count.
ALTER TABLE ledger.parsed_result ADD COLUMN thinking_tokens BIGINT;
-- Input tokens served from the provider's prompt cache; part of input_tokens, priced at the
-- cached-input price. NULL when the provider reports none.
ALTER TABLE ledger.parsed_result ADD COLUMN cached_input_tokens BIGINT;
-- The request options a job's lines were rendered with (JSON, e.g. {"structured_output": "response_json_schema"}),
-- so a live run shows which form each job used.
ALTER TABLE ledger.provider_job ADD COLUMN request_options VARCHAR;
