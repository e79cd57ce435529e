"""What a push would carry, read from real git: the lines and the names of every commit."""

from __future__ import annotations

from bot.network.secretscan import AddedLine
from bot.workspace.outgoing import added_lines


def test_the_tab_git_ends_a_plus_line_with_is_not_part_of_the_name() -> None:
    patch = "diff --git a/x y b/x y\nnew file mode 100644\n--- /dev/null\n+++ b/x y\t\n@@ -0,0 +1 @@\n+hi\n"
    assert list(added_lines(patch)) == [AddedLine("x y", 1, "hi")]
