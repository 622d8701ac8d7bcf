"""The bundled interposition runtime (checkpoint and remote system calls for native jobs)."""
