"""Turning agent CLIs' own output (JSON lines) into Proctor's normalized events.

One module per output format, each a parser fed line by line (``feed``) and told when the
process ended (``finish``); both return the events to emit, in order. Lines a parser does not
know are skipped, so a newer CLI that adds event types still runs.
"""
