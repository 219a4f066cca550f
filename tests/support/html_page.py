"""An HTML page as a browser's tokenizer sees it, for the tests of the HTML report."""

from __future__ import annotations

from collections import Counter
from html.parser import HTMLParser


class Page(HTMLParser):
    """What a browser's tokenizer sees: every start tag with its attributes, and the text."""

    def __init__(self, html: str) -> None:
        super().__init__(convert_charrefs=True)
        self.elements: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []
        self.feed(html)
        self.close()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.elements.append((tag, dict(attrs)))

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.elements.append((tag, dict(attrs)))

    def handle_data(self, data: str) -> None:
        self.text.append(data)

    @property
    def tags(self) -> Counter[str]:
        return Counter(tag for tag, _ in self.elements)

    def by_id(self, element_id: str) -> dict[str, str | None]:
        found = [attrs for _, attrs in self.elements if attrs.get("id") == element_id]
        assert len(found) == 1, element_id
        return found[0]

    def by_class(self, cls: str) -> list[dict[str, str | None]]:
        return [attrs for _, attrs in self.elements if cls in (attrs.get("class") or "").split()]
