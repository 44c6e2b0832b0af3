"""The process runner's line splitter: lines come out whole whatever the chunks, and a line
past the cap is cut with a mark saying how much is gone, never held whole in memory."""

from __future__ import annotations

from runner.sandboxes import processes
from runner.sandboxes.processes import LineSplitter


def split(chunks: list[bytes]) -> tuple[list[str], str]:
    lines: list[str] = []
    splitter = LineSplitter("stdout", lambda _stream, line: lines.append(line))
    for chunk in chunks:
        splitter.feed(chunk)
    splitter.close()
    return lines, splitter.text()


def test_lines_come_out_whole_whatever_the_chunks():
    lines, text = split([b"one\ntw", b"o\nthr", b"ee\n", b"no newline"])
    assert lines == ["one", "two", "three", "no newline"]
    assert text == "one\ntwo\nthree\nno newline"


def test_a_line_past_the_cap_is_cut_and_marked(monkeypatch):
    monkeypatch.setattr(processes, "MAX_LINE_BYTES", 10)
    lines, _ = split([b"ab", b"cdefghijklmnop", b"qr\nshort\n"])
    assert lines == ["abcdefghij… [truncated: 8 bytes]", "short"]


def test_a_hundred_megabyte_line_is_never_held_whole():
    lines: list[str] = []
    splitter = LineSplitter("stdout", lambda _stream, line: lines.append(line))
    piece = b"x" * (1 << 20)
    for _ in range(100):
        splitter.feed(piece)
        assert splitter.pending_size <= processes.MAX_LINE_BYTES
    dropped = 100 * len(piece) - processes.MAX_LINE_BYTES
    splitter.feed(b"\n")

    assert lines == ["x" * processes.MAX_LINE_BYTES + f"… [truncated: {dropped} bytes]"]
    assert len(splitter.text()) == processes.MAX_KEPT_CHARS  # what the result keeps is capped too
