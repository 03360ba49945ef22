"""Synthetic benchmark data, generated set-based in DuckDB (no Python loop over items).

* `create_source_table` — `main.support_tickets` (the demo task's source schema) for ONE partition
  date: N rows from `range(N)`, English / Chinese / mixed subjects and bodies assembled from a few
  dozen phrase fragments picked by hash (~300-800 bytes per body), and a few empty bodies (which
  the shards stage quarantines).
* `write_provider_outputs` — for every submitted shard line, the provider's result line in the
  OpenAI Batch output-file format: `id`, `custom_id`, `response{status_code,
  request_id, body: chat.completion}`, `error: null`. About 0.5 % of the lines are HTTP 429 / 500
  failures written to the job's error file; 0.2 % of the answers break the output schema and 0.1 %
  stop at `finish_reason: length` (so parse has failures to classify). Lines are shuffled. Written
  with one partitioned `COPY`.
* `register_terminal_jobs` — the ledger as the submit / poll / download stages leave it for jobs
  that completed and whose files were downloaded: `provider_job` (COMPLETED, terminal, downloaded,
  request counts), one `status_event` per job and one `raw_file` row per file, inserted set-based.
"""

from __future__ import annotations

import os
import re
import shutil
from dataclasses import dataclass

import duckdb
import pyarrow as pa

from batch_assets.ledger.jobs import insert_jobs, insert_status_events
from batch_assets.ledger.results import insert_raw_files
from batch_assets.ledger.states import JobState, TaskStatus
from batch_assets.ledger.tasks import set_task_status
from batch_assets.ledger.transaction import transaction
from batch_assets.ledger.warehouse import Warehouse
from batch_assets.pipeline.files import file_sha256
from batch_assets.pipeline.send.submit import job_key_for
from batch_assets.spec.resolve import ResolvedTask
from batch_assets.sqltext import sql_literal

PARTITION_DATE = "2026-11-20"
EMPTY_BODY_EVERY = 20_000  # row i with i % 20000 == 3 has an empty body (50 per million, 1 at 3,000)
ZH_PERCENT = 35  # share of Chinese tickets
# Outcome buckets over hash(custom_id) % 10_000 (per 10,000 lines).
ERR_429_BELOW = 30  # 0.30 % HTTP 429 (error file)
ERR_500_BELOW = 50  # 0.20 % HTTP 500 (error file)
BAD_SCHEMA_BELOW = 70  # 0.20 % answer violates the output schema -> parse_error
LENGTH_BELOW = 80  # 0.10 % finish_reason length, answer cut off -> parse_error
LOW_CONFIDENCE_PERCENT = 4  # answers with confidence < 0.5 (ticket_triage reviews them all)
MODEL_SNAPSHOT = "gpt-4o-mini-2024-07-18"
CREATED_UNIX = 1_763_600_000

