"""The task spec model: what a team declares in a task's `defs.yaml` (under `attributes:`).

Dagster-free. Field errors name the field and the fix; file references (prompt template, output
schema) are resolved relative to the YAML file by `spec.resolve`.
"""

from __future__ import annotations

import re
from typing import Literal

import duckdb
from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator
from pydantic_core import PydanticCustomError

from batch_assets.formatting import parse_duration
from batch_assets.policy.model import PolicySpec
from batch_assets.providers.registry import known_providers, provider_limits
from batch_assets.spec.cron import is_cron
from batch_assets.spec.failure_classes import unknown_classes_error

NAME_RE = re.compile(r"^[a-z][a-z0-9_]{0,47}$")
SQL_IDENT_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class SourceSpec(_Strict):
    sql: str = Field(description="DuckDB SELECT over business tables; `$partition_date` is the partition's DATE.")
    business_id: str = Field(description="Column of the query that identifies the business record.")
    required_columns: list[str] | None = Field(
        default=None,
        description="Columns that must be non-blank for an item to be sent (default: every template column).",
    )
    tables: list[str] | None = Field(
        default=None,
        description="Tables the query reads, shown as the task's source assets (default: found in the query).",
    )

    @field_validator("sql")
    @classmethod
    def _select_only(cls, v: str) -> str:
        # DuckDB's own parser decides, not a look at the first word: `SELECT 1; DROP TABLE t` is two
        # statements, and the manifest must only ever read the source.
        try:
            statements = duckdb.extract_statements(v)
        except duckdb.Error as exc:
            raise ValueError(f"is not valid DuckDB SQL ({str(exc).splitlines()[0]}); fix the query") from None
        kinds = [s.type.name for s in statements]
        if kinds != ["SELECT"]:
            found = "no statement" if not kinds else f"{len(kinds)} statement(s): {', '.join(kinds)}"
            raise ValueError(
                f"must be exactly one SELECT (or WITH … SELECT) query, found {found}; "
                "the manifest only reads the source"
            )
        if "$partition_date" not in v:
            raise ValueError(
                "must filter by the partition: reference `$partition_date` (a DATE), "
                "e.g. `WHERE created_date = $partition_date`"
            )
        return v


class PromptSpec(_Strict):
    template: str = Field(description="Template file (relative to defs.yaml) with {{ column }} placeholders.")
    version: str = Field(description="Bump whenever the template's meaning changes; part of input_hash.")
    system: str | None = Field(default=None, description="Optional system message.")


class ParamsSpec(_Strict):
    temperature: float = Field(default=0.0, ge=0.0, le=2.0)
    max_tokens: int = Field(default=256, ge=1, le=65536)


GEMINI_SCHEMA_FIELDS = ("response_json_schema", "response_schema")


class ProviderOptionsSpec(_Strict):
    """Request options of one provider; each `<provider>_...` option applies to that provider only."""

    gemini_schema_field: Literal["response_json_schema", "response_schema"] = Field(
        default="response_json_schema",
        description="Gemini structured output (kind json): `response_json_schema` (default) sends the output "
        "schema as JSON Schema in generationConfig.responseJsonSchema; `response_schema` sends the "
        "SDK's conversion of it to Gemini's OpenAPI Schema subset in generationConfig.responseSchema "
        "(keywords that subset lacks, e.g. additionalProperties, are not sent; answers are still "
        "checked against the full schema).",
    )

    def non_default(self) -> dict[str, str]:
        """The options set to something other than their default (part of the input hash)."""
        defaults = ProviderOptionsSpec()
        return {k: v for k, v in self.model_dump().items() if v != getattr(defaults, k)}


class OutputSpec(_Strict):
    kind: Literal["json", "text", "embedding"] = Field(
        default="json",
        description="json: an answer matching schema_file; text: free text (field 'text'); "
        "embedding: a vector (field 'embedding').",
    )
    schema_file: str | None = Field(
        default=None, description="JSON Schema file (relative to defs.yaml), kind json only."
    )
    version: str = Field(description="Version of the output; stored with every result and in the business table.")
    name: str = Field(default="result", description="Schema name sent to the provider.")
    dimensions: int | None = Field(default=None, ge=1, le=8192, description="Vector size, kind embedding only.")

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not re.fullmatch(r"[A-Za-z0-9_-]{1,64}", v):
            raise ValueError("use 1-64 letters, digits, '_' or '-'")
        return v

    @model_validator(mode="after")
    def _kind_fields(self) -> OutputSpec:
        if self.kind == "json" and not self.schema_file:
            raise ValueError("kind json needs schema_file: a JSON Schema the answer must match")
        if self.kind != "json" and self.schema_file:
            raise ValueError(
                f"schema_file applies to kind json only; remove it or set kind: json (kind is {self.kind})"
            )
        if self.kind == "embedding" and not self.dimensions:
            raise ValueError("kind embedding needs dimensions (the vector size, e.g. 768)")
        if self.kind != "embedding" and self.dimensions:
            raise ValueError("dimensions applies to kind embedding only")
        return self


