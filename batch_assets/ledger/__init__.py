"""The DuckDB ledger: versioned schema, migrations, short-lived connections, and its one writer.

Every write to a `ledger.*` table goes through this package; stages never write ledger tables
themselves. They hand the writer values, or a query producing the rows (read by column name), and
the writer runs one set-based statement whose INSERTs always name their columns:

* `ledger.tasks`    — batch_task (upsert_frozen_task, set_task_status)
* `ledger.manifest` — source_reject, manifest_item (replace_source_rejects, insert_manifest_items,
  supersede_items_not_in, revive_items_in)
* `ledger.shards`   — quarantine, shard, shard_line (insert_quarantine, insert_shards, insert_shard_lines,
  mark_shards_deferred)
* `ledger.jobs`     — provider_job, status_event, operator_action (insert_job_intent, set_input_file,
  record_snapshot, request_cancel, mark_downloaded, insert_jobs, insert_status_events; submission
  claims and settled creates: claim_new_intent, claim_intent, renew_claim, release_claim,
  mark_create_unknown, mark_create_failed, record_created, record_found, adopt_job, abandon_job;
  collection and stuck marks: count_collect_attempts, set_collect_error, mark_stuck, set_stuck_action)
* `ledger.results`  — raw_file, raw_result, parsed_result, applied_result (insert_raw_file,
  insert_raw_files, insert_raw_results, mark_files_ingested, insert_parsed_results, insert_applied_results)
* `ledger.dry_runs` — dry_run (record_dry_run)
* `ledger.retention` — remote_file_deletion and the deletion / purge marks on provider_job, shard,
  raw_file (record_remote_deletion, record_remote_deletion_failure, mark_shard_purged, mark_raw_file_purged)
* `ledger.review`   — review_item, applied_previous, revocation (insert_review_items, decide_review,
  insert_applied_previous, insert_revocations)

The writers and readers of the control tables (control_schema.CONTROL_TABLES) also take a ControlDB
(`ledger.control_db`: the same tables on DuckDB or PostgreSQL) and hand rows over as values or
Arrow (`statements.insert_rows`), never as SQL over a DuckDB table.

`ledger.transaction.transaction(conn)` is the one way to make several writes atomic (on a ControlDB
too), and
`ledger.states` holds the job-state vocabulary as SQL (TERMINAL_STATES_SQL, IN_FLIGHT_SQL, …).
"""
