"""Which part of the tree each test file tests: its pytest marker (registered in pyproject.toml), set by conftest.

Until the files move into tests/<part>/ folders, this table is the layout: ``pytest -m views`` runs the view tests,
``pytest -m fast`` the library and view tests that run no server, no AppTest and no training.
"""

from __future__ import annotations

from pathlib import Path

PARTS = {
    "mha_core": (  # the torch library, no Streamlit
        "test_book.py",
        "test_circuits.py",
        "test_gpt2_loading.py",
        "test_gpt_training.py",
        "test_mha.py",
        "test_model_heads.py",
        "test_qkv_module.py",
        "test_specs.py",
        "test_teaching_core.py",
        "test_training.py",
    ),
    "views": (  # traces in, figure dicts out
        "test_figure_rules.py",
        "test_figures.py",
        "test_teaching_facts.py",
        "test_teaching_review.py",
    ),
    "glue": (  # explorer/glue without a page: parsers, caches, serialisation
        "test_idle.py",
        "test_presenter_glue.py",
        "test_server_setup.py",
        "test_trained_link.py",
        "test_widget_kinds.py",
    ),
    "pages": (  # pages under Streamlit's AppTest
        "test_app_explorer.py",
        "test_budget.py",
        "test_cost.py",
        "test_fixed_width.py",
        "test_follow_token.py",
        "test_fuzz.py",
        "test_hostile_links.py",
        "test_page_circuits.py",
        "test_page_real_heads.py",
        "test_page_settings.py",
        "test_page_step_notes.py",
        "test_page_trained_heads.py",
        "test_pages_teaching.py",
        "test_trained_replay.py",
    ),
    "server": ("test_deploy.py", "test_faults.py", "test_load_smoke.py", "test_memory_budget.py"),  # real servers
    "project": (  # the source read as text: layers, sizes, pins, lint, the test command's system programs
        "test_dependencies.py",
        "test_function_sizes.py",
        "test_layers.py",
        "test_lint.py",
        "test_markers.py",
        "test_readme_architecture.py",
        "test_system_deps.py",
    ),
}
FAST_PARTS = ("mha_core", "views")
# Library tests that train models, left out of `fast`: 58 s and 29 s here (2 CPUs shared), the rest of fast ~30 s.
NOT_FAST = ("test_training.py", "test_gpt_training.py")


def part_of(path: Path) -> str | None:
    """The marker of a test file: browser/ by folder, the rest by the table above; None for a file not listed."""
    if "browser" in path.parts:
        return "browser"
    return next((part for part, names in PARTS.items() if path.name in names), None)


def markers_of(path: Path) -> list[str]:
    part = part_of(path)
    if part is None:
        return []
    return [part, "fast"] if part in FAST_PARTS and path.name not in NOT_FAST else [part]
