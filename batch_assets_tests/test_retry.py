"""The provider retry helper: transient errors (429, 5xx, timeouts, connection errors) are repeated
with bounded exponential backoff, anything else raised at once; the sleep is injected, never waited."""

from __future__ import annotations

import httpx
import openai
import pytest

from batch_assets.providers.retry import Backoff, call_with_retry, is_transient

REQUEST = httpx.Request("GET", "http://emulator/v1/files/file-1/content")


def status_error(status: int) -> openai.APIStatusError:
    response = httpx.Response(status, request=REQUEST, json={"error": {"message": "injected", "code": None}})
    return openai.APIStatusError("injected", response=response, body=None)


class Flaky:
    def __init__(self, *errors: BaseException, result: str = "ok"):
        self.errors, self.result, self.calls = list(errors), result, 0

    def __call__(self) -> str:
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        return self.result


@pytest.mark.parametrize(
    "exc, transient",
    [
        (status_error(429), True),
        (status_error(500), True),
        (status_error(503), True),
        (status_error(408), True),
        (status_error(400), False),
        (status_error(404), False),
        (status_error(401), False),
        (openai.APITimeoutError(REQUEST), True),
        (openai.APIConnectionError(request=REQUEST), True),
        (httpx.ConnectError("refused"), True),
        (httpx.ReadTimeout("slow"), True),
        (TimeoutError(), True),
        (ValueError("a bug"), False),
    ],
)
def test_is_transient_classifies_sdk_errors(exc, transient):
    assert is_transient(exc) is transient


def test_other_sdks_errors_are_classified_by_their_status():
    import anthropic
    from google.genai import errors as genai_errors

    anthropic_429 = anthropic.RateLimitError("slow down", response=httpx.Response(429, request=REQUEST), body=None)
    assert is_transient(anthropic_429) and is_transient(anthropic.APIConnectionError(request=REQUEST))
    assert is_transient(genai_errors.ServerError(503, {"error": {"message": "unavailable"}}))
    assert not is_transient(genai_errors.ClientError(400, {"error": {"message": "bad"}}))


def test_transient_errors_are_retried_with_exponential_backoff():
    waits, told = [], []
    fn = Flaky(status_error(429), status_error(502), openai.APITimeoutError(REQUEST))
    result = call_with_retry(
        fn,
        backoff=Backoff(attempts=5, base_s=1.0, max_s=3.0, jitter=0.0),
        sleep=waits.append,
        on_retry=lambda n, exc, delay: told.append((n, type(exc).__name__, delay)),
    )
    assert result == "ok" and fn.calls == 4
    assert waits == [1.0, 2.0, 3.0]  # doubled each time, capped at max_s
    assert [t[0] for t in told] == [1, 2, 3] and told[0][1] == "APIStatusError"


def test_the_bound_stops_retrying_and_raises_the_last_error():
    waits = []
    fn = Flaky(*(status_error(503) for _ in range(10)))
    with pytest.raises(openai.APIStatusError) as raised:
        call_with_retry(fn, backoff=Backoff(attempts=3, base_s=0.5, jitter=0.0), sleep=waits.append)
    assert raised.value.status_code == 503 and fn.calls == 3 and waits == [0.5, 1.0]


def test_a_non_transient_error_is_raised_at_once():
    waits = []
    fn = Flaky(status_error(400))
    with pytest.raises(openai.APIStatusError):
        call_with_retry(fn, sleep=waits.append)
    assert fn.calls == 1 and waits == []


def test_jitter_only_shortens_a_wait():
    backoff = Backoff(attempts=4, base_s=2.0, max_s=30.0, jitter=0.5)
    for retry, full in ((1, 2.0), (2, 4.0), (3, 8.0)):
        assert all(full * 0.5 <= backoff.delay(retry) <= full for _ in range(50))


def test_the_local_stages_load_no_provider_sdk():
    """A stage process (freeze, shards, ingest, parse, apply, reconcile) never calls a provider, so it
    does not pay for importing the SDKs (~2 s and ~95 MB of RSS in every such process), not even to
    load and validate the task specs (which read every provider's formats and limits). Building an
    adapter imports its SDK."""
    import subprocess
    import sys

    sdks = "sorted(m for m in ('openai', 'anthropic', 'google.genai', 'dagster') if m in sys.modules)"
    code = (
        "import sys\n"
        "import batch_assets.pipeline.freeze.manifest, batch_assets.pipeline.send.shards\n"
        "import batch_assets.pipeline.collect.ingest, batch_assets.pipeline.collect.parse\n"
        "import batch_assets.pipeline.settle.apply, batch_assets.pipeline.settle.reconcile\n"
        "from batch_assets.providers import registry\n"
        "from batch_assets.providers.contract import ClientSettings\n"
        "from batch_assets.spec.resolve import load_all_tasks\n"
        "tasks = load_all_tasks()\n"
        "assert {t.spec.provider for t in tasks.values()} == set(registry.PROVIDERS), tasks\n"
        "for t in tasks.values(): registry.wire_format(t.spec.provider, t.spec.endpoint)\n"
        f"print({sdks})\n"
        "registry.build_adapter('anthropic', ClientSettings('k', 'http://127.0.0.1:9'))\n"
        f"print({sdks})\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split("\n")[:2] == ["[]", "['anthropic']"]
