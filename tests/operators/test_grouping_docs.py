"""The examples of docs/operators.md, "Grouping, sharing, parallel", print what the page shows."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent.parent


@pytest.mark.timeout(60)
def test_grouping_section_examples_print_what_the_page_shows() -> None:
    text = (ROOT / "docs" / "operators.md").read_text()
    section = text.split("## Grouping, sharing, parallel\n", 1)[1].split("\n## ", 1)[0]
    # Each ```python block is followed by "prints" and a ``` block of its output;
    # ```py blocks are counter-examples and do not run.
    examples = re.findall(r"```python\n(.*?)```\n\nprints\n\n```\n(.*?)```", section, flags=re.DOTALL)
    assert examples
    for code, expected in examples:
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(compile(code, "docs/operators.md", "exec"), {"__name__": "docs_operators"})
        assert out.getvalue() == expected
