from pathlib import Path

ANSWER = Path("/app/distinct.txt")


def test_answer_written():
    assert ANSWER.exists(), "distinct.txt is missing"


def test_answer_is_three():
    assert ANSWER.read_text().strip() == "3", f"distinct.txt holds {ANSWER.read_text()!r}"


if __name__ == "__main__":
    for name, test in list(globals().items()):
        if name.startswith("test_"):
            try:
                test()
                print(f"PASSED tests/test_outputs.py::{name}")
            except Exception as exc:
                print(f"FAILED tests/test_outputs.py::{name} - {exc}")
