"""Scripted stand-ins for the outside world that tests talk to over real interfaces.

Fixtures defined here are not collected automatically: import them into the test module or
conftest that uses them, e.g. ``from fakes.openai_server import fake_model_server``.
"""
