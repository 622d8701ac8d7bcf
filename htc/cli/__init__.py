"""The ``htc`` command: a client of the htc library in HTCondor's tool habits."""
