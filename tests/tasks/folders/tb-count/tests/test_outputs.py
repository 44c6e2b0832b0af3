from pathlib import Path


def test_count_file_exists():
    assert Path("/app/count.txt").exists(), "count.txt is missing"


def test_count_is_right():
    assert Path("/app/count.txt").read_text().strip() == "3", "the count is not 3"


if __name__ == "__main__":
    for name, test in list(globals().items()):
        if name.startswith("test_"):
            try:
                test()
                print(f"PASSED tests/test_outputs.py::{name}")
            except Exception as exc:
                print(f"FAILED tests/test_outputs.py::{name} - {exc}")
