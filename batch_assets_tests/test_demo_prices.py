"""Every demo task's model has a price in its provider's prices.yaml (so no demo partition shows its
cost as unknown), and a missing price is named exactly: the provider and the model."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from batch_assets.components.summary_metadata import money
from batch_assets.providers.prices import model_price
from batch_assets.spec.model import TaskSpec

TASK_FILES = sorted((Path(__file__).resolve().parents[1] / "batch_assets" / "defs" / "tasks").glob("*/defs.yaml"))


def test_the_demo_tasks_are_found():
    assert len(TASK_FILES) >= 5


@pytest.mark.parametrize("path", TASK_FILES, ids=lambda p: p.parent.name)
def test_every_demo_model_has_a_price(path: Path):
    attributes = yaml.safe_load(path.read_text(encoding="utf-8"))["attributes"]
    provider = attributes.get("provider", TaskSpec.model_fields["provider"].default)
    model = attributes["model"]
    assert model_price(provider, model) is not None, (
        f"{path}: model {model!r} has no price in batch_assets/providers/{provider}/prices.yaml"
    )


def test_a_missing_price_names_the_provider_and_the_model():
    assert money(None, "openai", "gpt-9-nano") == (
        "unknown (model 'gpt-9-nano' has no price in batch_assets/providers/openai/prices.yaml)"
    )
    assert money(0.0, "openai", "gpt-4o-mini") == 0.0
