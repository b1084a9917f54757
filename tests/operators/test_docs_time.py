"""The python blocks of docs/operators.md's "Time" section run, and print what the page says."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent.parent


@pytest.mark.timeout(60)
def test_time_section_snippets_run_and_print_what_the_page_shows() -> None:
    text = (ROOT / "docs" / "operators.md").read_text()
    section = text[text.index("\n## Time\n") : text.index("\n## Fusion\n")]
    snippets = re.findall(r"```python\n(.*?)```", section, flags=re.DOTALL)
    assert len(snippets) == 2
    outputs = []
    for snippet in snippets:
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(compile(snippet, "docs/operators.md", "exec"), {"__name__": "docs_operators"})
        outputs.append(out.getvalue().splitlines())
    assert outputs[0] == ["['flo', 'flowp']"]
    # Each print in the second block states its output in a comment.
    promised = [line.split("# ")[1].split(":")[0] for line in snippets[1].splitlines() if "print(" in line]
    assert outputs[1] == promised
