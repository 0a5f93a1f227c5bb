"""Tenancy: who owns conversations and runs, which agents a key may use, and run rate limits."""
