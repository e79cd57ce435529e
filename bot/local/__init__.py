"""Local mode: the execution engine on a local git repository, the terminal in place of GitHub.

`plan-cascade run|resume|status|demo` (see :mod:`bot.cli.plan`) drive :mod:`bot.local.runner`,
which builds the engine's `Run` with a :class:`~bot.local.reporter.LocalReporter` (run file and
terminal progress) and a :class:`~bot.local.publisher.LocalPublisher` (batch branches copied
into the user's repository; no pull request).
"""
