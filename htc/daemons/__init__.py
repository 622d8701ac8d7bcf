"""The daemons: master, collector, negotiator, schedd (+ shadow), startd (+ starter)."""