EN_FRAGMENTS = (
    "I was charged twice for my Pro subscription this month and both charges show up on my card.",
    "Our invoice shows more seats than we actually have on the Business plan, please check the count.",
    "I cancelled the trial before it ended but was still billed, I would like a full refund.",
    "The prorated upgrade charge does not match what the pricing page says for the annual plan.",
    "Can you re-issue the invoice with our VAT number? The reverse charge was not applied.",
    "The app crashes every time I open a shared folder on my iPhone 15 Pro running iOS 18.1.",
    "Sync has been stuck at 99% since yesterday and the error code E2207 keeps coming back.",
    "The export to CSV times out after about 30 seconds with a 504 Gateway Timeout.",
    "Our webhook endpoint stopped receiving events after the last release, nothing in the logs.",
    "Search returns no results for documents created in the last two days, even exact titles.",
    "Uploading files larger than 100 MB fails with UPLOAD_CHUNK_MISMATCH on Chrome 131.",
    "The API returns 429 Too Many Requests although we are far below the documented rate limit.",
    "I cannot log in since I changed my phone, the two-factor codes are always rejected.",
    "Please change the e-mail address on my account, I no longer have access to the old one.",
    "We need to transfer ownership of the workspace because the admin left the company.",
    "The password reset link says it has expired even when I click it right away.",
    "Single sign-on with Okta stopped working for half of our users this morning.",
    "Please delete my account and all of my data, I do not want to use the service anymore.",
    "Thanks for the quick help last time, unfortunately the problem is back again.",
    "This is quite urgent for us because our whole team is blocked until it is fixed.",
    "I already tried clearing the cache, reinstalling the app and restarting the laptop.",
    "Steps to reproduce: open the dashboard, click Export, choose all rows, wait a minute.",
    "Could you tell me whether this is a known issue and when a fix is expected?",
    "We are on the Enterprise plan with 240 seats, account manager is in copy.",
    "Screenshots are attached; the timestamps are in UTC and the request id is in the header.",
    "Kind regards, the operations team.",
)
ZH_FRAGMENTS = (
    "本月我的专业版订阅被重复扣费两次，信用卡账单上能看到两笔相同的金额。",
    "我们的发票上显示的席位数比实际使用的多，请帮忙核对一下商业版的席位数量。",
    "试用期结束前我已经取消了，但还是被扣了费用，希望能全额退款。",
    "升级到年付套餐后按比例计算的费用和价格页面上写的不一致。",
    "请重新开具发票并加上我们公司的税号，财务那边不接受现在这张。",
    "在 iPhone 上打开共享文件夹时应用每次都会闪退，系统版本是 iOS 18.1。",
    "同步从昨天开始一直卡在百分之九十九，错误代码 E2207 反复出现。",
    "导出 CSV 的时候大约三十秒后就超时，提示 504 Gateway Timeout。",
    "上次版本更新以后我们的 Webhook 地址再也收不到事件了，日志里也没有记录。",
    "搜索不到最近两天新建的文档，即使输入完整标题也没有结果。",
    "上传超过一百兆的文件时失败，提示 UPLOAD_CHUNK_MISMATCH。",
    "接口一直返回 429 Too Many Requests，可我们的调用量远低于文档里的限制。",
    "换了新手机以后无法登录，两步验证的验证码总是提示错误。",
    "请帮我修改账号绑定的邮箱，旧邮箱已经无法使用了。",
    "管理员已经离职，我们需要把工作区的所有权转给新的负责人。",
    "密码重置链接一点开就提示已过期，试了好几次都一样。",
    "今天上午开始，企业微信单点登录对一半的员工都失效了。",
    "请注销我的账号并删除所有数据，我以后不再使用这个服务了。",
    "上次问题解决得很快，谢谢，不过现在同样的问题又出现了。",
    "这个问题比较紧急，整个团队的工作都被卡住了。",
    "我已经清除了缓存，重新安装了应用，也重启了电脑，还是不行。",
    "复现步骤：打开仪表盘，点击导出，选择全部行，等待一分钟左右。",
    "请问这是已知问题吗？大概什么时候可以修复？",
    "我们是企业版客户，一共两百四十个席位，客户经理已抄送。",
    "截图已附上，时间都是北京时间，请求编号在响应头里。",
    "谢谢，运维组。",
)
# ADDRESS_PERCENT of the tickets end with a sentence holding an e-mail address, which the
# sensitive-data gate redacts; the benchmark checks that each such ticket is redacted and that no
# shard line holds an address. (The gate's time grows with this share: every ticket is scanned,
# the ones with a finding are also cut and mapped.)
ADDRESS_PERCENT = 3
EN_ADDRESS = "Please answer to it-helpdesk@example.com, the shared inbox of our team."
ZH_ADDRESS = "请回复到 kefu-team@example.cn 这个邮箱。"
ADDRESS_MARK = "@example."
EN_SUBJECTS = (
    "Charged twice this month",
    "Invoice shows the wrong seat count",
    "Refund request: trial cancelled",
    "App crashes when opening shared folder",
    "Sync stuck at 99%",
    "CSV export times out",
    "Webhook events not delivered",
    "Cannot log in after changing phone",
    "Change account e-mail",
    "Password reset link expired",
    "SSO login broken",
    "Please delete my account",
)
ZH_SUBJECTS = (
    "本月被重复扣费",
    "发票席位数量不对",
    "申请退款：试用已取消",
    "打开共享文件夹闪退",
    "同步卡在99%",
    "导出 CSV 超时",
    "Webhook 收不到事件",
    "换手机后无法登录",
    "修改账号邮箱",
    "密码重置链接过期",
    "单点登录失效",
    "申请注销账号",
)
REASONS = (
    "The customer reports a duplicate charge on the card.",
    "The ticket describes an application error during sync.",
    "The user cannot sign in because two-factor codes fail.",
    "客户反映发票金额与实际席位不符。",
    "用户描述的是导出功能超时的技术问题。",
    "用户请求修改账号绑定的邮箱。",
)
CATEGORIES = ("billing", "technical", "account")


