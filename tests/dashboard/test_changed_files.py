"""Two trials' workspace.diff compared file by file, as the side-by-side page shows them."""

from __future__ import annotations

from dashboard.changed_files import GAP, compare, parse

A = """\
diff --git a/notes/todo list.txt b/notes/todo list.txt
new file mode 100644
index 0000000..aaaaaaa
--- /dev/null
+++ b/notes/todo list.txt\t
@@ -0,0 +1,2 @@
+buy milk
+call Ada
diff --git a/src/app.py b/src/app.py
index 1111111..2222222 100644
--- a/src/app.py
+++ b/src/app.py
@@ -10,3 +10,4 @@
 def main():
     run()
+    report()
     return 0
@@ -40,2 +41,2 @@
-VERSION = 1
+VERSION = 2
 END = True
diff --git a/logo.png b/logo.png
new file mode 100644
index 0000000..3333333
Binary files /dev/null and b/logo.png differ
diff --git a/old.txt b/old.txt
deleted file mode 100644
index 4444444..0000000
--- a/old.txt
+++ /dev/null
@@ -1 +0,0 @@
-gone
large file changed: data/big.bin
"""

B = """\
diff --git a/notes/todo list.txt b/notes/todo list.txt
new file mode 100644
index 0000000..bbbbbbb
--- /dev/null
+++ b/notes/todo list.txt\t
@@ -0,0 +1,2 @@
+buy milk
+call Grace
diff --git a/src/app.py b/src/app.py
index 1111111..2222222 100644
--- a/src/app.py
+++ b/src/app.py
@@ -10,3 +10,4 @@
 def main():
     run()
+    report()
     return 0
@@ -40,2 +41,2 @@
-VERSION = 1
+VERSION = 2
 END = True
"""


def test_it_reads_each_files_part_of_a_diff():
    patches = parse(A)

    assert list(patches) == [
        "data/big.bin",
        "notes/todo list.txt",
        "src/app.py",
        "logo.png",
        "old.txt",
    ]
    states = {path: patch.state for path, patch in patches.items()}
    assert states == {
        "data/big.bin": "large",
        "notes/todo list.txt": "added",
        "src/app.py": "modified",
        "logo.png": "added",
        "old.txt": "deleted",
    }
    assert patches["logo.png"].binary and not patches["src/app.py"].binary
    assert patches["src/app.py"].new_id == "2222222"
    # What the diff shows of the final file, with the lines it skips marked.
    assert patches["src/app.py"].final_lines() == [
        GAP,
        "def main():",
        "    run()",
        "    report()",
        "    return 0",
        GAP,
        "VERSION = 2",
        "END = True",
    ]
    assert patches["old.txt"].final_lines() == []


def test_it_says_which_files_differ_and_how():
    files = {file.path: file for file in compare(A, B)}

    assert {path: file.state for path, file in files.items()} == {
        "notes/todo list.txt": "different",
        "data/big.bin": "only_a",
        "logo.png": "only_a",
        "old.txt": "only_a",
        "src/app.py": "same",
    }
    todo = files["notes/todo list.txt"].diff
    assert "-call Ada\n+call Grace\n" in todo
    assert todo.startswith("--- A/notes/todo list.txt\n+++ B/notes/todo list.txt\n")
    # The differing files come first.
    assert next(iter(compare(A, B))).state == "different"


def test_two_large_files_are_never_called_the_same():
    large = "large file changed: data/big.bin\n"

    [file] = compare(large, large)

    assert (file.state, file.diff) == ("different", "")


def test_a_missing_diff_compares_as_no_changes():
    assert [file.state for file in compare("", B)] == ["only_b", "only_b"]
    assert compare("", "") == []
