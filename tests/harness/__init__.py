"""Test harness: real services the tests start themselves (Postgres cluster, HTTP server)."""
