"""Checks every docs page test makes of its page: it is public (never points at the design
notes in ``../shared``) and each relative link names a file that exists."""

from __future__ import annotations

import re
from pathlib import Path


def checked_page_text(page: Path) -> str:
    """The text of ``page`` (a Markdown file under docs/), once it is checked: no ``../shared``
    or ``shared/`` reference, and every link that is neither ``https://`` nor an anchor
    names an existing file relative to the page.

    Raises:
        AssertionError: naming the reference or the link target that fails.
    """
    text = page.read_text()
    assert "../shared" not in text and "shared/" not in text, f"{page} points at shared/"
    for target in re.findall(r"\]\(([^)]+)\)", text):
        if target.startswith(("https://", "#")):
            continue
        assert (page.parent / target.split("#")[0]).exists(), target
    return text