class ApplySpec(_Strict):
    table: str = Field(description="Business table the results are written to (created if missing).")
    key: str = Field(description="Key column of the business table; receives the business id.")
    columns: dict[str, str] = Field(description="target column -> output field of the answer")

    @field_validator("table", "key")
    @classmethod
    def _ident(cls, v: str) -> str:
        if not SQL_IDENT_RE.match(v):
            raise ValueError(f"{v!r} is not a plain SQL identifier; use letters, digits and '_'")
        return v

    @field_validator("columns")
    @classmethod
    def _columns(cls, v: dict[str, str]) -> dict[str, str]:
        if not v:
            raise ValueError("map at least one target column to an output field")
        for col in v:
            if not SQL_IDENT_RE.match(col):
                raise ValueError(f"target column {col!r} is not a plain SQL identifier")
        return v


class LimitsSpec(_Strict):
    """Per-task overrides of the provider's limits (providers/<name>/limits.yaml)."""

    max_requests_per_shard: int | None = Field(default=None, ge=1)
    max_shard_bytes: int | None = Field(default=None, ge=1)
    max_line_bytes: int | None = Field(default=None, ge=1)
    max_inline_bytes: int | None = Field(default=None, ge=0)
    max_enqueued_tokens: int | None = Field(default=None, ge=1)
    max_concurrent_jobs: int | None = Field(default=None, ge=1)
    max_creates_per_minute: int | None = Field(default=None, ge=1)


# Submission priority: urgent work is admitted before waiting work of lower priority (with ageing,
# so low priority is never starved); a run tag `batch_assets/priority` overrides it for one run.
Priority = Literal["low", "normal", "high", "urgent"]
PRIORITIES: tuple[str, ...] = ("low", "normal", "high", "urgent")


RetryAction = Literal["retry", "final_failed", "compliance_hold", "await_operator"]

# What a partition whose source had no rows for its day (0 items, nothing rejected) ends as: its
# verdict is `empty_source` and its final status EMPTY, and the setting gives the verdict's weight.
EmptySource = Literal["ok", "warn", "fail"]
EMPTY_SOURCE_CHOICES: tuple[str, ...] = ("ok", "warn", "fail")


class RetrySpec(_Strict):
    """What happens to failed items: per failure class an action, bounded attempts, a failure tolerance.

    Default actions: a batch rejected whole for capacity is re-queued without costing its items an
    attempt; rate/capacity, internal, expired and system-canceled items are retried (expired and
    canceled remainders in smaller shards); a parse error is re-asked `parse_retries` times; a
    validation error waits for an operator (`batch-assets retry --class validation_error` after a
    fix); a content-policy refusal goes to the compliance queue; an operator's cancel is final.
    """

    automatic: bool = Field(default=True, description="Send retries without a person (sensor + submissions asset).")
    max_attempts: int = Field(default=3, ge=1, le=20, description="Attempts per item; then it is final-failed.")
    parse_retries: int = Field(default=1, ge=0, le=10, description="Re-asks after an answer that fails the schema.")
    backoff_s: float = Field(default=30.0, ge=0, description="Wait before a retry; doubles with each attempt.")
    shrink: float = Field(
        default=0.5,
        gt=0,
        le=1,
        description="Retry shards hold at most this fraction of the "
        "provider's requests per shard, per attempt (expired remainders go in smaller shards).",
    )
    max_failed_fraction: float = Field(
        default=0.01,
        ge=0,
        le=1,
        description="Final failures a partition may have and still pass its reconciliation check.",
    )
    actions: dict[str, RetryAction] = Field(
        default_factory=dict, description="Per failure class, override the default action."
    )

    @field_validator("actions")
    @classmethod
    def _classes(cls, v: dict[str, str]) -> dict[str, str]:
        if error := unknown_classes_error(v):
            raise error
        return v


class BudgetSpec(_Strict):
    """A task's `budget:` section: the most one partition may cost (estimated before submission,
    in the currency of the provider's price table). No cap when unset."""

    max_cost_per_partition: float | None = Field(default=None, ge=0)