def _list_sql(values: tuple[str, ...]) -> str:
    return "([" + ", ".join(sql_literal(v) for v in values) + "]::VARCHAR[])"


def source_table_sql(items: int, partition_date: str = PARTITION_DATE) -> str:
    """`main.support_tickets` with `items` rows for `partition_date`, all from `range(items)`."""
    en, zh = _list_sql(EN_FRAGMENTS), _list_sql(ZH_FRAGMENTS)
    n_en, n_zh = len(EN_FRAGMENTS), len(ZH_FRAGMENTS)
    # A body is 5-8 fragments; a Chinese ticket takes about one fragment in four from English
    # (error texts, product words), so both pure and mixed-script texts occur.
    return f"""
        CREATE OR REPLACE TABLE main.support_tickets AS
        WITH base AS (
            SELECT i, hash(i, 'lang') % 100 < {ZH_PERCENT} AS is_zh, CAST(5 + hash(i, 'len') % 4 AS BIGINT) AS n_frag
            FROM range({int(items)}) t(i)
        )
        SELECT printf('TK-%s-%07d', strftime(DATE {sql_literal(partition_date)}, '%Y%m%d'), i) AS ticket_id,
               DATE {sql_literal(partition_date)} AS created_date,
               TIMESTAMP {sql_literal(partition_date)}
                   + to_seconds(CAST(hash(i, 'at') % 86400 AS BIGINT)) AS created_at,
               ['email', 'web', 'chat', 'phone'][1 + CAST(hash(i, 'ch') % 4 AS BIGINT)] AS channel,
               CASE WHEN is_zh THEN 'zh' ELSE 'en' END AS language,
               CASE WHEN is_zh THEN '客户' ELSE 'Customer ' END || (hash(i, 'cu') % 50000) AS customer_name,
               'customer' || (hash(i, 'cu') % 50000) || '@example.com' AS customer_email,
               CASE WHEN is_zh
                    THEN {_list_sql(ZH_SUBJECTS)}[1 + CAST(hash(i, 'su') % {len(ZH_SUBJECTS)} AS BIGINT)]
                    ELSE {_list_sql(EN_SUBJECTS)}[1 + CAST(hash(i, 'su') % {len(EN_SUBJECTS)} AS BIGINT)]
               END AS subject,
               CASE WHEN i % {EMPTY_BODY_EVERY} = 3 THEN ''
                    ELSE array_to_string(list_transform(range(n_frag), lambda j:
                        CASE WHEN is_zh AND hash(i, j, 'mix') % 4 <> 0
                             THEN {zh}[1 + CAST(hash(i, j) % {n_zh} AS BIGINT)]
                             ELSE {en}[1 + CAST(hash(i, j) % {n_en} AS BIGINT)] END), ' ')
                    || CASE WHEN hash(i, 'mail') % 100 < {ADDRESS_PERCENT}
                            THEN ' ' || CASE WHEN is_zh THEN {sql_literal(ZH_ADDRESS)}
                                             ELSE {sql_literal(EN_ADDRESS)} END
                            ELSE '' END
               END AS body
        FROM base
        ORDER BY i
    """


def create_source_table(conn: duckdb.DuckDBPyConnection, items: int, partition_date: str = PARTITION_DATE) -> int:
    conn.execute(source_table_sql(items, partition_date))
    return conn.execute("SELECT count(*) FROM main.support_tickets").fetchone()[0]


