"""Alibaba Bailian / DashScope batch through its OpenAI-compatible base URL, on the `openai` SDK.

Everything is OpenAI's Batch API except the metadata: DashScope documents only ds_name,
ds_description and ds_batch_finish_callback, so the ledger job key travels as `ds_name`
(at most 100 characters) rather than under JOB_KEY_METADATA, and is found again by it.
Other metadata keys may be rejected by the live service.
"""

from __future__ import annotations

from collections.abc import Mapping

from batch_assets.providers.contract import CreateRequest, FindHints, FindResult
from batch_assets.providers.openai.adapter import OpenAIBatchAdapter

DS_NAME_MAX = 100
DS_DESCRIPTION_MAX = 200


class DashScopeBatchAdapter(OpenAIBatchAdapter):
    name = "dashscope"

    def _create_metadata(self, request: CreateRequest) -> dict[str, str]:
        meta = request.metadata
        description = f"batch_assets {meta.get('task_id', '')} {meta.get('shard_id', '')}"
        return {"ds_name": request.job_key[:DS_NAME_MAX], "ds_description": description[:DS_DESCRIPTION_MAX]}

    def _job_key_of(self, metadata: Mapping[str, str] | None) -> str | None:
        return (metadata or {}).get("ds_name")

    def find_job(self, job_key: str, hints: FindHints) -> FindResult:
        return super().find_job(job_key[:DS_NAME_MAX], hints)
