"""The tags pane: scalar tags grouped by their prefix (`train/`, `grad_norm/`), each with its role."""

from __future__ import annotations

from collections import defaultdict

from rich.text import Text
from textual.widgets import Tree
from textual.widgets.tree import TreeNode

from tbtriage.tui.bindings import bindings
from tbtriage.tui.safe_text import plain


def group_tags(tags: list[str]) -> dict[str, list[str]]:
    """Tags keyed by the prefix before their first `/` ("" for tags without one), in sorted order."""
    groups: dict[str, list[str]] = defaultdict(list)
    for tag in sorted(tags):
        prefix, sep, _ = tag.partition("/")
        groups[prefix if sep else ""].append(tag)
    return dict(sorted(groups.items(), key=lambda item: (item[0] == "", item[0])))


class TagTree(Tree[str]):
    """Leaves carry the full tag as data; group nodes carry None."""

    BINDINGS = bindings("lists")

    def __init__(self, *, ascii_only: bool = False, **kwargs) -> None:
        super().__init__("tags", **kwargs)
        self._keep: TreeNode[str] | None = None  # the node the cursor goes to once the tree is drawn
        self.show_root = False
        self.guide_depth = 2
        if ascii_only:
            self.show_guides = False
            self.ICON_NODE, self.ICON_NODE_EXPANDED = "+ ", "- "

    @property
    def current_tag(self) -> str | None:
        node = self.cursor_node
        return node.data if node is not None else None

    def show_tags(self, tags: list[str], roles: dict[str, str | None], keep: str | None = None) -> None:
        """Rebuild the tree from `tags`, keeping the cursor on `keep` when it is still there."""
        self.clear()
        target = None
        for prefix, members in group_tags(tags).items():
            parent = self.root
            if prefix:
                parent = self.root.add(Text(plain(prefix) + "/", style="bold"), data=None, expand=True)
            for tag in members:
                leaf = tag[len(prefix) + 1 :] if prefix else tag
                label = Text(plain(leaf))
                if roles.get(tag):
                    label.append(f"  {roles[tag]}", style="dim")
                node = parent.add_leaf(label, data=tag)
                if tag == keep:
                    target = node
        # With the charted tag filtered out, no line is highlighted (rather than some other tag the chart is not showing).
        self._keep = target
        self.call_after_refresh(self._move_to_kept)

    def _move_to_kept(self) -> None:
        """Move to the latest build's kept node: when two builds come before one refresh, a node of the first
        one is gone, and its line number points at another tag in the second."""
        self.move_cursor(self._keep, animate=False)

    def action_first(self) -> None:
        self.cursor_line = 0

    def action_last(self) -> None:
        self.cursor_line = max(self.last_line, 0)