def expected_empty_bodies(items: int) -> int:
    return len(range(3, items, EMPTY_BODY_EVERY))


# --- provider output files ------------------------------------------------------------------------


@dataclass(frozen=True)
class OutputFiles:
    files: list[dict]  # job_key, kind, path, lines, bytes, sha256
    output_lines: int
    error_lines: int
    schema_breaks: int
    length_cuts: int

    @property
    def paths(self) -> list[str]:
        return [f["path"] for f in self.files]


def _safe_name(job_key: str) -> str:
    # Same rule as ingest.download_results names the files it downloads.
    return re.sub(r"[^A-Za-z0-9_.-]", "_", job_key)


def _result_lines_sql(task_id: str, max_tokens: int) -> str:
    """One row per submitted shard line: (file, id, custom_id, response, error), shuffled."""
    cats, reasons = _list_sql(CATEGORIES), _list_sql(REASONS)
    answer = (
        f"json_object('category', {cats}[1 + CAST(hash(custom_id, 'cat') % 3 AS BIGINT)], "
        # Mostly confident, as classifiers are: LOW_CONFIDENCE_PERCENT of the answers below 0.5
        # (the task's review `always_if`), the rest between 0.5 and 1.
        f"'confidence', round(CASE WHEN hash(custom_id, 'low') % 100 < {LOW_CONFIDENCE_PERCENT} "
        f"THEN 0.0 ELSE 0.5 END + (hash(custom_id, 'conf') % 500) / 1000.0, 3), "
        f"'reason', {reasons}[1 + CAST(hash(custom_id, 'why') % {len(REASONS)} AS BIGINT)])"
    )
    bad_answer = "json_object('category', 'other', 'confidence', 1.5, 'reason', 'not one of the allowed categories')"
    content = f"""CASE WHEN r < {BAD_SCHEMA_BELOW} THEN CAST({bad_answer} AS VARCHAR)
                       WHEN r < {LENGTH_BELOW} THEN substr(CAST({answer} AS VARCHAR), 1, 30)
                       ELSE CAST({answer} AS VARCHAR) END"""
    completion_tokens = "CAST(12 + hash(custom_id, 'out') % 40 AS BIGINT)"
    chat = f"""json_object(
        'id', 'chatcmpl-' || substr(md5(custom_id || ':chat'), 1, 29),
        'object', 'chat.completion',
        'created', {CREATED_UNIX} + CAST(hash(custom_id, 't') % 86400 AS BIGINT),
        'model', {sql_literal(MODEL_SNAPSHOT)},
        'choices', json_array(json_object(
            'index', 0,
            'message', json_object('role', 'assistant', 'content', {content}, 'refusal', NULL,
                                   'annotations', []::JSON[]),
            'logprobs', NULL,
            'finish_reason', CASE WHEN r >= {BAD_SCHEMA_BELOW} AND r < {LENGTH_BELOW} THEN 'length' ELSE 'stop' END)),
        'usage', json_object(
            'prompt_tokens', est_input_tokens,
            'completion_tokens', {completion_tokens},
            'total_tokens', est_input_tokens + {completion_tokens},
            'prompt_tokens_details', json_object('cached_tokens', 0, 'audio_tokens', 0),
            'completion_tokens_details', json_object('reasoning_tokens', 0, 'audio_tokens', 0,
                                                     'accepted_prediction_tokens', 0, 'rejected_prediction_tokens', 0)),
        'service_tier', 'default',
        'system_fingerprint', 'fp_' || substr(md5(custom_id || ':fp'), 1, 10))"""
    err_429 = (
        "json_object('error', json_object('message', 'Rate limit reached for gpt-4o-mini in organization "
        "org-bench on tokens per min (TPM). Please try again later.', 'type', 'requests', "
        "'param', NULL, 'code', 'rate_limit_exceeded'))"
    )
    err_500 = (
        "json_object('error', json_object('message', 'The server had an error while processing your request. "
        "Sorry about that!', 'type', 'server_error', 'param', NULL, 'code', NULL))"
    )
    status = f"CASE WHEN r < {ERR_429_BELOW} THEN 429 WHEN r < {ERR_500_BELOW} THEN 500 ELSE 200 END"
    body = f"CASE WHEN r < {ERR_429_BELOW} THEN {err_429} WHEN r < {ERR_500_BELOW} THEN {err_500} ELSE {chat} END"
    return f"""
        WITH lines AS (
            SELECT sl.shard_id, sl.custom_id, sl.request_id, sl.est_tokens - {int(max_tokens)} AS est_input_tokens,
                   hash(sl.custom_id, 'outcome') % 10000 AS r
            FROM ledger.shard_line sl
            WHERE sl.task_id = {sql_literal(task_id)}
        )
        SELECT regexp_replace(shard_id || ':job1', '[^A-Za-z0-9_.-]', '_', 'g')
                   || CASE WHEN r < {ERR_500_BELOW} THEN '.error' ELSE '.output' END AS _file,
               'batch_req_' || md5(custom_id || ':line') AS id,
               request_id AS custom_id,
               json_object('status_code', {status}, 'request_id', md5(custom_id || ':req'), 'body', {body}) AS response,
               NULL::JSON AS error
        FROM lines
        ORDER BY hash(custom_id, 'shuffle')
    """


