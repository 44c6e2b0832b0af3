"""Tests of the agent CLI harnesses against the real CLIs and fake model APIs."""
