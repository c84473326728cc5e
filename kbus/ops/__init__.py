"""Running kbus as a service: daemon mode, systemd install, the metrics/health HTTP endpoint, health checks.

Nothing here is on the request path; the broker only calls `start_endpoint` once at startup.
"""
