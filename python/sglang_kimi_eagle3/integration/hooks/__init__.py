"""One module per hook: each `install()` queues its hook with SGLang and records its row in the status table.

The order they install in, and the one loop that installs them: integration/__init__.py (HOOK_MODULES).
"""
