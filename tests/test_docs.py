"""The docs site: it builds strict (a broken link or a missing reference fails it, and the test that
the rule catches both), its runnable blocks are each run by a test that exists, what the pages
list agrees with the code, and the README stays short with CI's test command where .ci/run reads it.

The runnable blocks themselves run in tests/e2e/test_docs_examples.py and the tests they name.
"""

from __future__ import annotations

import importlib.util
import re
import shutil
from pathlib import Path

import pytest

from tests.support.docs_blocks import DOCS, REPO, runnable_blocks
from tests.support.docs_site import build, mkdocs_or_skip

README = REPO / "README.md"


def test_the_site_builds_strict(tmp_path: Path) -> None:
    mkdocs_or_skip()
    result = build(REPO, tmp_path / "site")
    assert result.returncode == 0, result.stderr[-6000:]
    site = tmp_path / "site"
    # The reference names the public import paths, and the commands' help is rendered.
    kafka_utils = (site / "reference" / "kafka-utils" / "index.html").read_text(encoding="utf-8")
    assert "reliable_kafka.kafka.KafkaUtils" in kafka_utils
    assert "createStream" in kafka_utils and "createDirectStream" in kafka_utils
    cli = (site / "reference" / "cli" / "index.html").read_text(encoding="utf-8")
    assert "reliable-kafka lag --help" in cli and "--max-lag" in cli
    assert "reliable-kafka-local docs --help" in cli
    # The tested versions, from reliable_kafka/versions.py.
    start = (site / "getting-started" / "index.html").read_text(encoding="utf-8")
    assert "3.9.2" in start and "4.4.0" in start and "0.9.0.1" in start
    # The changelog is CHANGELOG.md itself.
    changelog = (site / "changelog" / "index.html").read_text(encoding="utf-8")
    assert "Keep a Changelog" in changelog


@pytest.mark.parametrize(
    ("page", "text", "expected"),
    [
        (
            "broken-links.md",
            "# Broken\n\nSee [a page](no-such-page.md) and [recovery](recovery.md#no-such-anchor).\n",
            ("no-such-page.md", "no-such-anchor"),
        ),
        ("missing-reference.md", "# Broken\n\n::: reliable_kafka.kafka.NoSuchName\n", ("NoSuchName",)),
    ],
)
def test_a_broken_link_or_a_missing_reference_fails_the_build(
    tmp_path: Path, page: str, text: str, expected: str
) -> None:
    """The rule catches what it is there for: a copy of the site with one broken page fails."""
    mkdocs_or_skip()
    root = tmp_path / "repo"
    root.mkdir()
    shutil.copytree(DOCS, root / "docs", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("reliable_kafka", "CHANGELOG.md"):
        (root / name).symlink_to(REPO / name)
    config = (REPO / "mkdocs.yml").read_text(encoding="utf-8")
    (root / "mkdocs.yml").write_text(config.replace("  - Changelog:", f"  - Broken: {page}\n  - Changelog:"))
    (root / "docs" / page).write_text(text, encoding="utf-8")
    result = build(root, tmp_path / "site")
    assert result.returncode != 0, result.stderr[-3000:]
    for name in expected:
        assert name in result.stderr, result.stderr[-3000:]


def test_every_runnable_block_is_run_by_a_test_that_reads_its_page() -> None:
    blocks = runnable_blocks()
    assert any(b.runner is None for b in blocks), "no block for tests/e2e/test_docs_examples.py"
    for block in blocks:
        if block.runner is None:
            continue
        runner = REPO / block.runner
        assert runner.is_file(), f"{block.id} names {block.runner}, which does not exist"
        assert block.page in runner.read_text(encoding="utf-8"), (
            f"{block.runner} does not read docs/{block.page}"
        )
    runners = {b.runner for b in blocks}
    assert {"tests/e2e/test_readme_example.py", "tests/e2e/test_direct_readme.py"} <= runners


def test_a_marker_must_mark_a_python_block(tmp_path: Path) -> None:
    (tmp_path / "page.md").write_text("<!-- runnable -->\n```bash\necho hi\n```\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"page\.md:1: a runnable marker must precede a ```python fence"):
        runnable_blocks(tmp_path)


def test_the_operations_page_lists_every_metric() -> None:
    from reliable_kafka.ui import metrics

    page = (DOCS / "operations.md").read_text(encoding="utf-8")
    listed = set(re.findall(r"^\| `(reliable_kafka_\w+)` \|", page, re.MULTILINE))
    families = {name.removesuffix("_total") for name in listed}
    assert set(metrics.FAMILIES) <= families, set(metrics.FAMILIES) - families


def test_the_readme_is_short_and_keeps_ci_s_test_command() -> None:
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 220, len(lines)
    # .ci/run runs the line after "# run the tests" (sed -n '/^# run the tests$/{n;p;q}').
    command = lines[lines.index("# run the tests") + 1]
    assert command.endswith(".venv/bin/python -m pytest --kafka all --docker --yarn -n auto"), command
    assert lines[lines.index("# run the main job") + 1].endswith("-m reliable_kafka.examples.wordcount")


def test_the_readme_s_links_to_the_docs_exist() -> None:
    text = README.read_text(encoding="utf-8")
    links = re.findall(r"\]\((docs/[^)#]+)(?:#[^)]*)?\)", text)
    assert links
    for link in links:
        assert (REPO / link).is_file(), link
    # The README's table of pages is the home page's: every page the home page lists, the README does.
    home = (DOCS / "index.md").read_text(encoding="utf-8")
    pages = {f"docs/{page}" for page in re.findall(r"\]\(([\w-]+\.md)\)", home)}
    assert len(pages) >= 14, pages
    assert pages <= set(links), pages - set(links)


def test_the_docs_command_needs_a_checkout_and_mkdocs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from reliable_kafka.local import cli

    with pytest.raises(ValueError, match=r"no mkdocs\.yml"):
        cli.docs_command(8000, checkout=tmp_path)
    if importlib.util.find_spec("mkdocs") is not None:
        command, root = cli.docs_command(8123, checkout=REPO)
        assert command[-2:] == ["-a", "127.0.0.1:8123"] and root == REPO
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "mkdocs" else real_find_spec(name, *a)
    )
    with pytest.raises(
        ValueError, match=r"mkdocs is not installed in this environment: pip install -e '\.\[docs\]'"
    ):
        cli.docs_command(8000, checkout=REPO)
    assert cli.main(["docs"]) == 2
