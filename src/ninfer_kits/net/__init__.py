"""Talking to remotes: the rules every remote call obeys, retries, and GitHub's API client."""