class GateSpec(_Strict):
    """A task's `gate:` section: the pre-submission checks that are configured per task."""

    allowed_models: list[str] | None = Field(
        default=None,
        description="Narrow the provider's model allow-list (providers/<name>/models.yaml) for this "
        "task: the model must be on both lists. Entries outside the provider's list widen "
        "nothing (the check names them). `*` stands for any text.",
    )
    dry_run_threshold: int = Field(
        default=10_000,
        ge=0,
        description="A partition with more items than this is not submitted until a dry run "
        "(`batch-assets dry-run <task_id>`) is recorded for the task's prompt version.",
    )


class RetentionSpec(_Strict):
    """A task's `retention:` section: provider-side files and local files after the work is done."""

    delete_remote_files: bool = Field(
        default=True,
        description="Delete the provider-side input, output and error files once a job's results are downloaded.",
    )
    local_days: float = Field(
        default=30,
        gt=0,
        description="Days after which a final partition's local shard "
        "and raw files are purged (raw files are kept gzip-compressed).",
    )


class ScheduleSpec(_Strict):
    """A task's `schedule:` section: when its daily schedule submits the last complete day."""

    cron: str = Field(
        default="0 1 * * *",
        description="When the `<task>__daily` schedule fires, a cron expression read in `timezone`; each tick "
        "submits the last complete partition (partitions are UTC days).",
    )
    timezone: str = Field(default="UTC", description="An IANA time zone name for `cron`, e.g. Asia/Shanghai.")

    @field_validator("cron")
    @classmethod
    def _cron(cls, v: str) -> str:
        if not is_cron(v):
            raise ValueError(f"{v!r} is not a cron expression; use five fields, e.g. 30 2 * * * for 02:30")
        return v

    @field_validator("timezone")
    @classmethod
    def _timezone(cls, v: str) -> str:
        from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

        try:
            ZoneInfo(v)
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError(f"{v!r} is not a time zone; use an IANA name such as UTC or Asia/Shanghai") from None
        return v


class ReviewSpec(_Strict):
    """A task's `review:` section: applied answers picked for a person to approve or reject."""

    sample_rate: float = Field(
        default=0.0,
        ge=0,
        le=1,
        description="Share of applied answers picked (deterministically, by a hash of the custom_id).",
    )
    always_if: str | None = Field(
        default=None,
        description="A SQL condition over the output fields (e.g. "
        "`confidence < 0.5`); matching answers are always picked.",
    )

    @field_validator("always_if")
    @classmethod
    def _one_condition(cls, v: str | None) -> str | None:
        if v is None:
            return v
        if not v.strip():
            raise ValueError("write one SQL condition over the output fields, e.g. `confidence < 0.5`")
        return v


Duration = float | str


class StuckSpec(_Strict):
    """Per-task overrides of when a provider job counts as stuck and what is done about it."""

    sla: dict[Literal["VALIDATING", "SUBMITTED", "RUNNING", "FINALIZING"], Duration] | None = Field(
        default=None, description="Longest time a job may stay in a state: seconds or e.g. '30m', '24h'."
    )
    policy: Literal["cancel_and_retry", "notify"] | None = Field(
        default=None,
        description="cancel_and_retry (default): cancel a job stuck for act_after more, its "
        "unfinished items are sent again; notify: only flag and log it.",
    )
    act_after: Duration | None = Field(
        default=None,
        description="How long after being flagged a stuck job is cancelled (default: its state's SLA again).",
    )

    @field_validator("act_after")
    @classmethod
    def _duration(cls, v):
        if v is not None:
            parse_duration(v)
        return v

    @field_validator("sla")
    @classmethod
    def _durations(cls, v):
        for value in (v or {}).values():
            parse_duration(value)
        return v


OWNER_RE = re.compile(r"^(team:[A-Za-z0-9_.-]+|[^@\s]+@[^@\s]+\.[^@\s]+)$")
TAG_KEY_RE = re.compile(r"^([A-Za-z0-9_.-]{1,63}/)?[A-Za-z0-9_.-]{1,63}$")
TAG_VALUE_RE = re.compile(r"^[A-Za-z0-9_.-]{0,63}$")


