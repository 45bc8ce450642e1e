"""Observing running sinks: Prometheus metrics, health endpoints and a status page.

``Session.serve_metrics(host, port)`` (``icesql run|serve --metrics-port PORT``) starts
``server.ObserveServer``, an HTTP server on a thread:

* ``/metrics`` — the Prometheus text format (``metrics.SinkMetrics``: counters fed by the
  engine's ``SinkListener`` events, gauges read from each sink's status at scrape time);
* ``/healthz`` — the process answers; ``/readyz`` — every sink is running and committing
  (``health.readiness``), with a JSON body that says why not;
* ``/`` — ``status.html``, one self-contained page polling ``/status.json``.

Nothing here is imported until ``serve_metrics`` is called: the parser, the shell prompt and
``icesql --help`` stay light, and ``prometheus_client`` is needed only then.
"""
