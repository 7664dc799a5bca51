"""A member's metrics: :mod:`.member` (the Scala consumer's JMX metrics, read from the connector at scrape time) and
:mod:`.server` (the scrape endpoint: prometheus_client's WSGI application, with TLS)."""