def write_provider_outputs(wh: Warehouse, task: ResolvedTask, partition_date: str = PARTITION_DATE) -> OutputFiles:
    """Write every job's output (and error) file where `download_results` would have put it."""
    task_id = task.task_id(partition_date)
    staging = wh.path("raw", "_bench_staging", "x").parent
    shutil.rmtree(staging, ignore_errors=True)
    with wh.connect() as conn:
        conn.execute(f"""
            COPY ({_result_lines_sql(task_id, task.spec.params.max_tokens)}) TO {sql_literal(str(staging))}
            (FORMAT json, PARTITION_BY (_file), OVERWRITE_OR_IGNORE)
        """)
        counts = conn.execute(
            f"""
            SELECT count(*) FILTER (r >= {ERR_500_BELOW}), count(*) FILTER (r < {ERR_500_BELOW}),
                   count(*) FILTER (r >= {ERR_500_BELOW} AND r < {BAD_SCHEMA_BELOW}),
                   count(*) FILTER (r >= {BAD_SCHEMA_BELOW} AND r < {LENGTH_BELOW})
            FROM (SELECT hash(custom_id, 'outcome') % 10000 AS r FROM ledger.shard_line WHERE task_id = ?)
        """,
            [task_id],
        ).fetchone()
        jobs = [
            r[0]
            for r in conn.execute(
                "SELECT shard_id FROM ledger.shard WHERE task_id = ? ORDER BY shard_no", [task_id]
            ).fetchall()
        ]
    files: list[dict] = []
    raw_dir = wh.path("raw", task_id, "x").parent
    for shard_id in jobs:
        job_key = job_key_for(shard_id)
        for kind in ("output", "error"):
            part = staging / f"_file={_safe_name(job_key)}.{kind}"
            if not part.is_dir():
                continue
            dest = raw_dir / f"{_safe_name(job_key)}.{kind}.jsonl"
            pieces = sorted(part.iterdir())
            if len(pieces) == 1:
                os.replace(pieces[0], dest)
            else:  # more than one file per partition: concatenate (order is irrelevant, lines are keyed)
                with open(dest, "wb") as out:
                    for p in pieces:
                        with open(p, "rb") as src:
                            shutil.copyfileobj(src, out, 1 << 20)
            files.append(
                {
                    "job_key": job_key,
                    "kind": kind,
                    "path": str(dest),
                    "bytes": dest.stat().st_size,
                    "sha256": file_sha256(dest),
                }
            )
    shutil.rmtree(staging, ignore_errors=True)
    return OutputFiles(files, counts[0], counts[1], counts[2], counts[3])


