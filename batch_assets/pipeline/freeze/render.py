"""SQL expressions that render prompts and provider request lines for a task (set-based)."""

from __future__ import annotations

import json

import duckdb

from batch_assets.providers.registry import wire_format
from batch_assets.spec.resolve import PLACEHOLDER_RE, ResolvedTask
from batch_assets.sqltext import quote_ident, sql_literal


def prompt_sql(task: ResolvedTask) -> str:
    """concat() of the template's literal text and its {{ column }} values (NULL renders as '')."""
    parts: list[str] = []
    pos = 0
    for m in PLACEHOLDER_RE.finditer(task.template):
        if m.start() > pos:
            parts.append(sql_literal(task.template[pos : m.start()]))
        parts.append(f"coalesce(CAST({quote_ident(m.group(1))} AS VARCHAR), '')")
        pos = m.end()
    if pos < len(task.template):
        parts.append(sql_literal(task.template[pos:]))
    return "concat(" + ", ".join(parts) + ")"


def blank_columns_sql(task: ResolvedTask) -> str:
    """A list of the required columns that are NULL or blank for the row (empty list when fine)."""
    required = task.spec.source.required_columns or list(task.template_columns)
    items = ", ".join(
        f"CASE WHEN trim(coalesce(CAST({quote_ident(c)} AS VARCHAR), '')) = '' THEN {sql_literal(c)} END"
        for c in required
    )
    return f"list_filter([{items}], lambda c: c IS NOT NULL)"


def input_hash_sql(task: ResolvedTask, prompt_col: str = "prompt_text") -> str:
    """input_hash: sha256 of the canonical request (text + prompt version + model + params + schema version)."""
    canonical = [
        task.spec.provider,
        task.spec.endpoint,
        task.spec.model,
        task.spec.prompt.version,
        task.params_json,
        task.spec.output.version,
        task.spec.prompt.system or "",
    ]
    options = task.spec.provider_options.non_default()
    if options:  # only when set: tasks on the defaults keep the hashes they always had
        canonical.append(json.dumps(options, sort_keys=True, separators=(",", ":")))
    fixed = "\x1f".join(canonical) + "\x1f"
    return f"sha256({sql_literal(fixed)} || {prompt_col})"


def estimated_tokens_sql(text_sql: str) -> str:
    """Offline token estimate (no tokenizer download): ~4 bytes per token, at least 1 per CJK char.

    UTF-8 CJK characters are 3 bytes, so bytes/3 bounds them; Latin text is ~4 chars per token.
    """
    return f"CAST(ceil(greatest(strlen({text_sql}) / 4.0, (strlen({text_sql}) - length({text_sql})) / 2.0)) AS BIGINT)"


def request_line_sql(task: ResolvedTask, request_id_col: str = "request_id", prompt_col: str = "prompt_text") -> str:
    """The provider's JSONL request line as compact JSON text (the task's wire format).

    Rendered as a template: the format's json_object expression is evaluated ONCE with sentinel
    values, and each row splices its JSON-escaped request id and prompt into that text. Same bytes
    as evaluating json_object per row (which re-parses the constant parts, e.g. the output
    schema, for every line), at a fraction of the cost."""
    sql = wire_format(task.spec.provider, task.spec.endpoint).request_line_sql(task, request_id_col, prompt_col)
    parts = _line_template(task)
    if parts is None:
        return sql
    a, b, c = parts
    return (
        f"concat({sql_literal(a)}, CAST(to_json({request_id_col}) AS VARCHAR), {sql_literal(b)}, "
        f"CAST(to_json({prompt_col}) AS VARCHAR), {sql_literal(c)})"
    )


_RID, _PROMPT = "\x00batch-assets-request-id\x00", "\x00batch-assets-prompt\x00"


def _line_template(task: ResolvedTask) -> tuple[str, str, str] | None:
    sql = wire_format(task.spec.provider, task.spec.endpoint).request_line_sql(
        task, sql_literal(_RID), sql_literal(_PROMPT)
    )
    with duckdb.connect() as conn:
        text, q1, q2 = conn.execute(
            f"SELECT {sql}, CAST(to_json({sql_literal(_RID)}) AS VARCHAR), "
            f"CAST(to_json({sql_literal(_PROMPT)}) AS VARCHAR)"
        ).fetchone()
    if text.count(q1) != 1 or text.count(q2) != 1 or text.index(q1) > text.index(q2):
        return None  # the format uses the values more than once or elsewhere: keep the per-row form
    a, rest = text.split(q1)
    b, c = rest.split(q2)
    return a, b, c


def request_id_sql(task: ResolvedTask, custom_id_col: str = "custom_id") -> str:
    """The provider-safe request id: the custom_id itself when the provider accepts it, else a
    stable hash-based id (the mapping is stored in ledger.shard_line)."""
    limits = task.limits
    return (
        f"CASE WHEN length({custom_id_col}) <= {limits.request_id_max_len} "
        f"AND regexp_full_match({custom_id_col}, {sql_literal(limits.request_id_pattern)}) "
        f"THEN {custom_id_col} ELSE 'bx_' || substr(sha256({custom_id_col}), 1, 40) END"
    )
