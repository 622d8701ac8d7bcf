"""Wire messages, framing and transports between daemons and tools."""
