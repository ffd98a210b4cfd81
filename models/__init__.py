"""Model catalogue, download and verification for the engine's Decision models."""
