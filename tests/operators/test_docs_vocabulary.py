"""The examples of docs/operators.md, "Sources, error recovery, transforms, filters and hooks", print what it shows."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[2] / "docs" / "operators.md"
SECTION = "## Sources, error recovery, transforms, filters and hooks"


def _examples() -> list[tuple[str, str]]:
    text = DOC.read_text()
    section = text[text.index(SECTION) :]
    following = section.find("\n## ", len(SECTION))
    section = section if following < 0 else section[:following]
    return re.findall(r"```python\n(.*?)```\n\nprints\n\n```\n(.*?)```", section, flags=re.DOTALL)


def test_docs_vocabulary_section_has_its_examples() -> None:
    assert len(_examples()) == 2


@pytest.mark.timeout(60)
@pytest.mark.parametrize("index", range(2))
def test_docs_vocabulary_example_prints_what_the_page_shows(index: int) -> None:
    code, expected = _examples()[index]
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, "docs/operators.md", "exec"), {"__name__": "docs_operators"})
    assert out.getvalue() == expected
