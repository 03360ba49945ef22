-- provider_job.provider_*_at: the provider's own timestamps of each batch
-- When the provider says the batch was created, began processing (in progress / started), began
-- finalizing and ended (completed, failed, expired or cancelled), UTC; NULL where the provider does
-- not report one (Anthropic and the Gemini API have no start, only OpenAI and DashScope a
-- finalizing time). Polls only fill them in: a known time is never overwritten by NULL. The
-- report's queue and run times come from them; the poll observations (status_event, seen once a
-- sensor tick) stand in only where the provider reports none.
ALTER TABLE ledger.provider_job ADD COLUMN provider_created_at TIMESTAMP;
ALTER TABLE ledger.provider_job ADD COLUMN provider_started_at TIMESTAMP;
ALTER TABLE ledger.provider_job ADD COLUMN provider_finalizing_at TIMESTAMP;
ALTER TABLE ledger.provider_job ADD COLUMN provider_ended_at TIMESTAMP;
