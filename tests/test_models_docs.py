"""docs/models.md's families table shows what the reader computes from the config files it names:
every total, active figure, published figure and GPU count of a row is checked here."""
from __future__ import annotations

import re
import warnings
from pathlib import Path

import pytest
from test_models_families import DATA, FILES, PUBLISHED

from sievesim.models import from_hf_config

DOC = Path(__file__).resolve().parents[1] / "docs" / "models.md"
_NUM = re.compile(r"\d+(?:\.\d+)?")


def _family_rows() -> dict[str, list[str]]:
    """The rows of the families table, by the config file each names."""
    text = DOC.read_text()
    table = text[text.index("### Families read from their own config.json"):text.index("Published figures:")]
    rows = {}
    for line in table.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        match = re.search(r"\(`([^`]+)`\)", cells[1]) if len(cells) > 2 else None
        if match:
            rows[match.group(1)] = cells
    return rows


def test_every_family_has_a_row():
    assert set(_family_rows()) == set(FILES.values())


@pytest.mark.parametrize("name", sorted(FILES))
def test_row_shows_what_the_reader_computes(name):
    cells = _family_rows()[FILES[name]]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        spec = from_hf_config(DATA / f"{FILES[name]}.json", name=name)
    total_shown, total_published = (float(x) for x in _NUM.findall(cells[2]))
    assert total_shown == round(spec.total_params / 1e9, 2)
    assert total_published == PUBLISHED[name][0]
    active_cell, published_active = cells[3].rsplit("/", 1)
    shown = [float(x) for x in _NUM.findall(active_cell)]
    with_embedding = "with emb." in active_cell and "(" not in active_cell
    computed = [round(spec.active_params_with_embedding / 1e9, 2)] if with_embedding else \
        [round(spec.active_params / 1e9, 2), round(spec.active_params_with_embedding / 1e9, 2)]
    assert shown == computed[:len(shown)]
    assert published_active.strip() == PUBLISHED[name][1]
    assert int(cells[4]) == PUBLISHED[name][3]


def test_kimi_k2_preset_rows_show_what_the_preset_computes():
    from sievesim.models import get_model

    spec = get_model("kimi-k2")
    lines = DOC.read_text().splitlines()
    shape_row = next(line for line in lines if line.startswith("| `kimi-k2` |"))
    assert "61 MLA, first 1 dense (I = 18432) | 384 | 8 | 1 (I = 2048)" in shape_row
    assert (spec.num_layers, spec.num_dense_layers, spec.dense_intermediate_size, spec.num_experts, spec.top_k,
            spec.num_shared_experts, spec.shared_expert_intermediate_size) == (61, 1, 18432, 384, 8, 1, 2048)
    count_row = next(line for line in lines if line.startswith("| kimi-k2 |"))
    total, published, diff, active, with_emb, published_active, d1, d2 = (
        float(x) for x in re.findall(r"[-+]?\d+(?:\.\d+)?", count_row.replace("kimi-k2", "")))
    assert total == round(spec.total_params / 1e9, 2) and published == PUBLISHED["Kimi-K2-Instruct"][0]
    assert diff == round((spec.total_params / (published * 1e9) - 1) * 100, 2)
    assert (active, with_emb) == (round(spec.active_params / 1e9, 2), round(spec.active_params_with_embedding / 1e9, 2))
    assert published_active == float(PUBLISHED["Kimi-K2-Instruct"][1])
    assert (d1, d2) == (round((spec.active_params / 32e9 - 1) * 100, 1),
                        round((spec.active_params_with_embedding / 32e9 - 1) * 100, 1))


@pytest.mark.parametrize("name", sorted(FILES))
def test_row_structure_shows_what_the_reader_reads(name):
    """The counts the "read and modelled" column names (experts, top-k, shared, dense layers, heads,
    MTP layers) are those of the reading."""
    text = _family_rows()[FILES[name]][5]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        spec = from_hf_config(DATA / f"{FILES[name]}.json", name=name)
    checks = {r"(\d+) experts": spec.num_experts, r"experts top-(\d+)": spec.top_k,
              r"\+ (\d+) shared": spec.num_shared_experts, r"(\d+) dense layers?": spec.num_dense_layers,
              r"(\d+) q / \d+ KV heads": spec.num_attention_heads, r"\d+ q / (\d+) KV heads": spec.num_kv_heads,
              r"(\d+) MTP": spec.num_mtp_layers}
    found = 0
    for pattern, value in checks.items():
        for shown in re.findall(pattern, text):
            assert int(shown) == value, (pattern, shown, value)
            found += 1
    assert found, text
