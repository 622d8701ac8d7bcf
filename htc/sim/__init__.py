"""A simulated clock and pool that drive the real daemon cores at scale."""
