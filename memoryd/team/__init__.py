"""Layer 4: team memory: sync client, secret scanner, and the team server with its storage."""
