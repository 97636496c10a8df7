"""Compactor: durable, distributed context compaction for LLM-agent platforms.

Pure domain (events, importers, tokens, policy, boundary, lift, summary, invariants), the
session log over object storage, the client and the CLI. No Temporal workflow code here.
"""

__version__ = "0.1.0"
