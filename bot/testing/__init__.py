"""Shared test doubles that ship with Plan Cascade (a fake GitHub, scripted models, ...).

Import each from its module, e.g. ``from bot.testing.fake_github import FakeGitHub``.
"""