class TaskSpec(_Strict):
    name: str = Field(description="Task name: asset key prefix, asset group and task_id prefix.")
    description: str = ""
    owners: list[str] = Field(
        default_factory=list,
        description="Who answers for the task's assets: e-mail "
        "addresses or `team:<name>`; shown as the owners of every asset of the task.",
    )
    tags: dict[str, str] = Field(
        default_factory=dict,
        description="Tags on every asset of the task (keys and "
        "values: letters, digits, '_', '-', '.', at most 63; a key may have one 'prefix/').",
    )
    item_type: str = Field(description="Kind of business record, part of custom_id (e.g. ticket).")
    source: SourceSpec
    prompt: PromptSpec
    provider: str = "openai"
    model: str
    endpoint: str = "/v1/chat/completions"
    params: ParamsSpec = ParamsSpec()
    provider_options: ProviderOptionsSpec = ProviderOptionsSpec()
    output: OutputSpec
    apply: ApplySpec
    max_input_tokens: int = Field(default=8000, ge=1, description="Lines estimated above this are quarantined.")
    limits: LimitsSpec = LimitsSpec()
    priority: Priority = Field(
        default="normal", description="Admission priority when provider quota is scarce: low, normal, high, urgent."
    )
    retry: RetrySpec = RetrySpec()
    stuck: StuckSpec = StuckSpec()
    policy: PolicySpec = Field(
        default_factory=PolicySpec,
        description="Sensitive data: per detector block | "
        "redact | allow, applied at freeze before the input hash is taken.",
    )
    empty_source: EmptySource = Field(
        default="warn",
        description="A partition whose source query returned no rows for its day ends final (EMPTY) with "
        "the verdict `empty_source`: ok passes it, warn (default) makes its reconciliation check a WARN "
        "(the partition is still done), fail fails it (the partition shows red).",
    )
    budget: BudgetSpec = BudgetSpec()
    gate: GateSpec = GateSpec()

    retention: RetentionSpec = RetentionSpec()
    review: ReviewSpec = ReviewSpec()
    schedule: ScheduleSpec = ScheduleSpec()

    @field_validator("name")
    @classmethod
    def _task_name(cls, v: str) -> str:
        if not NAME_RE.match(v):
            raise ValueError("use lower-case letters, digits and '_' (start with a letter, at most 48 chars)")
        return v

    @field_validator("owners")
    @classmethod
    def _owners(cls, v: list[str]) -> list[str]:
        bad = [o for o in v if not OWNER_RE.match(o)]
        if bad:
            raise ValueError(f"{bad} are not owners; use e-mail addresses or team names written `team:<name>`")
        return v

    @field_validator("tags")
    @classmethod
    def _tags(cls, v: dict[str, str]) -> dict[str, str]:
        bad = [f"{k}: {val}" for k, val in v.items() if not TAG_KEY_RE.match(k) or not TAG_VALUE_RE.match(str(val))]
        if bad:
            raise ValueError(
                f"{bad} are not valid tags; keys and values use letters, digits, '_', '-', '.' "
                "(at most 63 each; a key may start with one 'prefix/')"
            )
        return v

    @field_validator("empty_source", mode="before")
    @classmethod
    def _empty_source(cls, v):
        if v not in EMPTY_SOURCE_CHOICES:
            raise PydanticCustomError(  # not ValueError: its message would start "Value error, "
                "empty_source",
                "{value} is not a choice; use ok (an empty day passes), warn (the default: its check warns) "
                "or fail (an empty day fails its partition)",
                {"value": repr(v)},
            )
        return v

    @field_validator("item_type")
    @classmethod
    def _item_type(cls, v: str) -> str:
        if not re.fullmatch(r"[a-z][a-z0-9_]{0,31}", v):
            raise ValueError("use lower-case letters, digits and '_' (at most 32 chars)")
        return v

    @field_validator("provider")
    @classmethod
    def _provider(cls, v: str) -> str:
        if v not in known_providers():
            raise ValueError(f"unknown provider {v!r}; use one of: {', '.join(known_providers())}")
        return v

    @field_validator("endpoint")
    @classmethod
    def _endpoint_supported(cls, v: str, info: ValidationInfo) -> str:
        provider = info.data.get("provider")
        if provider not in known_providers():
            return v  # the provider field reports its own error
        endpoints = provider_limits(provider).endpoints
        if v not in endpoints:
            raise ValueError(
                f"endpoint {v!r} is not supported for provider {provider!r}; use one of: {', '.join(endpoints)}"
            )
        return v

    @model_validator(mode="after")
    def _provider_options_apply(self) -> TaskSpec:
        for option in self.provider_options.model_fields_set:
            if not option.startswith(f"{self.provider}_"):
                raise ValueError(
                    f"provider_options.{option} applies to provider {option.split('_')[0]!r} only "
                    f"(this task's provider is {self.provider!r}); remove it"
                )
        return self

    @model_validator(mode="after")
    def _output_kind_supported(self) -> TaskSpec:
        kinds = provider_limits(self.provider).endpoints[self.endpoint]
        if self.output.kind not in kinds:
            raise ValueError(
                f"output kind {self.output.kind!r} is not available on {self.provider} {self.endpoint}; "
                f"that endpoint gives: {', '.join(kinds)}"
            )
        return self
