"""Fakes for unit tests: stand-ins for real servers and processes, injected, never patched.

Each fake is passed in where the real thing would go (a base URL, an httpx transport, a command
line), so the code under test runs unchanged and no test monkeypatches kvtune's internals.
"""
