"""Model access: the anthropic SDK behind one small interface, and token estimation."""
