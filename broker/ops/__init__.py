"""The operations room: the ``pykafka-broker`` command (``cli``), the admin and health-check
commands (``admin_cli``, ``healthcheck``), logging (``logs``), metrics and their HTTP endpoint
(``metrics``, ``metrics_http``)."""
