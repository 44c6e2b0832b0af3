import urllib.error
import urllib.request


def test_the_store_keeps_the_greeting():
    # The store is reached by its service name, from the client's container.
    try:
        body = urllib.request.urlopen("http://store:8000/greeting", timeout=5).read()
    except urllib.error.HTTPError as exc:
        raise AssertionError(f"the store answers {exc.code} for /greeting") from None
    assert body == b"hello from the client", f"the store keeps {body!r}"


if __name__ == "__main__":
    for name, test in list(globals().items()):
        if name.startswith("test_"):
            try:
                test()
                print(f"PASSED tests/test_outputs.py::{name}")
            except Exception as exc:
                print(f"FAILED tests/test_outputs.py::{name} - {exc}")
