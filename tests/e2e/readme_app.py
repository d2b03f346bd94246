"""The docs' first application (docs/getting-started.md, "A first application") as its block
reads, with the ZooKeeper quorum and the checkpoint directory that the page says are the reader's
own, for a test to replace."""

from __future__ import annotations

from tests.support.docs_blocks import blocks_run_by

README_QUORUM = "zk1:2181,zk2:2181"
README_CHECKPOINT = "/data/checkpoints/wordcount"


PAGE = "getting-started.md"


def readme_example() -> str:
    """The block of docs/getting-started.md marked ``<!-- runnable: tests/e2e/test_readme_example.py -->``."""
    blocks = blocks_run_by("tests/e2e/test_readme_example.py", PAGE)
    assert len(blocks) == 1, f"expected one block of docs/{PAGE} run by this test, found {len(blocks)}"
    return blocks[0]