def register_terminal_jobs(
    wh: Warehouse, task: ResolvedTask, outputs: OutputFiles, partition_date: str = PARTITION_DATE
) -> int:
    """The ledger rows submit + poll + download_results leave behind, inserted set-based."""
    task_id = task.task_id(partition_date)
    spec = task.spec
    bench_raw_files = pa.table(  # noqa: F841 -- read by name in the SQL below (a replacement scan)
        {
            "job_key": [f["job_key"] for f in outputs.files],
            "kind": [f["kind"] for f in outputs.files],
            "path": [f["path"] for f in outputs.files],
            "sha256": [f["sha256"] for f in outputs.files],
            "byte_count": pa.array([f["bytes"] for f in outputs.files], pa.int64()),
        }
    )
    tid = sql_literal(task_id)
    with wh.connect() as conn:
        with transaction(conn):
            conn.execute("CREATE OR REPLACE TEMP TABLE _bench_files AS SELECT * FROM bench_raw_files")
            conn.execute(f"""
                CREATE OR REPLACE TEMP TABLE _bench_jobs AS
                SELECT s.shard_id, s.shard_id || ':job1' AS job_key, s.line_count,
                       count(sl.custom_id) FILTER (hash(sl.custom_id, 'outcome') % 10000 >= {ERR_500_BELOW})
                           AS completed,
                       count(sl.custom_id) FILTER (hash(sl.custom_id, 'outcome') % 10000 < {ERR_500_BELOW})
                           AS failed
                FROM ledger.shard s JOIN ledger.shard_line sl USING (shard_id)
                WHERE s.task_id = {tid}
                GROUP BY ALL
            """)
            jobs = insert_jobs(
                conn,
                task_id,
                f"""
                SELECT j.job_key, j.shard_id, {sql_literal(spec.provider)} AS provider,
                       {sql_literal(spec.endpoint)} AS endpoint,
                       'batch_' || md5(j.job_key) AS provider_batch_id, 'file-in-' || md5(j.job_key) AS input_file_id,
                       (SELECT 'file-out-' || md5(f.job_key) FROM _bench_files f
                        WHERE f.job_key = j.job_key AND f.kind = 'output') AS output_file_id,
                       (SELECT 'file-err-' || md5(f.job_key) FROM _bench_files f
                        WHERE f.job_key = j.job_key AND f.kind = 'error') AS error_file_id,
                       'completed' AS raw_status, '{JobState.COMPLETED}' AS state, false AS cancel_requested,
                       j.line_count AS request_total, j.completed AS request_completed, j.failed AS request_failed,
                       NULL AS provider_errors,
                       now()::TIMESTAMP - INTERVAL 2 HOUR AS created_at,
                       now()::TIMESTAMP - INTERVAL 2 HOUR AS submitted_at,
                       now()::TIMESTAMP - INTERVAL 5 MINUTE AS state_changed_at,
                       now()::TIMESTAMP - INTERVAL 5 MINUTE AS terminal_at,
                       now()::TIMESTAMP - INTERVAL 5 MINUTE AS last_polled_at, now()::TIMESTAMP AS downloaded_at
                FROM _bench_jobs j ORDER BY j.job_key
            """,
            )
            insert_status_events(
                conn,
                f"""
                SELECT job_key, '{JobState.FINALIZING}' AS from_state, '{JobState.COMPLETED}' AS to_state,
                       'completed' AS raw_status, line_count AS request_total, completed AS request_completed,
                       failed AS request_failed, now()::TIMESTAMP - INTERVAL 5 MINUTE AS observed_at
                FROM _bench_jobs
            """,
            )
            insert_raw_files(
                conn,
                task_id,
                """
                SELECT f.job_key || ':' || f.kind AS file_key, f.job_key, f.kind,
                       CASE f.kind WHEN 'output' THEN 'file-out-' ELSE 'file-err-' END || md5(f.job_key)
                           AS provider_file_id,
                       f.path, f.sha256, f.byte_count
                FROM _bench_files f
            """,
            )
            set_task_status(conn, task_id, TaskStatus.SUBMITTED)
        conn.execute("DROP TABLE _bench_files; DROP TABLE _bench_jobs;")
    return jobs
